"""What `np sweep` shows while it runs: a line per running trial (its step and elapsed time), a line per finished
trial, and the count done/failed/remaining with the time left; JSON lines with --json; nothing with --quiet."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from np_optimizer.formats import fmt_metric
from np_optimizer.metrics import UNITS, MetricType

__all__ = ["SweepDisplay", "params_text", "values_text"]


def params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in params.items())


_SHOWN_IN_MB = {"MODEL_WEIGHT_MEMORY", "PTE_SIZE"}  # stored in bytes, shown in MB (MiB) as np report does


def values_text(values: dict[str, Any]) -> str:
    parts = []
    for metric, value in values.items():
        unit = "MB" if metric in _SHOWN_IN_MB else UNITS.get(MetricType(metric), "") \
            if metric in MetricType.__members__ else ""
        shown = "n/a" if value is None else f"{fmt_metric(metric, value)} {unit}".strip()
        parts.append(f"{metric.lower()} {shown}")
    return ", ".join(parts)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class SweepDisplay:
    def __init__(self, *, json_mode: bool, quiet: bool) -> None:
        self.json_mode, self.quiet = json_mode, quiet
        self.console = Console(file=sys.stderr, highlight=False, markup=False, emoji=False)
        self.running: dict[int, dict[str, Any]] = {}
        self.counts: dict[str, Any] = {}
        self._live: Live | None = None

    def __enter__(self) -> SweepDisplay:
        if not self.json_mode and not self.quiet and self.console.is_terminal:
            self._live = Live(self._render(), console=self.console, refresh_per_second=2, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def _render(self) -> Group:
        now = time.monotonic()
        lines = [Text.assemble((f"  trial {n} ", "bold"), (t["experiment"], "cyan"), "  ", (t.get("text", "starting"),
                               ""), "  ", (f"{now - t['since']:.0f} s", "dim")) for n, t in sorted(self.running.items())]
        c = self.counts
        if c:
            eta = f", about {_duration(c.get('eta_s'))} left" if c.get("eta_s") is not None else ""
            lines.append(Text(f"  {c.get('complete', 0)} done, {c.get('failed', 0)} failed, "
                              f"{c.get('remaining', 0)} to go{eta}", style="dim"))
        return Group(*lines)

    def _print(self, text: Text) -> None:
        if self.quiet or self.json_mode:
            return
        self.console.print(text, soft_wrap=True)

    def event(self, event: dict[str, Any]) -> None:
        if self.json_mode:
            print(json.dumps(event, default=str), flush=True)
        kind = event["kind"]
        if kind == "start":
            self.counts = event
            rerun = f"; {event['rerun']} interrupted trial(s) run again" if event.get("rerun") else ""
            resumed = f"; {event['resumed']} trial(s) already recorded" if event.get("resumed") else ""
            self._print(Text(f"Sweep: {event['budget']} trials of {event['grid']} configurations, "
                             f"{event['workers']} at a time ({event['why']}){resumed}{rerun}"))
        elif kind == "waiting":
            self._print(Text(f"Waiting (up to {event['limit_s']:g} s) for the stopped sweep's trials to let go of "
                             f"{', '.join(event['experiments'])}"))
        elif kind == "trial_start":
            self.running[event["number"]] = {"experiment": event["experiment"], "since": time.monotonic()}
            self._print(Text.assemble(("→ ", "cyan"), f"trial {event['number']} {event['experiment']}: ",
                                      params_text(event["params"]), " (run again)" if event.get("rerun") else "",
                                      "; " + ", ".join(f"{m} {f}" for m, f in event["formats"].items())
                                      if event.get("formats") else ""))
        elif kind == "progress" and event["number"] in self.running:
            self.running[event["number"]]["text"] = event["text"]
        elif kind == "trial_done":
            self.running.pop(event["number"], None)
            self.counts = event
            took = _duration(event.get("duration_s"))
            if event["state"] == "complete":
                self._print(Text.assemble(("✓ ", "green"), f"trial {event['number']} {event['experiment']}: ",
                                          values_text(event["values"]), (f"  ({took})", "dim")))
            else:
                self._print(Text.assemble(("✗ ", "red"), f"trial {event['number']} {event['experiment']} failed: ",
                                          str(event.get("reason")), (f"  ({took})", "dim")))
        elif kind == "ranking":
            if event.get("why"):
                self._print(Text(f"No layer to keep float: {event['why']}; the layers strategy stops here."))
            else:
                ranked = ", ".join(f"{r['module']} (lost {r['lost_db']:.2f} dB)" for r in event["layers"][:4])
                self._print(Text(f"Most damaging layers of the first trial: {ranked}"))
        elif kind == "mixed_plan":
            if event.get("why"):
                self._print(Text(f"Mixed points: {event['why']}."))
            if event["points"]:
                # under `rest: both` the base points name the moves themselves (a widest one, the layers dropped)
                over_base = [p for p in event["points"] if p.get("label") != "mixed widest"] or event["points"]
                said = ", ".join(f"{m} {f}" for m, f in max((p["layers"] for p in over_base), key=len).items())
                self._print(Text(f"Greedy moves of the measured sensitivity, in order: {said or 'none'}; "
                                 f"{len(event['points'])} more trial(s)"))
        elif kind == "end":
            self.counts = event
        if self._live is not None:
            self._live.update(self._render())
