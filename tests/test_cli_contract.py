"""Help texts, exit codes, JSON error shape, and the commands that must start without importing torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from np_optimizer.devices.compat_doc import render_compatibility

COMMANDS = [
    [], ["workspace", "init"], ["projects", "create"], ["projects", "ls"], ["projects", "info"], ["models", "ls"],
    ["experiments", "create"], ["experiments", "detail"], ["experiments", "ls"], ["experiments", "info"],
    ["devices", "ls"], ["validate"], ["run"], ["profile"], ["report"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "np")
def test_help_has_description_and_example(run_np, command: list[str]) -> None:
    result = run_np(*command, "--help")
    assert result.exit_code == 0
    assert "Example" in result.stdout
    assert len(result.stdout.strip().splitlines()) > 3


@pytest.mark.parametrize(("command", "text"), [(["profile"], "Checkpoint names"),
                                             (["workspace", "init"], "Folder of the workspace")])
def test_arguments_have_help(run_np, command: list[str], text: str) -> None:
    # click 8.5 drops the help typer gives an argument: the pin in requirements.lock keeps it
    assert text in " ".join(run_np(*command, "--help").stdout.split())


def test_unknown_command_is_usage_error(run_np) -> None:
    assert run_np("frobnicate").exit_code == 2


def test_compatibility_doc_matches_the_catalogue() -> None:
    committed = (Path(__file__).resolve().parents[1] / "docs" / "compatibility.md").read_text()
    assert committed == render_compatibility(), "docs/compatibility.md is stale: run `make docs`"


@pytest.mark.parametrize("args", [["devices", "ls"], ["validate"], ["run", "--dry-run"], ["models", "ls"]])
def test_light_commands_do_not_import_torch(cpu_experiment: Path, args: list[str]) -> None:
    code = (
        "import sys\n"
        "from np_optimizer.cli.main import main\n"
        f"rc = main({args!r})\n"
        "heavy = [m for m in ('torch', 'executorch', 'mlia', 'torchao') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=cpu_experiment, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stdout
