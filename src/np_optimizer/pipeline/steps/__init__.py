"""Pipeline steps: one module per step kind, holding its config dataclass, run.yaml parser, run.detail.yaml options
and the function that runs it, registered as one `StepSpec` (np_optimizer/config/steps/base.py).

    advanced_quantize.py   AQ: eager-level quantization of Linear layers (LLMs), before export
    graph_optimize.py      GO: output-preserving graph passes
    graph_quantize.py      GQ: PT2E quantization with the backend's quantizer

Adding a step is adding one module here: the step registry finds it by package discovery. A module's top level
imports no torch, since validation reads every spec.
"""
