"""Calling a model factory: Python code that returns the model and its example inputs.

Three places the code comes from (ModelSpec.kind):
- "package": the folder copied into `<project>/model/package/` (models/package.py). It goes first on sys.path while
  the module is imported and the factory runs; afterwards sys.path and sys.modules are as they were (the folder's
  modules dropped, others of the same names put back), so two projects with a `helper_blocks.py` each load side by
  side in one process. An import inside forward() that is not also made when the module loads is therefore not
  found later: import at the top of the file.
- "module": an installed module (`package.module:factory`); the distribution and version it came from are recorded.
- "factory": a project made by an older np, one file at model/model.py, loaded on its own as before.

What the factory may return: `(model, example_inputs)`; an object with `get_eager_model()` and `get_example_inputs()`
(ExecuTorch's examples, `executorch.examples.models.lstm:LSTMModel`); or an nn.Module with `get_example_inputs()` or
`example_inputs`. Example inputs may nest (a tuple of tensors inside the tuple): the model is then wrapped so that it
takes the tensors flat, which is what np's checkpoints and datasets hold. A failure names the exception's last line
and the innermost line of the user's code it came from, never a traceback.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import ConfigError, ModelError, NotFoundError
from np_optimizer.logs import get_logger
from np_optimizer.records.commands import ModelSpec

if TYPE_CHECKING:
    import torch

__all__ = ["load_factory", "installed_distribution", "installed_version", "warn_if_version_changed"]


@dataclass(frozen=True)
class _Site:
    """Where a factory's code is, for the message when it fails."""

    label: str  # "build() in /src/pkg/net.py"
    roots: tuple[str, ...]  # the user's code: a frame under one of these is theirs
    rerun: str  # a command that shows the full traceback
    shown: tuple[str, str] | None = None  # a path under [0] is shown under [1] (the project's copy -> the user's folder)
    note: str = ""  # said first in the hint
    module: str | None = None  # the installed module asked for (kind "module")

    def show(self, path: str) -> str:
        return _show(path, self.shown)


def _show(path: str, shown: tuple[str, str] | None) -> str:
    if shown and _under(path, (shown[0],)):
        return shown[1] + path[len(shown[0]):]
    return path


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _last_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in "".join(traceback.format_exception_only(type(exc), exc)).splitlines() if ln.strip()]
    name = type(exc).__name__
    last = lines[-1] if lines else name
    return last if last.startswith(name) else f"{name}: {last}"


def _user_line(exc: BaseException, roots: tuple[str, ...]) -> str | None:
    """file:line of the innermost frame in the user's code (for a SyntaxError, the line that does not parse)."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno and _under(exc.filename, roots):
        return f"{exc.filename}:{exc.lineno}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _under(f.filename, roots)]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


def _failure(exc: Exception, site: _Site) -> ConfigError:
    """The one-line error for an exception raised while importing the code or calling the factory."""
    if isinstance(exc, ConfigError):
        return exc
    last = _last_line(exc)
    where = _user_line(exc, site.roots)
    message = f"{site.show(where)}: {last} (from {site.label})" if where else f"{site.label} failed: {last}"
    rerun = f"For the full traceback: {site.rerun}"
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        if site.module and (site.module == exc.name or site.module.startswith(exc.name + ".")):
            return NotFoundError(f"No module {exc.name} is installed here (for --model {site.module}:...).",
                                 hint="Install the package that provides it, or pass path/to/file.py:factory to copy "
                                      "the code into the project.", code="NP-MDL-404")
        top = exc.name.partition(".")[0]
        own = "" if site.module else (" or, if it is your own module, put it in the folder that holds the factory's "
                                      "file (np copies that folder into the project)")
        return ModelError(message, hint=f"{site.note}Install {top} in this environment{own}. {rerun}",
                          code="NP-MDL-501")
    return ModelError(message, hint=f"{site.note}Fix the code there. {rerun}")


@contextlib.contextmanager
def _isolated_imports(base: Path) -> Iterator[None]:
    """`base` first on sys.path while its code is imported and run; then sys.path and sys.modules as before."""
    names = {p.name.split(".", 1)[0] for p in base.iterdir()} - set(sys.stdlib_module_names) - {""}
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k.partition(".")[0] in names}
    entry, bytecode = str(base), sys.dont_write_bytecode
    sys.path.insert(0, entry)
    sys.dont_write_bytecode = True  # the project's copy stays as copied (no __pycache__ in it)
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.dont_write_bytecode = bytecode
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)
        sys.path_importer_cache.pop(entry, None)
        for key, module in list(sys.modules.items()):
            if _comes_from(module, entry):
                del sys.modules[key]
        sys.modules.update(saved)


def _comes_from(module: Any, folder: str) -> bool:
    """Whether a sys.modules entry was loaded from `folder` (its file, or a namespace package's path, is there)."""
    try:  # an entry may be anything (None, a lazy module whose attributes import)
        paths = [str(getattr(module, "__file__", None) or ""), *(str(p) for p in getattr(module, "__path__", None) or ())]
    except Exception:
        return False
    return any(p and _under(p, (folder,)) for p in paths)


def _resolve(module: Any, factory: str) -> Any:
    target = module
    for part in factory.split("."):
        if not hasattr(target, part):
            names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
            raise NotFoundError(f"{module.__name__} has no {factory}.",
                                hint=f"Callables there: {', '.join(names[:12]) or 'none'}"
                                     f"{' ...' if len(names) > 12 else ''}.", code="NP-MDL-404")
        target = getattr(target, part)
    if not callable(target):
        raise ModelError(f"{module.__name__}.{factory} is a {type(target).__name__}, not a function or class.",
                         hint="Name a function or class that builds the model.")
    return target


def _as_model(result: Any, label: str) -> tuple[Any, Any]:
    """(module, example inputs) from whatever the factory returned; runs user code (get_eager_model ...)."""
    import torch

    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module):
        return result[0], result[1]
    if callable(getattr(result, "get_eager_model", None)) and callable(getattr(result, "get_example_inputs", None)):
        return result.get_eager_model(), result.get_example_inputs()  # ExecuTorch's EagerModelBase
    if isinstance(result, torch.nn.Module):
        getter = getattr(result, "get_example_inputs", None)
        if callable(getter):
            return result, getter()
        if getattr(result, "example_inputs", None) is not None:
            return result, result.example_inputs
    raise ModelError(f"{label} must return (model, example_inputs), got {type(result).__name__}.",
                     hint="Return a torch.nn.Module and a tuple of example input tensors, or an object with "
                          "get_eager_model() and get_example_inputs() (as ExecuTorch's example models).")


def _flat(model: Any, inputs: Any, label: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The model and its inputs as a flat tuple of tensors (nested inputs: the model wrapped to take them flat)."""
    import torch

    from np_optimizer.adapters.torch_private import tree_flatten

    if not isinstance(model, torch.nn.Module):
        raise ModelError(f"{label} gave a model that is not a torch.nn.Module ({type(model).__name__}).",
                         hint="Return a torch.nn.Module and a tuple of example input tensors.")
    if isinstance(inputs, torch.Tensor):
        return model, (inputs,)
    leaves, structure = tree_flatten(tuple(inputs) if isinstance(inputs, (tuple, list)) else inputs)
    if not isinstance(inputs, (tuple, list)) or not leaves or not all(isinstance(t, torch.Tensor) for t in leaves):
        raise ModelError(f"{label} returned example inputs that are not tensors.",
                         hint="Return example_inputs as a tuple of tensors, e.g. (torch.randn(1, 3, 32, 32),).")
    if all(isinstance(t, torch.Tensor) for t in inputs):
        return model, tuple(inputs)
    from np_optimizer.models.zoo import FlatInputs

    return FlatInputs(model, structure), tuple(leaves)


def _call(module: Any, factory: str, label: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    model, inputs = _as_model(_resolve(module, factory)(), label)
    return _flat(model, inputs, label)


def _top_root(module: str) -> str | None:
    """The folder (or file) of an installed module's top-level package: its code counts as the user's."""
    import importlib.util

    with contextlib.suppress(Exception):
        found = importlib.util.find_spec(module.partition(".")[0])
        if found is not None and found.submodule_search_locations:
            return str(list(found.submodule_search_locations)[0])
        if found is not None and found.origin:
            return found.origin
    return None


def load_factory(spec: ModelSpec, project_root: Path, *,
                 shown: tuple[Path, Path] | None = None) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """Import the project's factory and call it: (model in eval mode, example inputs as a flat tuple of tensors).

    `shown`: show paths under shown[0] (the project's copy) as under shown[1] (the user's folder), at create time.
    """
    factory = spec.factory or ""
    if spec.kind == "module":
        module_name = spec.module or ""
        root = _top_root(module_name)
        site = _Site(f"{factory}() of {module_name}", (root,) if root else (),
                     f"python -c 'import {module_name}; {module_name}.{factory}()'", module=module_name)
        try:
            model, inputs = _call(importlib.import_module(module_name), factory, site.label)
        except Exception as exc:
            raise _failure(exc, site) from exc
        return model.eval(), inputs
    if spec.kind == "package":
        base = (project_root / (spec.package or "")).resolve()
        entry = (project_root / (spec.file or "")).resolve()
        mapped = (str(shown[0].resolve()), str(shown[1])) if shown else None
        note = "" if shown else f"The project runs its own copy of the code ({base}): fix it there, or recreate " \
                                "the project. "
        module_name = spec.module or entry.stem
        site = _Site(f"{factory}() in {_show(str(entry), mapped)}", (str(base),),
                     f"cd {mapped[1] if mapped else base} && python -c 'import {module_name}; "
                     f"{module_name}.{factory}()'", mapped, note)
        if not base.is_dir() or not entry.is_file():
            raise NotFoundError(f"The project's model code {entry} is missing.",
                                hint="Recreate the project with `np projects create --model path/to/file.py:factory`.",
                                code="NP-MDL-404")
        with _isolated_imports(base):
            try:
                model, inputs = _call(importlib.import_module(module_name), factory, site.label)
            except Exception as exc:
                raise _failure(exc, site) from exc
        return model.eval(), inputs
    return _load_single_file(project_root / (spec.file or ""), factory)


def _load_single_file(path: Path, factory: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A project made by an older np: model/model.py alone, imported under a name of its own."""
    import importlib.util

    path = path.resolve()
    site = _Site(f"{factory}() in {path}", (str(path),), f"cd {path.parent} && python -c 'import {path.stem}; "
                 f"{path.stem}.{factory}()'", note="The project runs its own copy of the code: fix it there, or "
                                                   "recreate the project. ")
    found = importlib.util.spec_from_file_location(f"np_user_model_{abs(hash(path))}", path)
    if found is None or found.loader is None:
        raise ModelError(f"Cannot import {path}.", hint="Check that it is a Python file.")
    module = importlib.util.module_from_spec(found)
    try:
        found.loader.exec_module(module)
        model, inputs = _call(module, factory, site.label)
    except Exception as exc:
        raise _failure(exc, site) from exc
    return model.eval(), inputs


def installed_distribution(module: str) -> tuple[str, str] | None:
    """(distribution, version) that installed the top-level package of `module`, or None (not from one)."""
    from importlib import metadata

    for name in metadata.packages_distributions().get(module.partition(".")[0], []):
        with contextlib.suppress(metadata.PackageNotFoundError):
            return name, metadata.version(name)
    return None


def installed_version(spec: ModelSpec) -> str | None:
    """The version of the spec's distribution installed now (kind "module"), or None."""
    from importlib import metadata

    if spec.kind != "module" or not spec.distribution:
        return None
    try:
        return metadata.version(spec.distribution)
    except metadata.PackageNotFoundError:
        return None


def warn_if_version_changed(spec: ModelSpec) -> None:
    """One warning line when the installed module's distribution is not the version the project recorded."""
    now = installed_version(spec)
    if spec.kind == "module" and spec.distribution and now != spec.version:
        get_logger("Models").warning(
            f"The project was created with {spec.distribution} {spec.version}, but {now or 'no version'} is installed "
            f"now: {spec.module}:{spec.factory} may build another model (recreate the project to record this one).")
