"""Hostile and damaged inputs (issue 11), through the real entry point on real files.

Each bad input ends in one clear error line with a hint and the exit code of the README's table (docs/errors.md), never
a traceback or NP-GEN-500, and leaves the files already written as they were. Damaged result files and cache entries
that np can do without are set aside or replaced, and the console says so.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from np_optimizer.errors import EXIT_CONFIG, EXIT_INTERRUPTED, EXIT_NETWORK, EXIT_USAGE, EXIT_VALIDATION
from np_optimizer.workspace import Workspace
from tests.helpers import (
    NpResult,
    assert_unchanged,
    copy_workspace,
    make_project,
    run_here,
    run_np_subprocess,
    tree_digest,
)

pytestmark = pytest.mark.own_steps  # Ctrl+C and damaged files mid-run need steps that run

GO_ONLY = 'version: "1.0"\nsteps:\n- graph_optimize: null\n'
GO_PROFILED = GO_ONLY + "profile:\n- GRAPH_OPTIMIZE\n"
# a few hundred bytes that expand to 10**10 values
LAUGHS = GO_ONLY + "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))
UNREACHABLE = "devices:\n  raspberry_pi_5:\n    ssh: nobody@127.0.0.1\n    port: 1\n    connect_timeout: 3\n"


def assert_one_clear_error(result: NpResult, exit_code: int, code: str | None = None) -> str:
    """The documented exit code, exactly one `Error [CODE] ...` line followed by a hint, nothing of a bug."""
    text = result.stdout + result.stderr
    assert result.exit_code == exit_code, text
    assert "Traceback" not in text and "NP-GEN-500" not in text and "Internal error" not in text, text
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error [")]
    assert len(errors) == 1, result.stderr
    if code is not None:
        assert errors[0].startswith(f"Error [{code}]"), errors[0]
    assert "Hint:" in result.stderr.split(errors[0], 1)[1], result.stderr
    return result.stderr


# -- a workspace whose experiment never ran: read-only cases and bad files np must refuse --------------------------


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with one project (mlp on raspberry_pi_5) and an experiment that never ran; tests copy it."""
    root = tmp_path_factory.mktemp("hostile-fresh") / "ws"
    Workspace.create(root)
    return make_project(root, "hostile", run_yaml=GO_PROFILED)


@pytest.fixture
def exp(fresh: Path, tmp_path: Path) -> Path:
    shutil.copytree(fresh.parents[1], tmp_path / "ws", symlinks=True)
    return tmp_path / "ws" / fresh.parent.name / fresh.name


def _write(relative: str, data: str | bytes) -> Callable[[Path], None]:
    """A setup writing `data` to a file relative to the experiment folder (`../project.json`, `run.yaml`)."""

    def setup(exp: Path) -> None:
        (exp / relative).write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))

    return setup


def _folder(relative: str) -> Callable[[Path], None]:
    def setup(exp: Path) -> None:
        path = (exp / relative).resolve()
        if path.exists():
            path.unlink()
        path.mkdir()

    return setup


def _symlink_loop(exp: Path) -> None:
    (exp / "run.detail.yaml").symlink_to("run.detail.yaml")


def _calibration(files: dict[str, bytes | Callable[[Path], None]]) -> Callable[[Path], None]:
    def setup(exp: Path) -> None:
        folder = exp.parents[1].parent / "calib"
        folder.mkdir()
        for name, content in files.items():
            if callable(content):
                content(folder / name)
            else:
                (folder / name).write_bytes(content)

    return setup


def _npy(shape: tuple[int, ...]) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        import numpy as np

        np.save(path, np.zeros(shape, dtype=np.float32))

    return write


def _nothing(exp: Path) -> None:
    return None


CREATE_WITH_DATA = ["projects", "create", "-n", "with_data", "-m", "mlp", "-d", "raspberry_pi_5",
                    "--calibration-dataset", "../calib"]

# (id, setup(exp), argv, cwd relative to the experiment, exit code, error code, text the error must show)
CASES: list[tuple[str, Callable[[Path], None], list[str], str, int, str, str]] = [
    # run.yaml / run.detail.yaml the YAML reader refuses: `np run` lists the issue, then one error (exit 5)
    ("run-yaml-python-tag", _write("run.yaml", 'version: !!python/object/apply:os.system ["true"]\nsteps: []\n'),
     ["run"], ".", EXIT_VALIDATION, "NP-VAL-422", "Y004"),
    ("run-yaml-list-as-key", _write("run.yaml", GO_ONLY + "? [a, b]\n: 1\n"), ["run"], ".", EXIT_VALIDATION,
     "NP-VAL-422", "Y004"),
    ("run-yaml-number-as-key", _write("run.yaml", GO_ONLY + "1: x\n"), ["run"], ".", EXIT_VALIDATION, "NP-VAL-422",
     "run.yaml line 4: the key '1' is not text"),
    ("run-yaml-key-twice", _write("run.yaml", GO_ONLY + "steps: []\n"), ["run"], ".", EXIT_VALIDATION, "NP-VAL-422",
     "given twice"),
    ("run-yaml-nested-5000-deep", _write("run.yaml", 'version: "1.0"\nsteps: ' + "[" * 5000 + "]" * 5000 + "\n"),
     ["run"], ".", EXIT_VALIDATION, "NP-VAL-422", "Y005"),
    ("run-yaml-billion-laughs", _write("run.yaml", LAUGHS), ["run"], ".", EXIT_VALIDATION, "NP-VAL-422",
     "expands to more than"),
    ("run-yaml-alias-in-itself", _write("run.yaml", 'version: "1.0"\nsteps: &s\n- *s\n'), ["run"], ".",
     EXIT_VALIDATION, "NP-VAL-422", "Y004"),
    ("run-yaml-latin-1", _write("run.yaml", GO_ONLY.encode() + "# caf\xe9\n".encode("latin-1")), ["run"], ".",
     EXIT_VALIDATION, "NP-VAL-422", "is not UTF-8 text (byte 0xe9 at line 4)"),
    ("run-yaml-binary", _write("run.yaml", bytes(range(256)) * 4), ["run"], ".", EXIT_VALIDATION, "NP-VAL-422",
     "Y003"),
    ("run-yaml-nul-bytes", _write("run.yaml", GO_ONLY + "\0\0\n"), ["run"], ".", EXIT_VALIDATION, "NP-VAL-422",
     "Y003"),
    ("run-yaml-utf16", _write("run.yaml", GO_ONLY.encode("utf-16")), ["run"], ".", EXIT_VALIDATION, "NP-VAL-422",
     "Y003"),
    ("run-yaml-empty", _write("run.yaml", ""), ["run"], ".", EXIT_VALIDATION, "NP-VAL-422", "Y002"),
    ("run-yaml-over-1-mib", _write("run.yaml", GO_ONLY + "#" + "x" * (1 << 20) + "\n"), ["run"], ".",
     EXIT_VALIDATION, "NP-VAL-422", "Y005"),
    ("run-yaml-unknown-step", _write("run.yaml", 'version: "1.0"\nsteps:\n- graph_optimise: null\n'), ["run"], ".",
     EXIT_VALIDATION, "NP-VAL-422", "run.yaml:3:3 R012 Unknown step 'graph_optimise'"),
    ("detail-is-a-folder", _folder("run.detail.yaml"), ["run"], ".", EXIT_VALIDATION, "NP-VAL-422", "is a folder"),
    ("detail-symlink-loop", _symlink_loop, ["run"], ".", EXIT_VALIDATION, "NP-VAL-422", "cannot be read"),
    ("detail-timeout-nan", _write("run.detail.yaml", "detail:\n  profile[0]:\n    timeout: .nan\n"), ["run"], ".",
     EXIT_VALIDATION, "NP-VAL-422", "run.detail.yaml:3:5 D021 detail.profile[0].timeout must be a finite number"),
    ("detail-timeout-inf", _write("run.detail.yaml", "detail:\n  profile[0]:\n    timeout: .inf\n"), ["run"], ".",
     EXIT_VALIDATION, "NP-VAL-422", "must be a finite number (got inf)"),
    ("detail-seed-huge", _write("run.detail.yaml", "detail:\n  seed: 123456789012345678901234567890\n"), ["run"], ".",
     EXIT_VALIDATION, "NP-VAL-422", "must be at most"),
    ("detail-negative-count", _write("run.detail.yaml", "detail:\n  profile[0]:\n    num_executions: -5\n"),
     ["run"], ".", EXIT_VALIDATION, "NP-VAL-422", "must be at least 1"),
    # command-line garbage (exit 2); text the user wrote is printed as written, never read as markup
    ("profile-opt-nan", _nothing, ["profile", "--profile-opt", "timeout=nan"], ".", EXIT_USAGE, "NP-CPF-422",
     "timeout must be a finite number"),
    ("profile-opt-inf", _nothing, ["profile", "--profile-opt", "timeout=inf"], ".", EXIT_USAGE, "NP-CPF-422",
     "timeout must be a finite number"),
    ("profile-opt-huge", _nothing, ["profile", "--profile-opt", "num_executions=100000000000000000000"], ".",
     EXIT_USAGE, "NP-CPF-422", "must be at most"),
    ("profile-opt-no-key", _nothing, ["profile", "--profile-opt", "=5"], ".", EXIT_USAGE, "NP-CPF-422", "key ''"),
    ("report-sort-markup", _nothing, ["report", "--sort", "[/b]latency"], ".", EXIT_USAGE, "NP-RPT-400",
     "'[/b]latency'"),
    ("report-filter-garbage", _nothing, ["report", "--filter", "latency>>[bold]"], ".", EXIT_USAGE, "NP-RPT-400",
     "latency>>[bold]"),
    ("experiment-name-brackets", _nothing, ["experiments", "create", "-s", "go", "-n", "exp[bold]1"], ".",
     EXIT_USAGE, "NP-EXP-400", "'exp[bold]1'"),
    ("project-name-markup", _nothing, ["projects", "create", "-n", "[/b]abc", "-m", "mlp", "-d", "host"], "../..",
     EXIT_USAGE, "NP-PRJ-400", "'[/b]abc'"),
    ("model-path-markup", _nothing, ["projects", "create", "-n", "abc", "-m", "m[bold].pt2", "-d", "host"], "../..",
     EXIT_CONFIG, "NP-MDL-404", "m[bold].pt2"),
    ("experiment-is-a-file", _nothing, ["status", "-e", "../project.json"], ".", EXIT_CONFIG, "NP-EXP-404",
     "is a file, not an experiment folder"),
    # damaged or wrong files: one "cannot be read" error naming the file (exit 3), nothing changed
    ("project-json-list", _write("../project.json", "[1, 2]"), ["run"], ".", EXIT_CONFIG, "NP-PRJ-500",
     "project.json holds a JSON list"),
    ("project-json-latin-1", _write("../project.json", b'{"device": "caf\xe9"}'), ["validate"], ".", EXIT_CONFIG,
     "NP-PRJ-500", "project.json is not UTF-8 text"),
    ("project-json-device-number", _write("../project.json", '{"device": 5, "model": {}}'), ["validate"], ".",
     EXIT_CONFIG, "NP-PRJ-500", "`device` is a number, not text"),
    ("project-json-empty", _write("../project.json", ""), ["run"], ".", EXIT_CONFIG, "NP-PRJ-500",
     "is not valid JSON"),
    ("workspace-json-list", _write("../../np-workspace.json", "[]"), ["projects", "create", "-n", "abc", "-m", "mlp",
     "-d", "host"], "../..", EXIT_CONFIG, "NP-WS-500", "np-workspace.json holds a JSON list"),
    ("workspace-json-truncated", _write("../../np-workspace.json", '{"schema_version": 1, "crea'),
     ["workspace", "init", "."], "../..", EXIT_CONFIG, "NP-WS-500", "is not valid JSON"),
    ("workspace-init-on-a-file", _write("../../../notes.txt", "mine"), ["workspace", "init", "notes.txt"],
     "../../..", EXIT_CONFIG, "NP-WS-400", "is a file, not a folder"),
    ("workspace-init-in-an-experiment", _nothing, ["workspace", "init", ""], ".", EXIT_CONFIG, "NP-WS-400",
     "np does not make a workspace inside another"),
    ("workspace-init-under-a-file", _write("../../../notes.txt", "mine"), ["workspace", "init", "notes.txt/ws"],
     "../../..", EXIT_CONFIG, "NP-WS-400", "cannot create the workspace folder"),
    ("devices-yaml-port-text", _write("../../devices.yaml", "devices:\n  raspberry_pi_5:\n    ssh: pi@10.0.0.2\n"
                                      "    port: twenty-two\n"), ["validate"], ".", EXIT_CONFIG, "NP-DEV-400",
     "port of device 'raspberry_pi_5' must be a whole number from 1 to 65535 (got 'twenty-two')"),
    ("devices-yaml-ssh-option", _write("../../devices.yaml", "devices:\n  raspberry_pi_5:\n    ssh: -oProxyCommand=x\n"),
     ["validate"], ".", EXIT_CONFIG, "NP-DEV-400", "must be a destination like user@host"),
    ("devices-yaml-laughs", _write("../../devices.yaml", "devices: {}\n" + LAUGHS[len(GO_ONLY):]), ["validate"],
     ".", EXIT_CONFIG, "NP-DEV-400", "expands to more than"),
    ("devices-yaml-python-tag", _write("../../devices.yaml", "devices: !!python/object/new:dict {}\n"), ["validate"],
     ".", EXIT_CONFIG, "NP-DEV-400", "np reads plain YAML only"),
    ("devices-yaml-binary", _write("../../devices.yaml", b"\xff\xfe\x00d"), ["validate"], ".", EXIT_CONFIG,
     "NP-DEV-400", "devices.yaml is not UTF-8 text"),
    # calibration datasets that cannot be used: refused when the project is created (exit 3), naming the file
    ("calibration-npy-garbage", _calibration({"ok.npy": _npy((1, 64)), "bad.npy": b"\x93NUMPY garbage"}),
     CREATE_WITH_DATA, "../..", EXIT_CONFIG, "NP-DAT-422", "bad.npy cannot be read as a NumPy array"),
    ("calibration-wrong-shape", _calibration({"a.npy": _npy((1, 32))}), CREATE_WITH_DATA, "../..", EXIT_CONFIG,
     "NP-DAT-422", "a.npy has shape (1, 32), the model input is (1, 64)"),
    ("calibration-pt-is-text", _calibration({"a.pt": b"not a torch file"}), CREATE_WITH_DATA, "../..", EXIT_CONFIG,
     "NP-DAT-422", "a.pt cannot be read as tensors saved with torch.save"),
]


@pytest.mark.parametrize(("setup", "argv", "cwd", "exit_code", "code", "text"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_error(run_np, exp: Path, setup: Callable[[Path], None], argv: list[str], cwd: str,
                                      exit_code: int, code: str, text: str) -> None:
    setup(exp)
    root = exp.parents[1]
    before = tree_digest(root)
    started = time.perf_counter()
    result = run_np(*argv, cwd=(exp / cwd).resolve())
    assert time.perf_counter() - started < 20  # bounded: no alias expansion, no hang
    stderr = assert_one_clear_error(result, exit_code, code)
    assert text in stderr
    assert tree_digest(root) == before  # nothing renamed, rewritten or half-created
    assert not (root / "with_data").exists() and not (root / "abc").exists()


def test_a_path_to_run_yaml_names_its_experiment(run_np, exp: Path) -> None:
    result = run_np("validate", "-e", str(exp / "run.yaml"), cwd=exp.parents[1])
    assert result.exit_code == 0, result.stderr


def test_files_are_created_with_the_users_umask(run_np, exp: Path) -> None:
    old = os.umask(0o027)
    try:
        result = run_np("experiments", "create", "-s", "go", "-n", "umask", cwd=exp.parent)
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.stderr
    for name in ("run.yaml", "meta.json"):
        assert (exp.parent / "umask" / name).stat().st_mode & 0o777 == 0o640, name  # not mkstemp's 0600


@pytest.mark.np_run
def test_ctrl_c_exits_130_and_says_how_to_resume(exp: Path) -> None:
    # A shell without job control starts background commands with SIGINT ignored, and Python keeps an ignored
    # SIGINT ignored (as np should: `np run &` in a script is not meant to stop on Ctrl+C). When this suite runs in
    # such a background job, np inherited the ignore and finished the run: give it the terminal's default, as a
    # user's foreground `np run` has.
    proc = subprocess.Popen([sys.executable, "-m", "np_optimizer", "run"], cwd=exp, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the run has started (its log is on stderr)
            if "[Phase 1]" in line:
                break
        proc.send_signal(signal.SIGINT)  # once, as a user would: native code may delay it, never swallow it
        _out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "Interrupted." in err and "np run --retry" in err and "Traceback" not in err
    assert json.loads((exp / "meta.json").read_text())["status"] != "running"


# -- a finished run: damaged result files and cache entries np can do without ---------------------------------------


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One finished np run (mlp, graph_optimize, GRAPH_OPTIMIZE estimated on raspberry_pi_5), with its estimate in
    the module's cache; tests change copies only."""
    root = tmp_path_factory.mktemp("hostile-run") / "ws"
    Workspace.create(root)
    exp = make_project(root, "ran", run_yaml=GO_PROFILED)
    run_here(exp)
    before = tree_digest(root)
    yield exp
    assert_unchanged(root, before)


@pytest.fixture
def ran(finished: Path, tmp_path: Path, module_cache: Path) -> Path:
    return copy_workspace(finished, tmp_path, cache=module_cache)


RAN_CASES: list[tuple[str, Callable[[Path], None], list[str], int, str, str]] = [
    ("export-over-a-file", _nothing, ["export", "-o", "run.yaml"], EXIT_CONFIG, "NP-CFG-400", "is a file"),
    ("export-under-a-file", _nothing, ["export", "-l", "result", "-o", "run.yaml/out"], EXIT_CONFIG, "NP-CFG-400",
     "cannot create the export folder"),
    ("profile-checkpoint-markup", _nothing, ["profile", "GRAPH[/b]"], EXIT_CONFIG, "NP-CPF-404", "'GRAPH[/b]'"),
    ("profile-opt-on-an-estimate", _nothing, ["profile", "--profile-opt", "warmup=1"], EXIT_USAGE, "NP-CPF-422",
     "applies to measured methods"),
    ("experiment-lock-is-a-folder", _folder(".experiment.lock"), ["run", "--retry"], EXIT_CONFIG, "NP-CFG-400",
     "cannot open its lock file"),
]


def _results(root: Path) -> dict[str, str]:
    """The digest of the files np keeps (logs and lock files aside: a command may append to its log)."""
    return {k: v for k, v in tree_digest(root).items() if "/logs/" not in k and ".lock" not in k
            and ".run-holders" not in k}


@pytest.mark.np_run
@pytest.mark.parametrize(("setup", "argv", "exit_code", "code", "text"), [c[1:] for c in RAN_CASES],
                         ids=[c[0] for c in RAN_CASES])
def test_bad_input_on_a_finished_run(run_np, ran: Path, setup: Callable[[Path], None], argv: list[str],
                                     exit_code: int, code: str, text: str) -> None:
    setup(ran)
    before = _results(ran.parents[1])
    stderr = assert_one_clear_error(run_np(*argv, cwd=ran), exit_code, code)
    assert text in stderr
    assert _results(ran.parents[1]) == before


def _cache_entry(exp: Path) -> Path:
    job = json.loads((exp / "01_graph_optimize" / "job.json").read_text())
    key = job["profile"][-1]["cache"]["key"]
    return Path(os.environ["NP_CACHE_DIR"]) / "estimates" / key[:2] / f"{key}.json"


def _entry_with(change: Callable[[dict], object]) -> Callable[[Path], bytes]:
    def damage(entry: Path) -> bytes:
        data = json.loads(entry.read_text())
        change(data)
        return json.dumps(data).encode()

    return damage


CACHE_DAMAGE: dict[str, Callable[[Path], bytes]] = {
    "random-bytes": lambda _e: os.urandom(512),
    "not-utf8": lambda _e: b'{"schema": 1, "key": "caf\xe9"}',
    "truncated": lambda e: e.read_bytes()[:100],
    "empty": lambda _e: b"",
    "a-list": lambda _e: b"[1, 2, 3]",
    "missing-output": _entry_with(lambda d: d.pop("output")),
    "metrics-is-text": _entry_with(lambda d: d["output"].update(metrics="fast")),
    "metric-value-is-text": _entry_with(lambda d: d["output"]["metrics"][0].update(value="many")),
    "unknown-output-field": _entry_with(lambda d: d["output"].update(surprise=1)),
    "artifact-escapes-its-folder": _entry_with(lambda d: d["output"]["artifacts"].update(x="../../../escape.txt")),
}


@pytest.mark.np_run
@pytest.mark.parametrize("damage", list(CACHE_DAMAGE) + ["a-folder"])
def test_damaged_estimate_cache_is_a_warned_miss(run_np, ran: Path, damage: str) -> None:
    entry = _cache_entry(ran)
    assert entry.is_file()
    if damage == "a-folder":
        entry.unlink()
        (entry / "inside").mkdir(parents=True)
    else:
        entry.write_bytes(CACHE_DAMAGE[damage](entry))
    result = run_np("profile", "graph_optimize", "--json", cwd=ran)
    assert result.exit_code == 0, result.stdout + result.stderr
    round_ = result.json["results"][0]
    assert round_["status"] == "SUCCESS" and not round_["cache"]["reused"]
    assert any("corrupt cached estimate" in w and str(entry) in w for w in round_["warnings"]), round_["warnings"]
    replaced = json.loads(entry.read_text())  # replaced by the new estimate: reused next time
    assert replaced["key"] == entry.stem and isinstance(replaced["output"]["metrics"], list)
    again = run_np("profile", "graph_optimize", "--json", cwd=ran)
    assert again.json["results"][0]["cache"]["reused"]
    assert not any("corrupt" in w for w in again.json["results"][0]["warnings"])
    assert not (ran.parents[2] / "escape.txt").exists()


@pytest.mark.np_run
def test_a_cache_that_cannot_be_written_costs_the_reuse_only(run_np, ran: Path) -> None:
    entry = _cache_entry(ran)
    shutil.rmtree(entry.parent)
    entry.parent.write_text("a file where the shard folder belongs")
    result = run_np("profile", "graph_optimize", "--json", cwd=ran)
    assert result.exit_code == 0, result.stderr
    assert result.json["results"][0]["status"] == "SUCCESS"
    assert json.loads(entry.read_text())["key"] == entry.stem  # the obstacle was a damaged cache: replaced


RESULT_DAMAGE = [
    ("job-truncated", "01_graph_optimize/job.json", lambda b: b[: len(b) // 2]),
    ("job-latin-1", "01_graph_optimize/job.json", lambda b: b.replace(b'"graph_optimize"', b'"caf\xe9"', 1)),
    ("job-a-list", "01_graph_optimize/job.json", lambda _b: b"[]"),
    ("job-status-null", "01_graph_optimize/job.json",
     lambda b: json.dumps({**json.loads(b), "status": None}).encode()),
    ("job-profile-is-text", "01_graph_optimize/job.json",
     lambda b: json.dumps({**json.loads(b), "profile": "none"}).encode()),
    ("report-a-list", "report.json", lambda _b: b"[1]"),
    ("report-binary", "report.json", lambda _b: bytes(range(256))),
    ("report-post-hoc-is-text", "report.json", lambda b: json.dumps({**json.loads(b), "post_hoc": "x"}).encode()),
]


@pytest.mark.np_run
@pytest.mark.parametrize(("relative", "damage"), [c[1:] for c in RESULT_DAMAGE], ids=[c[0] for c in RESULT_DAMAGE])
def test_damaged_result_file_is_said_by_readers_and_set_aside_by_a_writer(run_np, ran: Path, relative: str,
                                                                          damage: Callable[[bytes], bytes]) -> None:
    path = ran / relative
    damaged = damage(path.read_bytes())
    path.write_bytes(damaged)
    for command in ("status", "report"):
        result = run_np(command, cwd=ran)
        assert result.exit_code == 0, result.stdout + result.stderr
        assert "Traceback" not in result.stderr and "NP-GEN-500" not in result.stdout + result.stderr
        assert any(line.startswith("Warning:") and str(path) in line for line in result.stderr.splitlines())
        assert path.read_bytes() == damaged  # a reader renames and rewrites nothing
    wrote = run_np_subprocess("profile", "INPUT_MODEL", cwd=ran)  # a writing command repairs
    assert wrote.exit_code == 0, wrote.stdout + wrote.stderr
    kept = list(path.parent.glob(f"{path.name}.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == damaged  # set aside, never deleted
    assert kept[0].name in wrote.stdout + wrote.stderr  # the console says which file went where
    json.loads(path.read_text())  # restored from report.json's copy, or rebuilt from the jobs


@pytest.mark.np_run
@pytest.mark.parametrize("damage", [b'{"schema_version": 1, "status": "succ', b"\xff\xfe\x00", b"[]",
                                    b'{"status": "running", "pid": "me"}'],
                         ids=["truncated", "binary", "a-list", "pid-is-text"])
def test_damaged_meta_json_reads_from_report_json_and_is_left_alone(run_np, ran: Path, damage: bytes) -> None:
    (ran / "meta.json").write_bytes(damage)
    for argv in (["status"], ["experiments", "ls"], ["experiments", "info", ran.name]):
        result = run_np(*argv, cwd=ran.parent if argv[0] == "experiments" else ran)
        assert result.exit_code == 0, result.stdout + result.stderr
        assert "Traceback" not in result.stderr and "NP-GEN-500" not in result.stdout + result.stderr
    status = run_np("status", cwd=ran)
    assert "success" in status.stdout and "meta.json could not be read" in status.stderr  # report.json's copy
    assert (ran / "meta.json").read_bytes() == damage  # a read-only command renames and rewrites nothing


@pytest.mark.np_run
def test_ssh_unreachable_prints_the_stored_hint(run_np, ran: Path) -> None:
    (ran.parents[1] / "devices.yaml").write_text(UNREACHABLE)
    result = run_np("profile", "graph_optimize", "--method", "on-device", cwd=ran)
    assert result.exit_code == EXIT_NETWORK, result.stdout + result.stderr
    stored = json.loads((ran / "report.json").read_text())["post_hoc"][-1]["error"]
    assert stored["code"].startswith("NP-DEV-5") and stored["hint"]
    assert f"Hint: {stored['hint']}" in " ".join(result.stderr.split())
    devices = ran.parents[1] / "devices.yaml"  # what to check, and which file sets it
    assert "nobody@127.0.0.1" in stored["hint"] and "port 1 " in stored["hint"] and str(devices) in stored["hint"]


@pytest.mark.np_run
def test_retry_after_a_truncated_meta_json_and_an_unreachable_device(run_np, ran: Path) -> None:
    meta = ran / "meta.json"
    meta.write_bytes(meta.read_bytes()[:40])
    (ran.parents[1] / "devices.yaml").write_text(UNREACHABLE)
    result = run_np("run", "--retry", "--profile-method", "on-device", cwd=ran)
    assert result.exit_code == EXIT_NETWORK, result.stdout + result.stderr  # every failure: the unreachable device
    assert "Traceback" not in result.stdout + result.stderr and "NP-GEN-500" not in result.stdout + result.stderr
    assert "✓ (reused)" in result.stdout  # the retry went through the truncated meta.json
    hint = json.loads((ran / "report.json").read_text())["profile"]["results"][-1]["error"]["hint"]
    assert f"Hint: {hint}" in result.stdout  # and says what to do about the device, as report.json does
    assert json.loads(meta.read_text())["status"] == "failed"
    assert len(list(ran.glob("meta.json.corrupt-*"))) == 1  # the damaged one, set aside by the write
