"""Per-layer profiles keyed by the user's modules.

Every per-layer row np stores is keyed by the module path and class of the user's model (the last entry of the
node's `nn_module_stack`, e.g. `block.expand` / `Conv2d`) plus the op family; ops that belong to no module
(quantize/dequantize, permutes, reshapes, pads that the compiler inserted) are attributed to the producing layer as
overhead. Each tool's raw id (TOSA tensor name, node name) is kept beside the key for drill-down.

    keys.py       the key (no torch)
    graph.py      the layers of a lowered program: which ops were delegated, their module and MACs (torch)
    vela.py       Vela's per-layer CSV joined to the keys through ExecuTorch's Arm debug information (no torch)
    ethos_u.py    the layers.json of an MLIA round on an Ethos-U device (Vela rows + the compile's CPU ops)
    coverage.py   how much of the model a total covers (NPU op share, MAC share) and the marks partial totals carry
    weights.py    weights a quantize step left float, per layer (torch), and the warning when most did
    trace_map.py  at compile time: each instruction of the program -> its graph nodes or delegate ops (torch)
    etdump.py     the runtime's ETDump read with the wheel's flatc and schema (no torch)
    host_times.py a measured round's per-layer times: ETDump events joined through the trace map (no torch)
    files.py      the per-round per-layer file (layers.json) beside the round's artifacts, read without torch
    views.py      top-N layers of a checkpoint, and the N-way compare with the layer diff (no torch)
    numerics.py   each layer's output against INPUT_MODEL's same layer, as SNR: the job's layers_snr.json (torch)
    lineage.py    the old -> new key map of a step that fused or removed layers (bn -> conv), composed (no torch)
"""
