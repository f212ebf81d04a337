"""np cache ls, np cache prune."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from np_optimizer.api.cache import CACHE_KINDS, cache_list, cache_prune
from np_optimizer.cli.options import JsonOpt, PlainOpt
from np_optimizer.cli.render import line, print_json, print_plain, print_table

app = typer.Typer(help="The compile, step and estimate caches shared by every workspace ($NP_CACHE_DIR, else "
                  "~/.cache/np).",
                  no_args_is_help=True)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n:,} B"
    value = float(n)
    for unit in ("KB", "MB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} GB"


def _age(seconds: float) -> str:
    if seconds < 60:
        return "just now"
    for limit, unit in ((3600, "m"), (86400, "h"), (float("inf"), "d")):
        if seconds < limit:
            value = seconds / {"m": 60, "h": 3600, "d": 86400}[unit]
            return f"{value:.0f}{unit} ago"
    return "-"


@app.command("ls", epilog="Example: np cache ls --json")
def ls(json_mode: JsonOpt = False, plain: PlainOpt = False) -> None:
    """List the compiled programs and the steps' checkpoints in the cache, with their sizes, and the estimates' count
    and size."""
    listing = cache_list()
    now = time.time()
    if json_mode:
        print_json({"root": str(listing.root), "compiled_folder": str(listing.compiled_folder), "compiled": [
            {"key": e.key, "backend": e.backend, "target": e.target, "program_sha256": e.program_sha256,
             "size_bytes": e.size_bytes, "compile_seconds": e.compile_seconds, "created_at": e.created_at,
             "last_used_at": e.last_used_at, "folder": str(e.folder)} for e in listing.compiled],
            "compiled_bytes": listing.compiled_bytes, "estimates": listing.estimates,
            "estimates_bytes": listing.estimates_bytes, "steps_folder": str(listing.steps_folder), "steps": [
                {"key": e.key, "step_type": e.step_type, "checkpoint": e.checkpoint, "made_in": e.made_in,
                 "output_sha256": e.output_sha256, "size_bytes": e.size_bytes, "step_seconds": e.step_seconds,
                 "created_at": e.created_at, "last_used_at": e.last_used_at, "folder": str(e.folder)}
                for e in listing.steps], "steps_bytes": listing.steps_bytes, "references": listing.references,
            "references_bytes": listing.references_bytes})
        return
    rows = [[e.key[:12], e.backend, e.target or "-", e.program_sha256[:12], _size(e.size_bytes),
             f"{e.compile_seconds:.1f} s" if e.compile_seconds is not None else "-", _age(now - e.last_used_at)]
            for e in listing.compiled]
    columns = ["Key", "Backend", "Target", "Program", "Size", "Lowering took", "Last used"]
    if plain:
        print_plain(columns, rows)
    else:
        print_table(f"Compiled programs ({len(rows)}, {_size(listing.compiled_bytes)})", columns, rows)
    steps = [[e.key[:12], e.step_type, e.checkpoint, e.made_in, e.output_sha256[:12], _size(e.size_bytes),
              f"{e.step_seconds:.1f} s" if e.step_seconds is not None else "-", _age(now - e.created_at),
              _age(now - e.last_used_at)] for e in listing.steps]
    columns = ["Key", "Step", "Checkpoint", "Made in", "Output", "Size", "Step took", "Created", "Last used"]
    if plain:
        print_plain(columns, steps, section="steps")
    else:
        print_table(f"Steps ({len(steps)}, {_size(listing.steps_bytes)})", columns, steps)
    line(f"Estimates: {listing.estimates} ({_size(listing.estimates_bytes)}).  INPUT_MODEL references: "
         f"{listing.references} ({_size(listing.references_bytes)}; pruned with the steps).  Cache folder: {listing.root}"
         + (f" (compiled programs: {listing.compiled_folder})" if listing.compiled_folder.parent != listing.root else "")
         + (f" (steps: {listing.steps_folder})" if listing.steps_folder.parent != listing.root else ""))


@app.command("prune", epilog="Example: np cache prune --older-than 30d")
def prune(
    older_than: Annotated[Optional[str], typer.Option("--older-than", help="Only entries last used longer ago "
                                                      "than this (30d, 12h, 90m, 2w). Default: every entry.")] = None,
    kind: Annotated[str, typer.Option("--kind", help=f"Which cache: {', '.join(CACHE_KINDS)}.")] = "all",
    json_mode: JsonOpt = False,
) -> None:
    """Remove cache entries (they are rebuilt when needed: pruning costs time, never results)."""
    result = cache_prune(older_than=older_than, kind=kind)
    if json_mode:
        print_json(vars(result))
        return
    line(f"Removed {result.removed_compiled} compiled program(s), {result.removed_steps} step(s) and "
         f"{result.removed_estimates} estimate(s), freeing {_size(result.freed_bytes)}; kept {result.kept_compiled}, "
         f"{result.kept_steps} and {result.kept_estimates}.")
