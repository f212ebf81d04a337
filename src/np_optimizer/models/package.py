"""A model's Python code as a folder: `--model DIR/file.py:factory` copies the folder that holds the file into
`<project>/model/package/`, so the modules and subpackages beside it (and small data files it reads) come along.

When that folder is a Python package (it holds `__init__.py`), its outermost package is copied under its own name
instead, so `from .blocks import Block` and `from pkg.blocks import Block` both import. Left out: `.git` and other
hidden folders, `__pycache__`, virtual environments (a folder with `pyvenv.cfg` or `conda-meta`, or named `venv`,
`site-packages`, `node_modules`), np workspaces, and what the folder's `.npignore` names (one glob pattern a line).
A file over MAX_FILE_BYTES, more than MAX_TOTAL_BYTES or MAX_FILES in all is refused before anything is copied.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from np_optimizer.errors import ModelError
from np_optimizer.files import sha256_file

__all__ = ["PACKAGE_DIR", "MAX_FILE_BYTES", "MAX_TOTAL_BYTES", "MAX_FILES", "IGNORE_FILE", "PackageLayout",
           "package_layout", "copy_package", "sha256_file", "tree_sha256"]

PACKAGE_DIR = "model/package"  # relative to the project: the folder put first on sys.path when the model loads
MAX_FILE_BYTES = 100 * 2**20  # a ResNet-50's weights fit; a dataset does not
MAX_TOTAL_BYTES = 500 * 2**20
MAX_FILES = 5000
IGNORE_FILE = ".npignore"
WORKSPACE_MARKER = "np-workspace.json"  # workspace.WORKSPACE_FILE (a floor above): a workspace is never copied
_SKIPPED = {"__pycache__", "venv", "site-packages", "node_modules"}
_CODE = "NP-MDL-413"


@dataclass(frozen=True)
class PackageLayout:
    """Where the code of `entry` comes from and where it goes."""

    entry: Path  # the file that defines the factory
    copied: Path  # the folder copied: the file's folder, or its outermost package
    base: Path  # the folder that goes on sys.path: `copied`, or its parent when `copied` is a package

    @property
    def module(self) -> str:
        """The entry's dotted module name, relative to `base`."""
        return ".".join(self.entry.relative_to(self.base).with_suffix("").parts)

    @property
    def target(self) -> str:
        """Where `copied` goes, relative to the project."""
        return PACKAGE_DIR if self.copied == self.base else f"{PACKAGE_DIR}/{self.copied.name}"


def package_layout(entry: Path) -> PackageLayout:
    entry = entry.resolve()
    copied = entry.parent
    while (copied / "__init__.py").is_file() and copied.name.isidentifier() and copied.parent != copied:
        copied = copied.parent
    if copied != entry.parent:  # `copied` is now the folder above the outermost package
        package = entry.parent
        while package.parent != copied:
            package = package.parent
        return PackageLayout(entry, package, copied)
    return PackageLayout(entry, copied, copied)


def _patterns(root: Path) -> list[str]:
    try:
        lines = (root / IGNORE_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def _ignored(relative: str, is_dir: bool, patterns: list[str]) -> bool:
    name = relative.rsplit("/", 1)[-1]
    for pattern in patterns:
        if pattern.endswith("/") and not is_dir:
            continue
        bare = pattern.rstrip("/").lstrip("/")
        if fnmatch.fnmatchcase(relative, bare) or ("/" not in bare and fnmatch.fnmatchcase(name, bare)):
            return True
    return False


def _skipped_dir(path: Path) -> bool:
    return (path.name.startswith(".") or path.name in _SKIPPED or path.is_symlink()
            or any((path / marker).exists() for marker in ("pyvenv.cfg", "conda-meta", WORKSPACE_MARKER)))


def _walk(root: Path) -> Iterator[Path]:
    """The files to copy, in a fixed order; linked files are followed, linked folders are not walked (no loops)."""
    patterns = _patterns(root)
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        rel = here.relative_to(root).as_posix()
        prefix = "" if rel == "." else rel + "/"
        dirs[:] = sorted(d for d in dirs if not _skipped_dir(here / d) and not _ignored(prefix + d, True, patterns))
        for name in sorted(names):
            path = here / name
            if not name.endswith((".pyc", ".pyo")) and not _ignored(prefix + name, False, patterns) and path.is_file():
                yield path


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def _files(layout: PackageLayout) -> list[Path]:
    """The files to copy; a folder too big is refused as soon as the walk sees it (a home folder is not walked to
    its end), naming the file, or the largest file, or the subfolder with the most files."""
    root = layout.copied
    hint = (f"np copies the folder that holds {layout.entry.name} ({root}) into the project: put the model's code in "
            f"a folder of its own, move datasets and other large files out (the factory can still read them by "
            f"absolute path), or name them in {root / IGNORE_FILE} (one glob pattern a line); or pass a .pt2 saved "
            "with torch.export.save.")
    files: list[Path] = []
    total, largest, folders = 0, (0, root), Counter[str]()
    for path in _walk(root):
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ModelError(f"{path} is {_mib(size)}; np copies files of at most {_mib(MAX_FILE_BYTES)} with the "
                             "model's code.", hint=hint, code=_CODE)
        files.append(path)
        total, largest = total + size, max(largest, (size, path))
        parts = path.relative_to(root).parts
        if len(parts) > 1:
            folders[parts[0]] += 1
        if total > MAX_TOTAL_BYTES:
            raise ModelError(f"{root} holds more than {_mib(MAX_TOTAL_BYTES)} to copy with the model's code (largest "
                             f"file: {largest[1]}, {_mib(largest[0])}).", hint=hint, code=_CODE)
        if len(files) > MAX_FILES:
            most = folders.most_common(1)
            where = f" ({most[0][1]} of them under {root / most[0][0]})" if most else ""
            raise ModelError(f"{root} holds more than {MAX_FILES} files to copy with the model's code{where}.",
                             hint=hint, code=_CODE)
    return files


def copy_package(layout: PackageLayout, project_root: Path) -> Path:
    """Copy the model's folder into the project; returns the copy's folder (layout.target under project_root)."""
    if (layout.copied / WORKSPACE_MARKER).exists():
        raise ModelError(f"{layout.entry} lies in the np workspace {layout.copied}, whose folder np would copy into "
                         "the project.", hint=f"Move {layout.entry.name} and the modules it imports into a folder of "
                                              "their own, then pass that path.", code=_CODE)
    files = _files(layout)
    target = project_root / layout.target
    for path in files:
        destination = target / path.relative_to(layout.copied)
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(path, destination)
        except OSError as exc:
            raise ModelError(f"{path} cannot be copied into the project: {exc.strerror or exc}.",
                             hint="Make the model's folder readable, or name the file in its .npignore.",
                             code=_CODE) from None
    (project_root / PACKAGE_DIR).mkdir(parents=True, exist_ok=True)
    return target


def tree_sha256(folder: Path) -> str:
    """One digest of every file under `folder`: names and contents, in a fixed order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(sha256_file(path).encode())
    return digest.hexdigest()
