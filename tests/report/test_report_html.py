"""np report --html in a real headless Chromium, and budgets (np report/run --check) on the samples.

One module fixture runs the samples once: sample_npu (MLIA estimates on alif_e8, with a budgets: section added to its
run.yaml) and sample_cpu (MLIA gives no latency on raspberry_pi_5; its checkpoints are then measured on this machine
with `np profile --method on-device -d host`, so the page has measured rounds with raw samples). Tests that change
files work on copies (copy_workspace); the fixture checks at teardown that nobody changed the shared run.

The browser test checks: no console messages (errors included; a page with a blocked network reference proves the
check sees them), every chart present as SVG with the bars the --json document implies, and every number the page
carries (data-value) equal to np report --json's. It saves a PNG screenshot in the test's temporary folder.

The read commands (np --version, report, status, devices ls, validate) run on the finished sample_cpu as the console
script runs them, and must not import torch, ExecuTorch, MLIA, Optuna or Ray (bench/cli_startup.py times them).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.errors import EXIT_BUDGET, EXIT_CONFIG, EXIT_USAGE, EXIT_VALIDATION
from np_optimizer.versions import NP_VERSION
from tests.helpers import assert_unchanged, copy_workspace, tree_digest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test installs it: "
                                                             "apt-get install chromium)")
PROFILED = ("LATENCY", "MEMORY", "MODEL_WEIGHT_MEMORY")


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    from np_optimizer import api

    root = tmp_path_factory.mktemp("html") / "ws"
    api.workspace_init(root)
    npu, cpu = root / "sample_npu" / "experiment_01", root / "sample_cpu" / "experiment_01"
    # sample_npu profiles its int8 output only (MLIA takes 10-30 s per float checkpoint), with generous budgets
    text = (npu / "run.yaml").read_text()
    (npu / "run.yaml").write_text(text[:text.index("profile:")] + "profile:\n- GRAPH_QUANTIZE\n\nbudgets:\n"
                                  "  latency_ms: 1000\n  memory_mb: 64\n  pte_size_mb: 10\n  snr_db_min: 5\n")
    for exp in (npu, cpu):
        assert api.run(experiment=str(exp)).status == "success"
    measured = api.profile(["input_model", "graph_quantize"], experiment=str(cpu), method="on-device",
                           device="host", profile_opts={"num_executions": 12, "warmup": 2})
    assert all(r.status == "SUCCESS" for r in measured.results), [r.error for r in measured.results]
    before = tree_digest(root)
    yield {"npu": npu, "cpu": cpu, "root": root}
    assert_unchanged(root, before)


class _Dom(HTMLParser):
    """The elements of a page that carry data-* attributes, with the chart (svg data-metric) each sits in."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], str | None, str | None]] = []  # tag, attrs, svg, checkpoint
        self._svg: list[str | None] = []
        self._row: str | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self._svg.append(values.get("data-metric"))
        if tag == "tr":
            self._row = values.get("data-checkpoint")
        self.elements.append((tag, values, self._svg[-1] if self._svg else None, self._row))

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg" and self._svg:
            self._svg.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def find(self, tag: str, **attrs: str) -> list[tuple[dict[str, str], str | None, str | None]]:
        return [(a, svg, row) for t, a, svg, row in self.elements
                if t == tag and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]


def _browser(html: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-extensions", "--enable-logging=stderr", "--v=0",
                           f"--user-data-dir={out / 'chromium-profile'}", *args, html.as_uri()],
                          capture_output=True, text=True, timeout=120)


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line or "Refused to" in line]


def _expected_bars(doc: dict[str, Any]) -> dict[str, int]:
    """Bars per chart from the --json document: the inline value of each checkpoint, the newest successful post-hoc
    round per (checkpoint, device, method), .pte sizes, and finite SNRs."""
    entries = [doc["pipeline"]["input_model"], *doc["pipeline"]["steps"]]
    counts: dict[str, int] = {}
    for metric_type in (*PROFILED, "PTE_SIZE", "SNR"):
        count = 0
        for entry in entries:
            metric = next((m for m in entry["metrics"] if m["metric_type"] == metric_type), None)
            if metric_type == "PTE_SIZE" and entry["lowering_unsupported"]:
                continue  # n/a: no program for the device (a float checkpoint on Ethos-U)
            if metric is not None and metric["value"] is not None and not metric.get("identical"):
                count += 1
        posthoc = {(r["target"]["name"], r["device"]["name"], r["method"]) for r in doc["post_hoc"]
                   if r["status"] == "SUCCESS" and any(m["metric_type"] == metric_type and m["value"] is not None
                                                       for m in r["metrics"])}
        counts[metric_type] = count + len(posthoc)
    return {k: v for k, v in counts.items() if v}


@pytest.mark.np_run
@needs_chromium
@pytest.mark.parametrize("sample", ["cpu", "npu"])
def test_html_report_in_a_real_browser(samples: dict[str, Path], run_np, tmp_path: Path, sample: str) -> None:
    exp = samples[sample]
    page = tmp_path / "report.html"
    written = run_np("report", "--html", str(page), cwd=exp)
    assert written.exit_code == 0 and f"HTML report: {page}" in written.stdout
    html = page.read_text()
    assert len(html.encode()) < 300_000 and "<script" not in html and "http://" not in html.replace(
        "http://www.w3.org/2000/svg", "")
    doc = run_np("report", "--json", cwd=exp).json

    dom_run = _browser(page, tmp_path, "--dump-dom")
    assert dom_run.returncode == 0, dom_run.stderr[-2000:]
    assert _console(dom_run.stderr) == [], _console(dom_run.stderr)
    shot = tmp_path / "report.png"
    shot_run = _browser(page, tmp_path, f"--screenshot={shot}", "--window-size=1200,3000",
                        "--hide-scrollbars")
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shot_run.stderr[-2000:]

    dom = _Dom()
    dom.feed(dom_run.stdout)  # the DOM as Chromium built it
    # every chart is an SVG with the bars the stored results imply
    expected = _expected_bars(doc)
    charts = {a["data-metric"]: int(a["data-bars"]) for a, _svg, _row in dom.find("figure") if "data-bars" in a}
    assert set(charts) == set(expected), (charts, expected)
    for metric_type, count in expected.items():
        bars = [a for a, svg, _row in dom.find("rect") if svg == metric_type and a.get("class") == "bar"]
        assert len(bars) == count == charts[metric_type], metric_type
        for bar in bars:  # hatched bars are the estimated ones
            assert (bar["fill"].startswith("url(#")) == (bar["data-kind"] == "estimated")
    # every number in the pipeline table is the one np report --json has
    entries = [doc["pipeline"]["input_model"], *doc["pipeline"]["steps"]]
    by_checkpoint = {e["checkpoint"]: {m["metric_type"]: m for m in e["metrics"]} for e in entries}
    unsupported = {e["checkpoint"] for e in entries if e["lowering_unsupported"]}  # n/a, as in np report
    cells = [(a, row) for a, _svg, row in dom.find("td") if "data-value" in a]
    assert len(cells) >= 8
    for attrs, row in cells:
        assert float(attrs["data-value"]) == by_checkpoint[row][attrs["data-metric"]]["value"], (row, attrs)
    shown = {(row, a["data-metric"]) for a, row in cells}
    for checkpoint, metrics in by_checkpoint.items():
        for metric_type, metric in metrics.items():
            if checkpoint in unsupported and metric_type in ("PTE_SIZE", "DELEGATED_OPS", "TOTAL_OPS"):
                continue
            if metric_type != "TOTAL_OPS" and metric["value"] is not None and not metric.get("identical"):
                assert (checkpoint, metric_type) in shown, (checkpoint, metric_type)
    text = " ".join(dom.text)
    for warning in doc["warnings"]:
        assert " ".join(warning.split()) in " ".join(text.split())
    assert "Glossary" in text and "Pareto" in text
    # the per-layer section: each checkpoint with per-layer costs, its top layer the one np report --layers ranks first
    assert [a for a, _svg, _row in dom.find("section") if a.get("data-section") == "per_layer"]
    heads = {a["data-checkpoint"] for a, _svg, _row in dom.find("h4") if "data-checkpoint" in a}
    assert heads == ({"INPUT_MODEL", "GRAPH_QUANTIZE"} if sample == "cpu" else {"GRAPH_QUANTIZE"})
    top = run_np("report", "--layers", "GRAPH_QUANTIZE", "--json", cwd=exp).json
    assert top["layers"][0]["key"] in text and ("Time (ms)" if sample == "cpu" else "Cycles") in text
    if sample == "cpu":  # measured rounds with their spread, from the raw samples
        rounds = [a for a, _svg, _row in dom.find("g") if a.get("class") == "round"]
        assert len(rounds) == 2 and all(int(r["data-n"]) == 12 for r in rounds)
        assert "raw samples from" in text
    else:  # the budgets of run.yaml are lines on the charts
        lines = {svg for a, svg, _row in dom.find("g") if a.get("class") == "budget"}
        assert lines == {"LATENCY", "MEMORY", "PTE_SIZE", "SNR"}
        assert "Budgets passed" in text


@needs_chromium
def test_browser_check_sees_console_errors(tmp_path: Path) -> None:
    """The console check is not blind: a page with a network reference (blocked by the page's CSP) is caught."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
                    'content="default-src \'none\'"></head><body><img src="http://example.invalid/x.png"></body></html>')
    result = _browser(page, tmp_path, "--dump-dom")
    assert _console(result.stderr), result.stderr[-2000:]


@pytest.mark.np_run
def test_project_html_has_every_experiment(samples: dict[str, Path], run_np, tmp_path: Path) -> None:
    root = copy_workspace(samples["npu"], tmp_path).parent  # the default file is written in the project: a copy
    result = run_np("report", "--html", cwd=root)
    page = root / "report.html"
    assert result.exit_code == 0 and page.is_file()
    html = page.read_text()
    assert html.count('<article class="experiment"') == len([p for p in root.iterdir() if (p / "run.yaml").is_file()])
    assert "Project: sample_npu" in html
    ids = re.findall(r' id="([^"]+)"', html)  # SVG patterns and anchors stay unique across experiments
    assert ids and len(ids) == len(set(ids))


@pytest.mark.np_run
def test_html_refuses_a_folder_and_stray_files(samples: dict[str, Path], run_np, tmp_path: Path) -> None:
    assert run_np("report", "--html", str(tmp_path), cwd=samples["cpu"]).exit_code == EXIT_CONFIG
    assert run_np("report", "--html", str(tmp_path / "no" / "x.html"), cwd=samples["cpu"]).exit_code == EXIT_CONFIG
    assert run_np("report", "x.html", cwd=samples["cpu"]).exit_code == EXIT_USAGE
    assert run_np("report", "--html", "--json", cwd=samples["cpu"]).exit_code == EXIT_USAGE


@pytest.mark.np_run
def test_budgets_pass_on_the_npu_sample(samples: dict[str, Path], run_np) -> None:
    result = run_np("report", "--check", cwd=samples["npu"])
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "Budgets passed on graph_quantize (4 passed, 0 failed, 0 not checked)" in result.stdout
    header = next(line for line in result.stdout.splitlines() if "Model" in line and "Type" in line)
    assert header.rstrip(" │┃").endswith("Budgets")  # the pass/fail column of the pipeline table
    data = run_np("report", "--check", "--json", cwd=samples["npu"]).json
    outcomes = {o["budget"]: o for o in data["budgets"]["outcomes"]}
    assert outcomes["latency_ms"]["value_kind"] == "estimated" and "mlia" in outcomes["latency_ms"]["source"]
    latency = next(m for m in data["pipeline"]["steps"][-1]["metrics"] if m["metric_type"] == "LATENCY")
    assert outcomes["latency_ms"]["value"] == latency["value"]  # the stored estimate, in ms


@pytest.mark.np_run
def test_budget_fails_with_exit_6_and_junit(samples: dict[str, Path], run_np, tmp_path: Path) -> None:
    junit = tmp_path / "budgets.xml"
    result = run_np("report", "--budget", "latency_ms=0.0001", "--junit", str(junit), cwd=samples["npu"])
    assert result.exit_code == EXIT_BUDGET == 6
    assert "Budgets FAILED on graph_quantize" in result.stdout and "latency_ms" in result.stdout
    suites = ET.parse(junit).getroot()
    assert suites.tag == "testsuites"
    suite = suites.find("testsuite")
    assert suite is not None and int(suite.get("tests", "0")) == 4 and int(suite.get("failures", "0")) == 1
    (failed,) = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert failed.get("name") == "latency_ms <= 0.0001 ms" and failed.get("classname", "").endswith(
        ".02_graph_quantize")
    assert "estimated" in (failed.find("failure").get("message") or "")


@pytest.mark.np_run
def test_check_all_covers_every_profiled_checkpoint(samples: dict[str, Path], run_np, tmp_path: Path) -> None:
    doc = run_np("report", "--json", cwd=samples["cpu"]).json
    sizes = {e["name"]: next(m["value"] for m in e["metrics"] if m["metric_type"] == "PTE_SIZE")
             for e in [doc["pipeline"]["input_model"], *doc["pipeline"]["steps"]]}
    limit = (sizes["02_graph_quantize"] + sizes["input_model"]) / 2 / 2**20  # int8 passes, float fails
    junit = tmp_path / "all.xml"
    result = run_np("report", "--check-all", "--budget", f"pte_size_mb={limit}", "--budget", "snr_db_min=10",
                    "--junit", str(junit), cwd=samples["cpu"])
    assert result.exit_code == EXIT_BUDGET, result.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == 3 * 2 == int(suite.get("tests", "0"))  # one case per budget and checkpoint
    outcome = {(c.get("classname", "").rsplit(".", 1)[-1], c.get("name", "").split()[0]):
               "failure" if c.find("failure") is not None else "skipped" if c.find("skipped") is not None else "pass"
               for c in cases}
    assert outcome == {("input_model", "pte_size_mb"): "failure", ("input_model", "snr_db_min"): "skipped",
                       ("01_graph_optimize", "pte_size_mb"): "failure", ("01_graph_optimize", "snr_db_min"): "pass",
                       ("02_graph_quantize", "pte_size_mb"): "pass", ("02_graph_quantize", "snr_db_min"): "pass"}
    assert "INPUT_MODEL is the reference" in (next(c for c in cases if c.find("skipped") is not None)
                                              .find("skipped").get("message") or "")


@pytest.mark.np_run
def test_budget_not_checked_where_the_method_gives_no_value(samples: dict[str, Path], run_np, tmp_path: Path) -> None:
    junit = tmp_path / "cpu.xml"
    result = run_np("report", "--budget", "latency_ms=20", "--junit", str(junit), "--json", cwd=samples["cpu"])
    assert result.exit_code == 0
    verdict = result.json["budgets"]
    assert verdict["status"] == "not checked" and verdict["passed"] == 0
    (outcome,) = verdict["outcomes"]
    assert outcome["status"] == "not checked" and outcome["value"] is None
    assert "not given by mlia on raspberry_pi_5" in outcome["reason"]
    assert ET.parse(junit).getroot().find("testsuite/testcase/skipped") is not None
    mixed = run_np("report", "--budget", "latency_ms=20", "--budget", "pte_size_mb=100", cwd=samples["cpu"])
    assert mixed.exit_code == 0 and "Budgets passed on graph_quantize (1 passed, 0 failed, 1 not checked)" in \
        mixed.stdout


@pytest.mark.np_run
def test_bad_budget_input_is_a_clear_error(samples: dict[str, Path], run_np, tmp_path: Path) -> None:
    bad = run_np("report", "--budget", "latency=5", cwd=samples["cpu"])
    assert bad.exit_code == EXIT_USAGE and "Unknown budget metric 'latency'" in bad.stderr
    none = run_np("report", "--check", cwd=samples["cpu"])  # sample_cpu's run.yaml has no budgets:
    assert none.exit_code == EXIT_CONFIG and "NP-BDG-404" in run_np("report", "--check", "--json",
                                                                    cwd=samples["cpu"]).stdout
    exp = copy_workspace(samples["npu"], tmp_path)
    text = (exp / "run.yaml").read_text().replace("latency_ms: 1000", "latency_ms: -1")
    (exp / "run.yaml").write_text(text)
    for args in (("report", "--check"), ("validate",), ("run", "--check")):
        result = run_np(*args, cwd=exp)
        assert result.exit_code == EXIT_VALIDATION, args
        said = result.stdout + result.stderr  # file:line:col, code, message and hint of the violation
        assert "run.yaml:" in said and "R062" in said and "latency_ms cannot be negative" in said and "Hint" in said


@pytest.mark.np_run
def test_run_check_fails_with_exit_6(samples: dict[str, Path], run_np, tmp_path: Path) -> None:
    exp = copy_workspace(samples["npu"], tmp_path)
    junit = tmp_path / "run.xml"
    result = run_np("run", "--retry", "--budget", "pte_size_mb=0.000001", "--junit", str(junit), cwd=exp)
    assert result.exit_code == EXIT_BUDGET, result.stdout + result.stderr
    assert "Run completed successfully" in result.stdout and "Budgets FAILED on graph_quantize" in result.stdout
    assert len(ET.parse(junit).getroot().findall("testsuite/testcase/failure")) == 1


@pytest.mark.np_run
def test_html_and_check_read_stored_results_without_torch(samples: dict[str, Path], tmp_path: Path) -> None:
    """np report --html and --check import no torch, ExecuTorch or MLIA (they read report.json and the job files)."""
    import subprocess as sp
    import sys

    code = ("import sys\nfrom np_optimizer.cli.main import main\n"
            f"rc = main(['report', '--html', {str(tmp_path / 'r.html')!r}, '--check', '--junit', "
            f"{str(tmp_path / 'j.xml')!r}])\n"
            "print('HEAVY', [m for m in ('torch', 'executorch', 'mlia', 'torchao') if m in sys.modules])\n"
            "sys.exit(rc)\n")
    proc = sp.run([sys.executable, "-c", code], cwd=samples["npu"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stdout and (tmp_path / "r.html").is_file() and (tmp_path / "j.xml").is_file()


@pytest.mark.np_run
def test_compare_diffs_measured_layer_times_by_their_spread(samples: dict[str, Path], run_np) -> None:
    """sample_cpu's two checkpoints measured on host with traced runs: np compare diffs their layer times, each
    change marked significant or not against the layers' measured IQRs."""
    exp = samples["cpu"]
    doc = run_np("compare", "INPUT_MODEL", "GRAPH_QUANTIZE", "--json", cwd=exp).json
    diff = doc["diffs"][0]
    assert diff["cost_field"] == "cost" and diff["cost_changes"]
    spreads = {}
    for checkpoint in ("INPUT_MODEL", "GRAPH_QUANTIZE"):
        layers = run_np("report", "--layers", checkpoint, "--top", "1000", "--json", cwd=exp).json
        assert layers["cost"]["unit"] == "ms" and layers["result_kind"] == "measured"
        spreads[checkpoint] = {e["key"]: e["spread_ms"] for e in layers["layers"]}
        # every row off the accelerator says why: a CPU op its partitioner's words, the runtime's rows what they are
        off = [e for e in layers["layers"] if e["placement"] != "XNNPACK"]
        assert off and all(e.get("reason") for e in off), off
        assert any(e["placement"] == "runtime" and e["reason"].startswith("not an operator") for e in off), off
    for change in diff["cost_changes"]:
        if change["only_in"] or change["merged"]:
            continue
        widest = max(spreads["INPUT_MODEL"][change["key"]], spreads["GRAPH_QUANTIZE"][change["key"]])
        assert change["significant"] == (abs(change["delta"]) > widest), change
    table = run_np("compare", "INPUT_MODEL", "GRAPH_QUANTIZE", cwd=exp).stdout
    assert "Layers whose cost changed most" in table


# Never imported by a command that reads: the tools np drives and the sweep's engines.
HEAVY = ("torch", "torchao", "executorch", "mlia", "optuna", "ray")


def _np_modules(args: list[str], cwd: Path, out: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `np ARGS` as the console script does (cli.main.entry, in a fresh process); the modules it had imported
    when it exited."""
    code = ("import atexit, json, sys\n"
            f"atexit.register(lambda: open({str(out)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
            f"sys.argv = ['np', *{args!r}]\n"
            "from np_optimizer.cli.main import entry\n"
            "entry()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)
    return proc, set(json.loads(out.read_text()))


@pytest.mark.np_run
@pytest.mark.parametrize(("args", "says"), [(["--version"], f"np {NP_VERSION}"),
                                            (["report"], "02_graph_quantize (output)"),
                                            (["status"], "02_graph_quantize"), (["devices", "ls"], "raspberry_pi_5"),
                                            (["validate"], "Valid.")],
                         ids=["version", "report", "status", "devices-ls", "validate"])
def test_read_commands_start_without_heavy_imports(samples: dict[str, Path], tmp_path: Path, args: list[str],
                                                   says: str) -> None:
    """On sample_cpu run and measured on host, the read commands import none of torch, ExecuTorch, MLIA, Optuna or
    Ray (issue 35: a command imports what it uses); np --version imports no record module, no configuration and no
    package metadata either: its version is a constant. np report and np status define only the records they read
    (each frozen record costs time to define) and import no lock or process machinery (they write nothing)."""
    proc, modules = _np_modules(args, samples["cpu"], tmp_path / "modules.json")
    assert proc.returncode == 0, proc.stderr
    assert says in proc.stdout
    assert sorted(m for m in modules if m.split(".")[0] in HEAVY) == []
    if args in (["report"], ["status"]):
        unused = {"np_optimizer.records.sweep", "np_optimizer.records.commands", "np_optimizer.records.views",
                  "np_optimizer.locks", "np_optimizer.processes", "pickle", "tempfile"}
        if args == ["status"]:
            unused |= {"np_optimizer.records.report", "np_optimizer.devices"}
        assert sorted(unused & modules) == []
    if args == ["--version"]:
        assert sorted(m for m in modules if m.startswith(("np_optimizer.records.", "np_optimizer.config",
                                                          "np_optimizer.cli.cmd_", "importlib.metadata"))) == []
