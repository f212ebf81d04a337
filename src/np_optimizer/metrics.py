"""Metric vocabulary shared by records, the device catalogue, profiling and reports."""

from __future__ import annotations

from enum import Enum

__all__ = ["MetricType", "UNITS", "HIGHER_IS_BETTER", "HEADLINE", "SHOWN"]


class MetricType(str, Enum):
    LATENCY = "LATENCY"
    MEMORY = "MEMORY"
    MODEL_WEIGHT_MEMORY = "MODEL_WEIGHT_MEMORY"
    MACS = "MACS"
    PARAMS = "PARAMS"
    SNR = "SNR"
    MAX_ABS_ERROR = "MAX_ABS_ERROR"
    PTE_SIZE = "PTE_SIZE"
    DELEGATED_OPS = "DELEGATED_OPS"
    TOTAL_OPS = "TOTAL_OPS"
    NPU_CYCLES = "NPU_CYCLES"
    TOTAL_CYCLES = "TOTAL_CYCLES"
    INFERENCES_PER_SECOND = "INFERENCES_PER_SECOND"
    NPU_OP_SHARE = "NPU_OP_SHARE"
    ACTIVATION_ARENA = "ACTIVATION_ARENA"
    MSE = "MSE"
    MAE = "MAE"
    KLD = "KLD"
    TOP1_ACCURACY = "TOP1_ACCURACY"
    TOP5_ACCURACY = "TOP5_ACCURACY"

    def __str__(self) -> str:
        return self.value


# The unit each metric is stored in (report.json and --json); renderers convert for display only.
UNITS: dict[MetricType, str] = {
    MetricType.LATENCY: "ms",
    MetricType.MEMORY: "MB",
    MetricType.MODEL_WEIGHT_MEMORY: "B",
    MetricType.MACS: "MACs",
    MetricType.PARAMS: "params",
    MetricType.SNR: "dB",
    MetricType.MAX_ABS_ERROR: "abs",
    MetricType.PTE_SIZE: "B",
    MetricType.DELEGATED_OPS: "ops",
    MetricType.TOTAL_OPS: "ops",
    MetricType.NPU_CYCLES: "cycles",
    MetricType.TOTAL_CYCLES: "cycles",
    MetricType.INFERENCES_PER_SECOND: "1/s",
    MetricType.NPU_OP_SHARE: "%",
    MetricType.ACTIVATION_ARENA: "B",
    MetricType.MSE: "abs^2",
    MetricType.MAE: "abs",
    MetricType.KLD: "nats",
    MetricType.TOP1_ACCURACY: "fraction",
    MetricType.TOP5_ACCURACY: "fraction",
}

HIGHER_IS_BETTER = frozenset({MetricType.SNR, MetricType.INFERENCES_PER_SECOND, MetricType.NPU_OP_SHARE,
                              MetricType.TOP1_ACCURACY, MetricType.TOP5_ACCURACY})

# The metrics every profile result is expected to carry, in the order tables show them; a device, method and backend
# combination that gives fewer is warned about (plan, report, the compatibility doc and the catalogue read this).
HEADLINE: tuple[MetricType, ...] = (MetricType.LATENCY, MetricType.MEMORY, MetricType.MODEL_WEIGHT_MEMORY,
                                    MetricType.MACS, MetricType.PARAMS)

_MIB = 1024.0 * 1024.0
# metric type -> (header, unit shown, stored value / shown value): how the report and the HTML page show a metric
SHOWN: dict[str, tuple[str, str, float]] = {
    "LATENCY": ("Latency", "ms", 1.0),
    "MEMORY": ("Memory", "MB", 1.0),
    "MACS": ("MACs", "MACs", 1.0),
    "PARAMS": ("Params", "params", 1.0),
    "MODEL_WEIGHT_MEMORY": ("Weight memory", "MB", _MIB),
    "SNR": ("SNR (vs input)", "dB", 1.0),
    "PTE_SIZE": (".pte size", "MB", _MIB),
    "DELEGATED_OPS": ("Delegated ops", "ops", 1.0),
}
