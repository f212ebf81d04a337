"""np profile: post-hoc profiling of finished checkpoints, on the project's device or any catalogue device."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from np_optimizer.cli.live import live_display
from np_optimizer.cli.options import ExperimentOpt, JsonOpt, ProjectOpt
from np_optimizer.cli.render import failures, line, notice, out, print_json, print_table, warn
from np_optimizer.records import to_dict


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
                                                                 " profile options (num_executions, timeout, warmup;"
                                                                 " time_limit, any method); repeatable.")] = None,
        wait: Annotated[bool, typer.Option("--wait", help="Accepted for compatibility: np profiles synchronously.")]
        = False,
        json_mode: JsonOpt = False,
    ) -> int:
        """Profile finished checkpoints post hoc and record each round in report.json."""
        from np_optimizer.api.profile import parse_profile_opts
        from np_optimizer.api.profile import profile as run_profile

        options = parse_profile_opts(profile_opt or [])
        with live_display(quiet=json_mode) as display:
            result = run_profile(ids, experiment=experiment, project=project, method=method, device=device,
                                 runtime=runtime, backend=backend, force=force, profile_opts=options,
                                 console_write=display.write, progress=display.progress)
        if json_mode:
            print_json(to_dict(result))
            return result.exit_code
        from np_optimizer.report.rounds import round_failures, round_messages, round_table

        table = round_table(result.results, method)
        print_table(table.title, table.columns, table.rows)
        notices, warnings = round_messages(result.results, reused=result.reused)
        for text in notices:
            notice(text)
        for text in warnings:
            warn(text)
        failed = round_failures(result.results)
        if failed:
            line(("Profile failed", "red"), f" for {len(failed)} of {len(result.results)} checkpoint(s):", stderr=True)
            failures(failed, stderr=True)
        out.print("Next: np report")
        return result.exit_code

