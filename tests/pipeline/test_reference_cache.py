"""The reference cache (pipeline/reference_cache.py): INPUT_MODEL's outputs and per-layer values on the evaluation
inputs, stored once and read back bit for bit by the next run of the same INPUT_MODEL on the same inputs; keyed by the
inputs too; a damaged entry is a warned miss; outputs that are not plain data are not stored. On the built-in MLP,
exported with torch.export (no np run)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def mlp_taps() -> tuple[list[Any], Any]:
    from np_optimizer.graph.program_io import export_model
    from np_optimizer.layers.numerics import tap
    from np_optimizer.models.zoo import build_builtin

    model, example = build_builtin("mlp")
    program = export_model(model, example)
    samples = [example, tuple(x + 1 for x in example)]
    return samples, tap(program, samples)


def test_a_stored_reference_reads_back_bit_for_bit_under_its_key(tmp_path: Path, mlp_taps: tuple[list[Any], Any]) -> None:
    import torch

    from np_optimizer.pipeline.reference_cache import ReferenceCache, reference_key

    samples, taps = mlp_taps
    assert taps.values and taps.error is None
    cache = ReferenceCache(tmp_path / "steps")
    key = reference_key("a" * 64, samples)
    assert cache.get(key) is None
    cache.put(key, taps)
    got = cache.get(key)
    assert got is not None and got.error is None
    assert got.graph == taps.graph  # labels, producers, liveness, keys: what layer_snr matches layers by
    assert got.values.keys() == taps.values.keys()
    assert all(torch.equal(a, b) for k in taps.values for a, b in zip(got.values[k], taps.values[k], strict=True))
    assert all(torch.equal(a, b) for a, b in zip(got.outputs, taps.outputs, strict=True))
    # another INPUT_MODEL, or other inputs (one value changed), is another key
    assert reference_key("b" * 64, samples) != key
    changed = [samples[0], (samples[1][0].clone().index_fill_(0, torch.tensor([0]), 7.0),)]
    assert reference_key("a" * 64, changed) != key


def test_a_damaged_entry_is_a_warned_miss_and_odd_outputs_are_not_stored(
        tmp_path: Path, mlp_taps: tuple[list[Any], Any], caplog: pytest.LogCaptureFixture) -> None:
    from dataclasses import replace

    from np_optimizer.pipeline.reference_cache import ReferenceCache, reference_key

    samples, taps = mlp_taps
    cache = ReferenceCache(tmp_path / "steps")
    key = reference_key("a" * 64, samples)
    cache.put(key, taps)
    stored = cache.root / key[:2] / key / "taps.pt"
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF
    stored.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="np"):
        assert cache.get(key) is None
    assert any("reference cache" in r.getMessage() and "discarded" in r.getMessage() for r in caplog.records)
    assert not stored.parent.exists()
    # an output torch would load only by running code: nothing stored, no error
    other = reference_key("c" * 64, samples)
    cache.put(other, replace(taps, outputs=[logging.getLogger("np")]))
    assert cache.get(other) is None and not (cache.root / other[:2] / other).exists()
