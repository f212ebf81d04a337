"""INPUT_MODEL's run on the evaluation inputs (its outputs and each layer's: layers/numerics.Taps, what every job's
fidelity is measured against), kept beside the step cache so that a run whose INPUT_MODEL and evaluation inputs are
the ones of an earlier run does not load INPUT_MODEL and run it again: every trial of a sweep after the first (0.5 to
3 s each on sample_cpu, more on a bigger model).

Keyed by INPUT_MODEL's checkpoint sha256, the evaluation inputs' digest (each tensor's dtype, shape and bytes) and the
versions that change the values (np, torch). An entry is `<step cache>/references/<kk>/<key>/` holding `taps.pt` and
entry.json, kept by content_store.py with the step cache's rules (whole entries by rename, every file verified on a
hit, a damaged entry a warned miss). `taps.pt` holds plain data only (tensors, lists, tuples, dicts, strings), read
with `torch.load(weights_only=True)` so that no code in the cache runs; a reference whose outputs are not plain data is
not stored. A hit gives the tensors bit for bit, so the fidelities are the ones a recomputation gives.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.content_store import ContentStore, EntryManifest, StoreWords
from np_optimizer.versions import np_version, tool_version

if TYPE_CHECKING:
    from np_optimizer.layers.numerics import Taps

__all__ = ["REFERENCE_LAYOUT", "ReferenceCache", "reference_key", "inputs_digest"]

REFERENCE_LAYOUT = 1  # raised when what an entry holds or how its key is made changes
_FILE = "taps.pt"
_log = logging.getLogger("np.Pipeline")
_WORDS = StoreWords(store="reference cache", item="INPUT_MODEL's reference outputs", redo="running INPUT_MODEL again",
                    without="running INPUT_MODEL without the cache", next_time="computed", record="reference's record")


def inputs_digest(samples: Sequence[tuple[Any, ...]]) -> str:
    """The sha256 of the samples: each tensor's dtype, shape and bytes, in order."""
    import torch

    digest = hashlib.sha256()
    for sample in samples:
        digest.update(b"sample\0")
        for value in sample:
            if isinstance(value, torch.Tensor):
                tensor = value.detach().cpu().contiguous()
                digest.update(f"{tensor.dtype}{tuple(tensor.shape)}\0".encode())
                digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
            else:
                digest.update(f"{type(value).__name__}:{value!r}\0".encode())
    return digest.hexdigest()


def reference_key(input_sha256: str, samples: Sequence[tuple[Any, ...]]) -> str:
    spec = {"input_model": input_sha256, "inputs": inputs_digest(samples), "np": np_version(),
            "torch": tool_version("torch"), "layout": REFERENCE_LAYOUT}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _plain(taps: Taps) -> dict[str, Any]:
    graph = taps.graph
    return {"graph": {"labels": graph.labels, "outputs": graph.outputs, "position": graph.position,
                      "producers": {k: sorted(v) for k, v in graph.producers.items()}, "live": sorted(graph.live),
                      "info": graph.info, "int8_step": graph.int8_step},
            "outputs": taps.outputs, "values": taps.values, "error": taps.error}


def _taps(data: dict[str, Any]) -> Taps:
    from np_optimizer.layers.lineage import LayerGraph
    from np_optimizer.layers.numerics import Taps

    g = data["graph"]
    graph = LayerGraph(labels=list(g["labels"]), outputs=dict(g["outputs"]), position=dict(g["position"]),
                       producers={k: set(v) for k, v in g["producers"].items()}, live=set(g["live"]),
                       info=dict(g["info"]), int8_step=dict(g["int8_step"]))
    return Taps(graph, list(data["outputs"]), dict(data["values"]), data["error"])


class ReferenceCache:
    def __init__(self, steps_root: Path) -> None:
        """`steps_root`: the step cache's folder (step_cache.step_cache_folder()); entries go under references/."""
        self.root = steps_root / "references"
        self._store = ContentStore(self.root, _WORDS, _log)

    def get(self, key: str) -> Taps | None:
        """The stored reference, or None (a damaged entry is discarded with a warning)."""
        import torch

        entry, warning = self._store.get(key)
        if warning:
            _log.warning(warning)
        if entry is None:
            return None
        try:
            return _taps(torch.load(entry.folder / _FILE, weights_only=True))
        except Exception as exc:  # noqa: BLE001 - intact bytes that do not load as a reference: a warned miss
            _log.warning(self._store.discard(key, f"{_FILE} does not load: {type(exc).__name__}"))
            return None

    def entries(self) -> list[EntryManifest]:
        """Every readable entry (np cache prune --kind steps removes them with the steps)."""
        return list(self._store.manifests())

    def put(self, key: str, taps: Taps) -> None:
        """Store `taps` under `key`, when it is plain data (else nothing: the next run computes it again)."""
        import io

        import torch

        buffer = io.BytesIO()
        try:
            torch.save(_plain(taps), buffer)
            buffer.seek(0)
            torch.load(buffer, weights_only=True)  # what a hit will read: refused now, not at every hit
        except Exception:  # noqa: BLE001 - outputs of a type torch loads only with code: not cached
            return
        data = buffer.getvalue()

        def fill(staging: Path) -> None:
            (staging / _FILE).write_bytes(data)

        self._store.put(key, fill,
                        {"kind": "reference", "bytes": len(data)},
                        {_FILE: hashlib.sha256(data).hexdigest()})
