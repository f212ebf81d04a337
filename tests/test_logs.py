"""execution.log holds np's own lines in the spec's format; library output goes to libraries.log; --debug shows
tracebacks of logged internal errors on the console."""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from np_optimizer.logs import (
    debug_enabled,
    get_logger,
    phase_banner,
    quiet_native_output,
    run_logging,
    set_debug,
)
from tests.helpers import make_project, run_np_subprocess

pytestmark = pytest.mark.own_steps  # the libraries' output of steps that run

LOG_LINE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}\.\d{2} \[(INFO |WARN |ERROR|DEBUG|DONE )\] \[\w+\] ")
BANNER = re.compile(r"^(={60}|\[Phase \d+\] .+)$")


def np_lines_only(text: str) -> list[str]:
    """The lines of an execution.log that are neither np log lines nor phase banners."""
    return [line for line in text.splitlines() if line and not (LOG_LINE.match(line) or BANNER.match(line))]


@pytest.fixture
def debug_off() -> Iterator[None]:
    set_debug(False)
    yield
    set_debug(False)


@pytest.fixture
def warnings_not_captured() -> Iterator[None]:
    """logging's warning capture off, as in a fresh np process. An earlier test in this process may have left it on:
    importing mlia turns it on (mlia/__init__.py), and np imports mlia.target.registry outside its mlia log routing
    (backends/ethos_u.py), so run_logging's own captureWarnings(True) would then be a no-op under pytest's recorder."""
    logging.captureWarnings(False)
    yield
    logging.captureWarnings(False)


def test_library_output_goes_to_libraries_log(tmp_path: Path, debug_off: None, warnings_not_captured: None) -> None:
    log_file = tmp_path / "logs" / "execution.log"
    console: list[str] = []
    with run_logging(log_file, console.append), quiet_native_output(log_file):
        log = get_logger("Profiler")
        phase_banner(log, 4, "Profiling")
        log.info("Compiling: input_model")
        logging.getLogger("torchao.kernel").warning("Failed to load the optional kernel")
        warnings.warn("torch.foo is deprecated", FutureWarning, stacklevel=1)
        warnings.warn("old API", DeprecationWarning, stacklevel=1)
        print("cpuinfo: unsupported CPU")  # a Python-level print of a library
        os.write(2, b"native stderr line\n")  # what the runtime writes on fd 2 itself
        sys.stdout.flush()
    execution = log_file.read_text()
    libraries = (log_file.parent / "libraries.log").read_text()
    assert "Compiling: input_model" in execution and "[Phase 4] Profiling" in execution
    assert np_lines_only(execution) == []
    for text in ("Failed to load the optional kernel", "FutureWarning", "DeprecationWarning", "cpuinfo: unsupported",
                 "native stderr line"):
        assert text in libraries and text not in execution, text
    assert "Compiling: input_model" not in libraries
    assert all("kernel" not in line and "cpuinfo" not in line for line in console)
    assert any(line.endswith("[Profiler] Compiling: input_model") for line in console)


def _log_internal_error() -> None:
    try:
        {}["missing"]
    except KeyError as exc:
        get_logger("Profiler").error("Internal error: KeyError: 'missing'", exc_info=exc)


@pytest.mark.parametrize("debug", [False, True])
def test_traceback_on_the_console_only_with_debug(tmp_path: Path, debug_off: None, debug: bool) -> None:
    set_debug(debug)
    log_file = tmp_path / "logs" / "execution.log"
    console: list[str] = []
    with run_logging(log_file, console.append):
        _log_internal_error()
    assert "Traceback (most recent call last)" in log_file.read_text()  # always in execution.log
    shown = "\n".join(console)
    assert "Internal error: KeyError: 'missing'" in shown
    assert ("Traceback (most recent call last)" in shown) is debug


def test_debug_flag_is_set_by_the_entry_point(run_np, debug_off: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NP_DEBUG", raising=False)
    run_np("--debug", "--version")
    assert debug_enabled()
    run_np("--version")
    assert not debug_enabled()
    monkeypatch.setenv("NP_DEBUG", "1")
    run_np("--version")
    assert debug_enabled()


@pytest.mark.np_run
def test_a_run_keeps_library_noise_out_of_the_execution_log(workspace: Path) -> None:
    exp = make_project(workspace, "tiny_log", model="mlp", steps="go")
    result = run_np_subprocess("run", cwd=exp)
    assert result.exit_code == 0, result.stderr[-2000:]
    execution = (exp / "logs" / "execution.log").read_text()
    assert "[Profiler] Compiling: input_model" in execution
    assert np_lines_only(execution) == []
    assert (exp / "logs" / "libraries.log").is_file()
    console = [line for line in result.stderr.splitlines() if line.strip()]
    assert np_lines_only("\n".join(console)) == []  # the console shows np's lines only, too
