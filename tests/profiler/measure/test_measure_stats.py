"""Units of the measuring core that are pure computation or parsing: statistics, option and document parsing, error
classification. The parts that run the runtime are tested for real in test_on_device.py and test_ssh_remote.py."""

from __future__ import annotations

import random
import statistics

import numpy as np
import pytest

from np_optimizer.profiler.measure import MeasureOptions, failure_from_doc, parse_document, script_args, stats
from np_optimizer.profiler.measure.ssh import SshTarget, classify_ssh_failure
from np_optimizer.profiler.methods.on_device import measure_options


def test_basic_figures_match_numpy_and_statistics() -> None:
    rnd = random.Random(1)
    xs = [rnd.lognormvariate(0, 0.3) for _ in range(101)]
    s = stats.summarize(xs)
    assert s["n"] == 101
    assert s["avg"] == s["mean"] == pytest.approx(statistics.mean(xs))
    assert s["median"] == pytest.approx(statistics.median(xs))
    assert s["stdev"] == pytest.approx(statistics.stdev(xs))
    assert s["p90"] == pytest.approx(float(np.percentile(xs, 90)))
    assert s["p99"] == pytest.approx(float(np.percentile(xs, 99)))
    assert s["cov"] == pytest.approx(statistics.stdev(xs) / statistics.mean(xs))
    assert s["min"] == min(xs) and s["max"] == max(xs)


def test_hyperfine_rule_on_hyperfines_own_vectors() -> None:
    def count(xs: list[float]) -> int:
        return int(stats.outliers(xs, "hyperfine")["count"])

    assert count([-0.2, 0.0, 0.2]) == 0
    assert count([-0.2, 0.0, 0.2, 4.0]) == 1
    assert count([0.5, 0.30, 0.29, 0.31, 0.30]) == 1
    normal = [2.33269488, 1.42195907, -0.57527698, -0.31293437, 2.2948158, 0.75813273, -1.0712388, -0.96394741,
              -1.15897446, 1.10976285]
    assert count(normal) == 0
    assert count(normal + [20.0, -500.0]) == 2


def test_mad_outliers_are_flagged_and_kept_in_every_statistic() -> None:
    xs = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 1.03, 0.97, 5.0, 1.0]
    s = stats.summarize(xs)
    found = s["outliers"]
    assert found["method"] == "mad" and found["indices"] == [8] and found["values"] == [5.0] and found["high"] == 1
    assert s["max"] == 5.0
    assert any("outliers" in w for w in s["warnings"])


def test_tukey_and_unknown_method() -> None:
    xs = [10.0, 11, 12, 13, 14, 15, 16, 17, 18, 100]
    found = stats.outliers(xs, "tukey")
    q1, q3 = stats.percentile(xs, 25), stats.percentile(xs, 75)
    assert found["indices"] == [9] and found["upper_ms"] == pytest.approx(q3 + 1.5 * (q3 - q1))
    with pytest.raises(ValueError):
        stats.outliers([1.0, 2.0, 3.0], "zscore")


def test_mad_zero_falls_back_to_mean_absolute_deviation() -> None:
    s = stats.summarize([10.0] * 7 + [100.0])
    assert s["mad"] == 0 and s["outliers"]["indices"] == [7]
    assert "MAD was 0" in s["outliers"]["robust_sigma_from"]
    assert stats.summarize([3.0] * 5)["outliers"]["count"] == 0


def test_first_run_far_slower_and_high_spread_warn() -> None:
    xs = [3.0] + [1.0 + 0.01 * (i % 3) for i in range(20)]
    s = stats.summarize(xs, warmup_ms=[9.0, 1.1])
    assert s["first_run"]["far_slower"] is True
    assert s["first_run"]["ratio_to_median"] == pytest.approx(3.0 / s["median"])
    assert any(w.startswith("the first timed run") for w in s["warnings"])
    assert s["high_spread"] is True and any(w.startswith("high spread") for w in s["warnings"])
    assert s["warmup"]["first"] == 9.0 and s["warmup"]["n"] == 2


def test_quiet_sample_has_no_warnings() -> None:
    xs = [1.0 + 0.001 * (i % 5) for i in range(200)]
    s = stats.summarize(xs)
    assert s["warnings"] == [] and not s["high_spread"] and not s["first_run"]["far_slower"]
    assert "p99_note" not in s and "p99_note" in stats.summarize(xs[:30])


def test_small_and_empty_samples() -> None:
    assert stats.summarize([])["warnings"] == ["no samples"]
    s = stats.summarize([2.0])
    assert s["median"] == 2.0 and s["stdev"] == 0.0 and s["outliers"]["count"] == 0


def test_profile_options_defaults_and_script_arguments() -> None:
    assert measure_options({}) == MeasureOptions(num_executions=30, timeout_s=60.0, warmup=3,
                                                   trace_runs=10)
    opts = measure_options({"num_executions": 7, "timeout": 2.5, "warmup": 0, "threads": None})
    assert (opts.num_executions, opts.timeout_s, opts.warmup, opts.threads) == (7, 2.5, 0, None)
    args = script_args(opts)
    assert args[args.index("--runs") + 1] == "7" and args[args.index("--timeout") + 1] == "2.5"
    assert args[args.index("--warmup") + 1] == "0" and "--threads" not in args
    assert "--threads" in script_args(measure_options({"threads": 1}))


def test_parse_document_takes_the_json_line() -> None:
    assert parse_document('noise\n{"ok": true, "n": 1}\n') == {"ok": True, "n": 1}
    assert parse_document("[cpuinfo] no json here\n") is None
    assert parse_document('{"broken": \n') is None


@pytest.mark.parametrize("kind,code", [
    ("runtime_missing", "NP-DEV-424"), ("backend_not_registered", "NP-RUN-500"), ("invalid_pte", "NP-RUN-500"),
    ("load_failed", "NP-RUN-500"), ("method_not_found", "NP-RUN-500"), ("input_error", "NP-RUN-422"),
    ("hung", "NP-RUN-504"), ("execute_failed", "NP-RUN-501"), ("worker_crashed", "NP-RUN-501"),
])
def test_script_error_kinds_map_to_one_clear_error(kind: str, code: str) -> None:
    doc = {"ok": False, "error": {"kind": kind, "message": "first line\nsecond line"}}
    failure = failure_from_doc(doc, where="host", python="/py", pte_name="model.pte")
    assert failure.code == code and failure.kind == kind and failure.doc is doc
    for text in (failure.message, failure.hint):
        assert text and "\n" not in text
    assert "second line" not in failure.message


@pytest.mark.parametrize("stderr,code,what", [
    ("ssh: connect to host 10.0.0.9 port 22: No route to host", "NP-DEV-503", "no route"),
    ("ssh: Could not resolve hostname nosuch.invalid: Name or service not known", "NP-DEV-503", "DNS"),
    ("ssh: connect to host 10.0.0.9 port 22: Connection timed out", "NP-DEV-503", "timed out"),
    ("ssh: connect to host 127.0.0.1 port 9: Connection refused", "NP-DEV-503", "refused"),
    ("kex_exchange_identification: Connection closed by remote host", "NP-DEV-503", "closed"),
    ("pi@host: Permission denied (publickey,password).", "NP-DEV-401", "Permission denied"),
    ("Received disconnect from 1.2.3.4 port 22:2: Too many authentication failures", "NP-DEV-401", "Too many"),
    ("Host key verification failed.", "NP-DEV-495", "host key"),
    ("something new and strange", "NP-DEV-502", "strange"),
])
def test_ssh_failures_are_classified_from_sshs_messages(stderr: str, code: str, what: str) -> None:
    # DNS, no-route and timeout cases are checked on ssh's own messages: a live test would send traffic off the host.
    failure = classify_ssh_failure(255, stderr + "\n", "pi5 (pi@host:22)")
    assert failure is not None and failure.code == code
    assert what.lower() in failure.message.lower() and "pi5" in failure.message
    assert classify_ssh_failure(0, stderr, "x") is None


def test_ssh_command_options() -> None:
    target = SshTarget("10.0.0.9", user="pi", port=2222, identity_file="~/.ssh/k", known_hosts="/tmp/kh",
                       ssh_config="/dev/null", connect_timeout=4)
    cmd = target.ssh_command("python3 -c pass")
    assert cmd[:3] == ["ssh", "-F", "/dev/null"] and cmd.count("-p") == 1 and cmd[cmd.index("-p") + 1] == "2222"
    assert "BatchMode=yes" in cmd and "ConnectTimeout=4" in cmd and "UserKnownHostsFile=/tmp/kh" in cmd
    assert cmd[-2:] == ["pi@10.0.0.9", "python3 -c pass"] and "~" not in cmd[cmd.index("-i") + 1]
    assert target.transport == "ssh pi@10.0.0.9:2222"
