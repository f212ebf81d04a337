"""The ways to give a model: a built-in name, a .pt2 file, file.py:factory (the file's folder copied), an installed
package.module:factory, or a Hugging Face folder. Copy into a project, load back.

Copying checks what it can without importing torch (the file exists, is a .pt2 archive, defines the factory); a
factory is then called once in a process of its own (factory_check.py), so one that fails or hangs does so at
`np projects create`. Loading, which runs the user's code or reads the archive, happens at graph extraction.
"""

from __future__ import annotations

import ast
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import ModelError, NotFoundError
from np_optimizer.models.catalog import get_builtin
from np_optimizer.models.package import PACKAGE_DIR, copy_package, package_layout, sha256_file, tree_sha256
from np_optimizer.records.commands import ModelSpec

if TYPE_CHECKING:
    import torch

__all__ = ["ModelSpec", "copy_model_into", "load_model", "sha256_file"]


def _split_factory(arg: str) -> tuple[str, str] | None:
    path, sep, factory = arg.rpartition(":")
    return (path, factory) if sep and path.endswith(".py") and _dotted(factory) else None


def _dotted(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def _split_module(arg: str) -> tuple[str, str] | None:
    """`package.module:factory`: an installed module (no .py, no path separator)."""
    module, sep, factory = arg.partition(":")
    return (module, factory) if sep and "/" not in arg and _dotted(module) and _dotted(factory) else None


def copy_model_into(arg: str, project_root: Path, *, factory_timeout: float | None = None) -> ModelSpec:
    """Resolve `--model` and copy the model into `<project>/model/` so the project stands on its own; a factory is
    called once (factory_check.py, with its time limit) and its failure raised here."""
    model_dir = project_root / "model"
    factory = _split_factory(arg)
    if factory is not None:
        return _copy_package(Path(factory[0]), factory[1], arg, project_root, factory_timeout)
    module = _split_module(arg)
    if module is not None and not Path(arg).exists():
        return _installed_module(module[0], module[1], arg, project_root, factory_timeout)
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
    if arg.endswith(".py") or Path(arg).suffix or ":" in arg:
        raise ModelError(f"Cannot tell what model '{arg}' is.",
                         hint="Pass a built-in name (`np models ls`), a .pt2 file, path/to/file.py:factory, an "
                              "installed package.module:factory, or a Hugging Face model folder (config.json + "
                              "weights).")
    builtin = get_builtin(arg)
    return ModelSpec("builtin", name=builtin.name, source=arg)


def _copy_package(source: Path, name: str, arg: str, project_root: Path, timeout: float | None) -> ModelSpec:
    """file.py:factory: the folder that holds the file (or its outermost package) copied to model/package/."""
    from np_optimizer.models.factory_check import check_factory

    if not source.is_file():
        raise NotFoundError(f"Model file {source} does not exist.", hint="Pass --model path/to/file.py:factory.",
                            code="NP-MDL-404")
    _check_defines(source, name.partition(".")[0])
    layout = package_layout(source)
    copied = copy_package(layout, project_root)
    entry = f"{layout.target}/{layout.entry.relative_to(layout.copied)}"
    spec = ModelSpec("package", name=layout.entry.stem, file=entry, factory=name, source=arg,
                     sha256=tree_sha256(copied), package=PACKAGE_DIR, module=layout.module)
    check_factory(spec, project_root, label=f"{name}() in {layout.entry}", timeout=timeout,
                  shown=(project_root / PACKAGE_DIR, layout.base))
    return spec


def _installed_module(module: str, name: str, arg: str, project_root: Path, timeout: float | None) -> ModelSpec:
    """package.module:factory: imported from the installed environment; its distribution and version recorded."""
    from np_optimizer.models.factory import installed_distribution
    from np_optimizer.models.factory_check import check_factory

    found = installed_distribution(module)
    spec = ModelSpec("module", name=name.rsplit(".", 1)[-1], factory=name, source=arg, module=module,
                     distribution=found[0] if found else None, version=found[1] if found else None)
    check_factory(spec, project_root, label=f"{name}() of {module}", timeout=timeout)
    return spec


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
    name = str(config.get("_name_or_path") or "").rstrip("/").rsplit("/", 1)[-1] or source.resolve().name
    return ModelSpec("hf", name=name, file="model/hf", source=arg, sha256=tree_sha256(target))


def _check_defines(source: Path, name: str) -> None:
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    except SyntaxError as exc:
        raise ModelError(f"{source}:{exc.lineno}: syntax error: {exc.msg}.", hint="Fix the file, then retry.") from exc
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    imported = {(a.asname or a.name).partition(".")[0] for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    if name not in defined | imported:
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
    if spec.kind in ("package", "module"):
        from np_optimizer.models.factory import load_factory, warn_if_version_changed

        warn_if_version_changed(spec)
        module, inputs = load_factory(spec, project_root)
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
    from np_optimizer.models.factory import load_factory

    module, inputs = load_factory(spec, project_root)  # kind "factory": model/model.py alone (an older np's project)
    return LoadedModel(module, None, inputs)


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
