"""Models: the built-in catalogue (no torch) and the ways a project's model is stored and loaded."""

from np_optimizer.models.catalog import BUILTIN_MODELS, BuiltinModel, get_builtin

__all__ = ["BUILTIN_MODELS", "BuiltinModel", "get_builtin"]
