"""Labelled evaluation datasets through `np datasets add` and `np projects create --evaluation-dataset`: both layouts
load and are copied with their transform recorded; every bad dataset is one clear error naming the file, exit 3, and
leaves the project as it was. The project's model is the built-in small_cnn (input 1x3x32x32, 10 class scores)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from np_optimizer.errors import EXIT_CONFIG


@pytest.fixture
def project(run_np, tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "np-workspace.json").write_text("{}")
    assert run_np("projects", "create", "-n", "cnn", "-m", "small_cnn", "-d", "raspberry_pi_5", cwd=ws).exit_code == 0
    return ws / "cnn"


def _png(path: Path, size: int = 32, value: int = 128) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((size, size, 3), value, dtype=np.uint8)).save(path)
    return path


def test_image_folder_is_checked_copied_and_recorded(run_np, project: Path, tmp_path: Path) -> None:
    data = tmp_path / "imgs"
    for cls in ("0", "3", "9"):
        _png(data / cls / "a.png", size=40)  # resized to 32x32
        _png(data / cls / "b.png", size=24)
    np.save(data / "3" / "c.npy", np.zeros((3, 32, 32), dtype=np.float32))  # a tensor sample beside the images
    result = run_np("datasets", "add", str(data), "--mean", "0.5", "--std", "0.25", "--json", cwd=project)
    assert result.exit_code == 0, result.stdout + result.stderr
    entry = result.json
    assert (entry["samples"], entry["classes"], entry["format"]) == (7, 3, "image_folder")
    assert entry["transform"]["resize"] == [32, 32] and entry["transform"]["mean"] == [0.5] * 3
    assert entry["transform"]["std"] == [0.25] * 3
    assert sorted(p.name for p in (project / "data" / "evaluation" / "3").iterdir()) == ["a.png", "b.png", "c.npy"]
    assert json.loads((project / "project.json").read_text())["evaluation_dataset"]["samples"] == 7
    info = run_np("datasets", "info", "--json", cwd=project).json
    assert info["evaluation_dataset"]["name"] == "imgs"


@pytest.mark.parametrize("suffix", [".npz", ".pt"])
def test_tensor_files_load_without_pickles(run_np, project: Path, tmp_path: Path, suffix: str) -> None:
    inputs, labels = np.random.default_rng(0).random((5, 3, 32, 32), dtype=np.float32), np.array([0, 1, 2, 3, 9])
    path = tmp_path / f"set{suffix}"
    if suffix == ".npz":
        np.savez(path, inputs=inputs, labels=labels)
    else:
        torch.save({"inputs": torch.from_numpy(inputs), "labels": torch.from_numpy(labels)}, path)
    result = run_np("datasets", "add", str(path), "--json", cwd=project)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert (result.json["format"], result.json["samples"]) == ("tensors", 5)
    assert (project / "data" / "evaluation" / path.name).is_file()


class _Evil:  # a pickle that would run code if np unpickled it
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (Path("/tmp/np-evil-was-unpickled"),))


def _bad_cases(tmp: Path) -> list[tuple[str, Path, str]]:
    """(case, dataset path, the file or folder the message must name)."""
    cases = []
    empty = tmp / "empty"
    empty.mkdir(parents=True)
    (empty / "readme.txt").write_text("no classes here")
    cases.append(("no class folders", empty, str(empty)))
    hollow = tmp / "hollow"
    _png(hollow / "0" / "a.png")
    (hollow / "1").mkdir()
    cases.append(("empty class folder", hollow, str(hollow / "1")))
    broken = tmp / "broken"
    _png(broken / "0" / "a.png")
    (broken / "0" / "b.png").write_bytes(b"\x89PNG\r\n\x1a\n this is not an image")
    cases.append(("unreadable image", broken, str(broken / "0" / "b.png")))
    shape = tmp / "shape"
    (shape / "0").mkdir(parents=True)
    np.save(shape / "0" / "x.npy", np.zeros((3, 16, 16), dtype=np.float32))
    cases.append(("wrong sample shape", shape, str(shape / "0" / "x.npy")))
    many = tmp / "many"
    for cls in range(12):  # 12 class folders, the model gives 10 scores
        _png(many / f"c{cls:02d}" / "a.png")
    cases.append(("more classes than outputs", many, str(many / "c10")))
    out_of_range = tmp / "range.npz"
    np.savez(out_of_range, inputs=np.zeros((2, 3, 32, 32), np.float32), labels=np.array([1, 10]))
    cases.append(("label out of range", out_of_range, str(out_of_range)))
    missing = tmp / "missing.npz"
    np.savez(missing, inputs=np.zeros((2, 3, 32, 32), np.float32))
    cases.append(("no labels array", missing, str(missing)))
    count = tmp / "count.npz"
    np.savez(count, inputs=np.zeros((3, 3, 32, 32), np.float32), labels=np.array([1, 2]))
    cases.append(("inputs and labels differ in count", count, str(count)))
    objects = tmp / "objects.npz"
    np.savez(objects, inputs=np.array([_Evil()], dtype=object), labels=np.array([1]))
    cases.append(("object array in .npz", objects, str(objects)))
    evil = tmp / "evil.pt"
    evil.write_bytes(pickle.dumps({"inputs": _Evil(), "labels": _Evil()}))
    cases.append(("arbitrary pickle in .pt", evil, str(evil)))
    float_labels = tmp / "floats.npz"
    np.savez(float_labels, inputs=np.zeros((2, 3, 32, 32), np.float32), labels=np.array([0.5, 1.0]))
    cases.append(("float labels", float_labels, str(float_labels)))
    batch_shape = tmp / "batch.npz"
    np.savez(batch_shape, inputs=np.zeros((2, 3, 28, 28), np.float32), labels=np.array([0, 1]))
    cases.append(("wrong inputs shape", batch_shape, str(batch_shape)))
    return cases


def test_bad_datasets_are_clear_errors_naming_the_file(run_np, project: Path, tmp_path: Path) -> None:
    before = (project / "project.json").read_text()
    marker = Path("/tmp/np-evil-was-unpickled")
    marker.unlink(missing_ok=True)
    for case, path, named in _bad_cases(tmp_path / "bad"):
        result = run_np("datasets", "add", str(path), cwd=project)
        assert result.exit_code == EXIT_CONFIG, (case, result.stdout, result.stderr)
        text = " ".join((result.stdout + result.stderr).split())
        assert named in text, (case, text)
        assert "Traceback" not in text and "Hint:" in text, (case, text)
        as_json = run_np("datasets", "add", str(path), "--json", cwd=project).json
        assert as_json["code"] == "NP-DAT-422" and named in as_json["message"], case
    assert not marker.exists(), "np unpickled an object from a dataset"
    assert (project / "project.json").read_text() == before  # nothing attached, nothing half-copied
    assert not (project / "data" / "evaluation").exists()


def test_missing_dataset_and_create_with_a_bad_one(run_np, project: Path, tmp_path: Path) -> None:
    gone = run_np("datasets", "add", str(tmp_path / "nope"), cwd=project)
    assert gone.exit_code == EXIT_CONFIG and "does not exist" in gone.stderr + gone.stdout
    bad = tmp_path / "range.npz"
    np.savez(bad, inputs=np.zeros((1, 3, 32, 32), np.float32), labels=np.array([-1]))
    ws = project.parent
    result = run_np("projects", "create", "-n", "cnn2", "-m", "small_cnn", "-d", "raspberry_pi_5",
                    "--evaluation-dataset", str(bad), cwd=ws)
    assert result.exit_code == EXIT_CONFIG and str(bad) in " ".join((result.stdout + result.stderr).split())
    assert not (ws / "cnn2").exists()  # a failed create leaves nothing half-made
