"""np profile: post-hoc profiling of finished checkpoints, on the project's device or any catalogue device."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Optional

import typer

from np_optimizer.cli.live import live_display
from np_optimizer.cli.options import ExperimentOpt, JsonOpt, ProjectOpt
from np_optimizer.cli.render import notice, out, print_json, print_table, warn
from np_optimizer.errors import EXIT_FAILED, EXIT_NETWORK
from np_optimizer.profiler.render import mib
from np_optimizer.records import ProfileResult, to_dict
from np_optimizer.report.tables import fmt_number

_HEADLINE = [("Latency (ms)", "LATENCY"), ("Memory (MB)", "MEMORY"), ("Weight Memory (MB)", "MODEL_WEIGHT_MEMORY"),
             ("MACs", "MACS"), ("Params", "PARAMS")]


_NETWORK_CODES = {"NP-DEV-503", "NP-DEV-504", "NP-DEV-502"}  # the device could not be reached


def exit_code(results: list[ProfileResult]) -> int:
    failed = [r for r in results if r.status != "SUCCESS"]
    if not failed:
        return 0
    network = all((r.error or {}).get("code") in _NETWORK_CODES for r in failed)
    return EXIT_NETWORK if network else EXIT_FAILED


def _cell(result: ProfileResult, metric_type: str) -> str:
    metric = result.metric(metric_type)
    if metric is None:
        return "-"
    if metric_type in ("MACS", "PARAMS"):
        return f"{int(metric.value):,}"
    if metric_type == "MODEL_WEIGHT_MEMORY":
        return f"{mib(metric.value):.2f}"
    return fmt_number(metric.value)


def _title(results: list[ProfileResult]) -> str:
    kinds = {r.result_kind for r in results if r.status == "SUCCESS"}
    if not kinds:
        return "Profile Results — failed"
    if kinds == {"measured"}:
        return "Profile Results — measured"
    estimated = next((r for r in results if r.result_kind == "estimated" and r.status == "SUCCESS"), None)
    detail = ""
    if estimated is not None:
        p = estimated.provenance
        if p.get("tool") == "mlia":
            detail = f" ({p['tool']} {p['tool_version']} / {p['target_profile']}, {p['core_clock_hz'] / 1e6:g}MHz)"
        else:
            detail = f" ({p.get('tool')} {p.get('tool_version')})"
    return f"Profile Results — {'mixed' if len(kinds) > 1 else 'estimated'}" + (
        f" (estimated:{detail})" if len(kinds) > 1 else detail)


def register(app: typer.Typer) -> None:
    @app.command("profile", epilog="Examples: np profile            (every checkpoint of this experiment)\n\n"
                 "np profile graph_quantize -d host --method on-device --profile-opt num_executions=50")
    def profile(
        ids: Annotated[Optional[list[str]], typer.Argument(help="Checkpoint names (GRAPH_QUANTIZE, output_model) or "
                                                           "job names (02_graph_quantize); default: all.")] = None,
        experiment: ExperimentOpt = None,
        project: ProjectOpt = None,
        method: Annotated[Optional[str], typer.Option("--method", help="mlia | on-device (default: the device's).",
                                                      case_sensitive=False)] = None,
        device: Annotated[Optional[str], typer.Option("--device", "-d", help="Any catalogue device (default: the "
                                                      "project's).")] = None,
        runtime: Annotated[Optional[str], typer.Option("--runtime", "-r", help="Must match the device.")] = None,
        backend: Annotated[Optional[str], typer.Option("--backend", "-b", help="Must match the device.")] = None,
        force: Annotated[bool, typer.Option("--force", help="Estimate again instead of reusing an earlier "
                                            "estimate.")] = False,
        profile_opt: Annotated[Optional[list[str]], typer.Option("--profile-opt", help="KEY=VALUE of run.detail.yaml's"
                                                                 " profile options (num_executions, timeout, warmup)"
                                                                 "; repeatable.")] = None,
        wait: Annotated[bool, typer.Option("--wait", help="Accepted for compatibility: np profiles synchronously.")]
        = False,
        json_mode: JsonOpt = False,
    ) -> int:
        """Profile finished checkpoints post hoc and record each round in report.json."""
        from np_optimizer.api.profile import parse_profile_opts, profile as run_profile

        options = parse_profile_opts(profile_opt or [])
        with live_display(quiet=json_mode) as display:
            result = run_profile(ids, experiment=experiment, project=project, method=method, device=device,
                                 runtime=runtime, backend=backend, force=force, profile_opts=options,
                                 console_write=display.write, progress=display.progress)
        if json_mode:
            print_json({"experiment": result.experiment, "device": result.device, "method": result.method,
                        "reused": result.reused, "results": [to_dict(r) for r in result.results]})
            return exit_code(result.results)
        _print(result.results, requested=method)
        if result.reused:
            notice("Every result above reused an earlier estimate of the same compiled checkpoint on the same "
                   "device; nothing new ran. Use --force to estimate again.")
        # the caveats on the numbers hold for reused results too (a float checkpoint quantized by MLIA, say)
        for text in dict.fromkeys(n for r in result.results for n in r.notices
                                  if not (result.reused and n.startswith("Reused an earlier"))):
            notice(text)
        # a warning shared by every result is said once; one that differs says whose it is
        for text, names in _by_text((r.checkpoint.lower(), w) for r in result.results for w in r.warnings).items():
            warn(text if len(names) == len(result.results) > 1 else f"{', '.join(names)}: {text}")
        if result.failed:
            warn(f"Profile failed for {len(result.failed)} of {len(result.results)} target(s): " + "; ".join(
                f"{r.checkpoint.lower()}: {(r.error or {}).get('message')}" for r in result.failed))
        out.print("Next: np report")
        return exit_code(result.results)


def _by_text(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """{warning text: the checkpoints that got it}, in first-seen order."""
    grouped: dict[str, list[str]] = {}
    for name, text in pairs:
        names = grouped.setdefault(text, [])
        if name not in names:
            names.append(name)
    return grouped


def _print(results: list[ProfileResult], requested: str | None) -> None:
    shown = [(h, t) for h, t in _HEADLINE if any(r.metric(t) for r in results)]
    failed = any(r.status != "SUCCESS" for r in results)
    columns = ["Name"] + (["Status"] if failed else []) + (["Method"] if requested is None else []) + \
        [h for h, _ in shown]
    rows = []
    for r in results:
        row = [r.checkpoint.lower() + (" (partial)" if r.partial else "")]
        if failed:
            row.append(r.status.lower())
        if requested is None:
            row.append(f"{r.method} ({r.result_kind})")
        row += [_cell(r, t) for _, t in shown]
        rows.append(row)
    print_table(_title(results), columns, rows)
