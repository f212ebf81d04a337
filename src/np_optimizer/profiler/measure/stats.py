"""Summary statistics of latency samples (milliseconds). Standard library only.

    summarize(samples_ms, warmup_ms=None, outlier_method="mad") -> dict

Definitions (also returned under "definitions"):
- percentiles: linear interpolation between closest ranks (numpy's default "linear").
- stdev: sample standard deviation (n - 1); CoV = stdev / mean.
- outliers, method "mad" (default): robust z = (x - median) / (1.4826 * MAD), MAD = median(|x - median|); an outlier
  has |robust z| > 3.5 (Iglewicz and Hoaglin's cut-off). "tukey": outside [Q1 - 1.5 IQR, Q3 + 1.5 IQR].
  "hyperfine": |x - median| > 10 robust sigmas (hyperfine's rule; gross outliers only). When MAD is 0 (over half the
  samples equal), 1.2533 * the mean absolute deviation around the median stands in; when that is 0 too, nothing is an
  outlier. Outliers are flagged, never removed: every statistic uses all samples.
- first run far slower: the first timed sample is a high outlier by the chosen rule (hyperfine's check).
- high spread: CoV > 10 %.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["summarize", "outliers", "percentile", "median", "COV_WARN"]

COV_WARN = 0.10
MAD_K = 1.4826  # 1.4826 * MAD estimates the standard deviation of normal data
MAD_THRESHOLD = 3.5
HYPERFINE_THRESHOLD = 10.0
TUKEY_K = 1.5
P99_MIN_SAMPLES = 100


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    m = n // 2
    return s[m] if n % 2 else (s[m - 1] + s[m]) / 2.0


def percentile(xs: Sequence[float], q: float) -> float:
    """q in [0, 100]; linear interpolation (numpy's default)."""
    s = sorted(xs)
    if not s:
        return float("nan")
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _robust_sigma(xs: Sequence[float], med: float) -> tuple[float, str]:
    mad = median([abs(x - med) for x in xs])
    if mad > 0:
        return MAD_K * mad, "1.4826 * MAD"
    meanad = sum(abs(x - med) for x in xs) / len(xs)
    return 1.2533 * meanad, "1.2533 * mean absolute deviation (MAD was 0)"


def outliers(xs: Sequence[float], method: str = "mad") -> dict[str, Any]:
    """Indices, values and bounds of the outliers of `xs` by `method` (mad | tukey | hyperfine)."""
    if method not in ("mad", "tukey", "hyperfine"):
        raise ValueError(f"outlier method must be mad, tukey or hyperfine, not {method!r}")
    n = len(xs)
    med = median(xs)
    out: dict[str, Any] = {"method": method, "indices": [], "values": [], "count": 0, "high": 0, "low": 0}
    if n < 3:
        out.update(lower_ms=None, upper_ms=None, note="fewer than 3 samples: no outlier test")
        return out
    if method == "tukey":
        q1, q3 = percentile(xs, 25), percentile(xs, 75)
        lower, upper = q1 - TUKEY_K * (q3 - q1), q3 + TUKEY_K * (q3 - q1)
        out["rule"] = "outside [Q1 - 1.5 IQR, Q3 + 1.5 IQR]"
    else:
        sigma, how = _robust_sigma(xs, med)
        k = MAD_THRESHOLD if method == "mad" else HYPERFINE_THRESHOLD
        out.update(threshold_robust_sigmas=k, robust_sigma_ms=sigma, robust_sigma_from=how)
        if sigma <= 0:
            out.update(lower_ms=med, upper_ms=med, note="all samples equal: no outliers")
            return out
        lower, upper = med - k * sigma, med + k * sigma
        out["rule"] = f"|x - median| > {k:g} * robust sigma"
    out["lower_ms"], out["upper_ms"] = lower, upper
    for i, x in enumerate(xs):
        if x < lower or x > upper:
            out["indices"].append(i)
            out["values"].append(x)
    out["count"] = len(out["indices"])
    out["high"] = sum(1 for x in out["values"] if x > upper)
    out["low"] = out["count"] - out["high"]
    return out


def summarize(samples_ms: Sequence[float], warmup_ms: Sequence[float] | None = None,
              outlier_method: str = "mad") -> dict[str, Any]:
    """avg (= mean), min, max, median, p90, p99, stdev, CoV, quartiles, MAD, outliers, first-run and spread checks;
    `warnings` holds one sentence per finding the user should see."""
    xs = [float(x) for x in samples_ms]
    n = len(xs)
    res: dict[str, Any] = {"n": n, "unit": "ms", "warnings": []}
    if n == 0:
        res["warnings"].append("no samples")
        return res
    mean = sum(xs) / n
    med = median(xs)
    stdev = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    cov = stdev / mean if mean > 0 else float("nan")
    res.update({"avg": mean, "mean": mean, "min": min(xs), "max": max(xs), "median": med,
                "p90": percentile(xs, 90), "p99": percentile(xs, 99), "stdev": stdev, "cov": cov,
                "q1": percentile(xs, 25), "q3": percentile(xs, 75), "mad": median([abs(x - med) for x in xs])})
    res["iqr"] = res["q3"] - res["q1"]
    found = outliers(xs, outlier_method)
    res["outliers"] = found
    if found["count"]:
        res["warnings"].append(f"statistical outliers: {found['count']} of {n} samples "
                               f"({found.get('rule', found['method'])}); kept in every statistic")
    first: dict[str, Any] = {"value": xs[0], "ratio_to_median": xs[0] / med if med > 0 else None}
    first["far_slower"] = bool(n >= 3 and found.get("upper_ms") is not None and xs[0] > found["upper_ms"])
    res["first_run"] = first
    if first["far_slower"]:
        res["warnings"].append(f"the first timed run was far slower than the rest ({xs[0]:.4g} ms, "
                               f"{first['ratio_to_median']:.2f}x the median): warm-up too short, or a one-off "
                               "disturbance")
    res["high_spread"] = bool(cov == cov and cov > COV_WARN)  # cov == cov: not NaN
    if res["high_spread"]:
        res["warnings"].append(f"high spread: CoV {cov * 100:.1f}% > {COV_WARN * 100:.0f}% (a busy machine? compare "
                               "medians, or measure again)")
    if n < P99_MIN_SAMPLES:
        res["p99_note"] = f"with {n} samples p99 is close to the max; it means much only from {P99_MIN_SAMPLES} samples"
    if warmup_ms:
        w = [float(x) for x in warmup_ms]
        res["warmup"] = {"n": len(w), "first": w[0], "first_ratio_to_median": w[0] / med if med > 0 else None,
                         "median": median(w)}
    res["definitions"] = {
        "avg": "arithmetic mean of all timed runs",
        "percentiles": "linear interpolation (numpy default)",
        "stdev": "sample standard deviation (n-1)",
        "cov": "stdev / mean",
        "outliers": f"{found.get('rule', found['method'])}; flagged, not removed",
        "first_run.far_slower": "first timed sample above the outlier upper bound",
        "high_spread": f"cov > {COV_WARN:g}",
    }
    return res
