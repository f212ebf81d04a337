"""The ways to give a model (built-in name, .pt2 file, file.py:factory, Hugging Face folder): copy into a project,
load back.

Copying checks what it can without importing torch (the file exists, is a .pt2 archive, defines the factory);
loading, which runs the user's code or reads the archive, happens at graph extraction.
"""

from __future__ import annotations

import ast
import hashlib
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import ModelError, NotFoundError
from np_optimizer.models.catalog import get_builtin
from np_optimizer.records.commands import ModelSpec

if TYPE_CHECKING:
    import torch

__all__ = ["ModelSpec", "copy_model_into", "load_model", "sha256_file"]


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _split_factory(arg: str) -> tuple[str, str] | None:
    path, sep, factory = arg.rpartition(":")
    return (path, factory) if sep and path.endswith(".py") and factory.isidentifier() else None


def copy_model_into(arg: str, project_root: Path) -> ModelSpec:
    """Resolve `--model` and copy the model into `<project>/model/` so the project stands on its own."""
    model_dir = project_root / "model"
    factory = _split_factory(arg)
    if factory is not None:
        source, name = Path(factory[0]), factory[1]
        if not source.is_file():
            raise NotFoundError(f"Model file {source} does not exist.", hint="Pass --model path/to/file.py:factory.",
                                code="NP-MDL-404")
        _check_defines(source, name)
        model_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, model_dir / "model.py")
        return ModelSpec("factory", name=source.stem, file="model/model.py", factory=name, source=arg,
                         sha256=sha256_file(source))
    if arg.endswith(".pt2"):
        source = Path(arg)
        if not source.is_file():
            raise NotFoundError(f"Model file {source} does not exist.", hint="Pass a file saved with torch.export.save.",
                                code="NP-MDL-404")
        if not zipfile.is_zipfile(source):
            raise ModelError(f"{source} is not a .pt2 archive (not a zip file).",
                             hint="Save the model with torch.export.save(torch.export.export(model, inputs), path).")
        model_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, model_dir / "model.pt2")
        return ModelSpec("pt2", name=source.stem, file="model/model.pt2", source=arg, sha256=sha256_file(source))
    if Path(arg).is_dir():
        return _copy_hf_folder(Path(arg), arg, model_dir)
    if arg.endswith(".py") or Path(arg).suffix:
        raise ModelError(f"Cannot tell what model '{arg}' is.",
                         hint="Pass a built-in name (`np models ls`), a .pt2 file, file.py:factory, or a Hugging "
                              "Face model folder (config.json + weights).")
    builtin = get_builtin(arg)
    return ModelSpec("builtin", name=builtin.name, source=arg)


def _copy_hf_folder(source: Path, arg: str, model_dir: Path) -> ModelSpec:
    """A Hugging Face model folder (config.json + weights) copied to <project>/model/hf/; loaded offline later."""
    from np_optimizer.models.hf_folder import HF_PIN, check_hf_folder, hf_unavailable_reason

    config = check_hf_folder(source)
    reason = hf_unavailable_reason()
    if reason:
        raise ModelError(reason, hint=f"Install it (`pip install {HF_PIN}`), then create the project again.",
                         code="NP-MDL-501")
    target = model_dir / "hf"
    model_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target)
    digest = hashlib.sha256()
    for path in sorted(p for p in target.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(target)).encode())
        digest.update(sha256_file(path).encode())
    name = str(config.get("_name_or_path") or "").rstrip("/").rsplit("/", 1)[-1] or source.resolve().name
    return ModelSpec("hf", name=name, file="model/hf", source=arg, sha256=digest.hexdigest())


def _check_defines(source: Path, name: str) -> None:
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    except SyntaxError as exc:
        raise ModelError(f"{source}:{exc.lineno}: syntax error: {exc.msg}.", hint="Fix the file, then retry.") from exc
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if name not in defined:
        raise ModelError(f"{source} defines no top-level '{name}'.",
                         hint=f"Top-level functions there: {', '.join(sorted(defined)) or 'none'}; "
                              "the factory must return (model, example_inputs).")


@dataclass
class LoadedModel:
    """Either an eager module with example inputs, or an already exported program (from a .pt2)."""

    module: torch.nn.Module | None
    exported: Any | None  # torch.export.ExportedProgram
    example_inputs: tuple[torch.Tensor, ...]


def load_model(spec: ModelSpec, project_root: Path) -> LoadedModel:
    import torch

    if spec.kind == "builtin":
        from np_optimizer.models.zoo import build_builtin

        module, inputs = build_builtin(spec.name, spec.seed)
        return LoadedModel(module, None, inputs)
    path = project_root / (spec.file or "model")
    if spec.kind == "hf":
        if not spec.file or not (path / "config.json").is_file():
            raise NotFoundError(f"The project's model folder {path} is missing or has no config.json.",
                                hint="Recreate the project with `np projects create --model path/to/folder`.",
                                code="NP-MDL-404")
        from np_optimizer.models.hf_folder import load_hf_folder

        module, inputs = load_hf_folder(path)
        return LoadedModel(module, None, inputs)
    if not spec.file or not path.is_file():
        raise NotFoundError(f"The project's model file {path} is missing.",
                            hint="Recreate the project with `np projects create --model ...`.", code="NP-MDL-404")
    if spec.kind == "pt2":
        try:
            program = torch.export.load(str(path))
        except Exception as exc:  # torch raises many types for a bad archive
            raise ModelError(f"Cannot load {path}: {exc}".splitlines()[0],
                             hint="The file must be written by torch.export.save with this torch version.") from exc
        return LoadedModel(None, program, _example_inputs_of(program))
    return _load_factory(path, spec.factory or "")


def _example_inputs_of(program: Any) -> tuple[torch.Tensor, ...]:
    """The program's saved example inputs, or seeded random ones shaped like its placeholders."""
    import torch

    saved = getattr(program, "example_inputs", None)
    if saved:
        args, _kwargs = saved
        if all(isinstance(a, torch.Tensor) for a in args):
            return tuple(args)
    generator = torch.Generator().manual_seed(0)
    inputs = []
    for spec in program.graph_signature.input_specs:
        if spec.kind.name != "USER_INPUT":
            continue
        node = next(n for n in program.graph.nodes if n.name == spec.arg.name)
        val = node.meta["val"]
        inputs.append(torch.randn(tuple(val.shape), generator=generator).to(val.dtype))
    return tuple(inputs)


def _load_factory(path: Path, factory: str) -> LoadedModel:
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location(f"np_user_model_{abs(hash(path))}", path)
    if spec is None or spec.loader is None:
        raise ModelError(f"Cannot import {path}.", hint="Check that it is a Python file.")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        result = getattr(module, factory)()
    except Exception as exc:
        raise ModelError(f"{path.name}:{factory}() failed: {type(exc).__name__}: {exc}",
                         hint="Run the factory in Python to see the full error.") from exc
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module)):
        raise ModelError(f"{path.name}:{factory}() must return (model, example_inputs), got {type(result).__name__}.",
                         hint="Return a torch.nn.Module and a tuple of example input tensors.")
    model, inputs = result
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, list)) or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise ModelError(f"{path.name}:{factory}() returned example inputs that are not tensors.",
                         hint="Return example_inputs as a tuple of tensors, e.g. (torch.randn(1, 3, 32, 32),).")
    return LoadedModel(model.eval(), None, tuple(inputs))
