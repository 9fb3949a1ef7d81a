"""``ragray sweep SPEC``: run a configuration sweep on Ray Tune and print its leaderboard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragray.console import print_table
from ragray.adapters.execution.placement import placement_lines
from ragray.adapters.sweep.compare import behind_words, decision_line
from ragray.adapters.sweep.runner import SweepResult, run_sweep

__all__ = ["print_leaderboard", "sweep_command"]

_COLUMNS = [("rank", "#"), ("score", "score"), ("confidence", "conf"), ("f1", "F1"), ("mrr", "MRR"),
            ("mean_rho", "rho"), ("wasted_context", "wasted"), ("latency_s", "s/q"), ("vs_best", "vs #1"),
            ("beaten", "behind #1"), ("label", "configuration")]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def print_leaderboard(result: SweepResult, limit: int = 20) -> None:
    """The top ``limit`` rows as a table (failed trials with their error below it)."""
    print_table([h for _, h in _COLUMNS],
                [[_cell(behind_words(r) if key == "beaten" else r.get(key)) for key, _ in _COLUMNS]
                 for r in result.rows[:limit]], numeric=range(len(_COLUMNS) - 1))
    for r in result.rows:
        if r["status"] == "stopped":
            print(f"stopped early by the scheduler after {r.get('n_questions')} questions: {r['label']}")
        elif r["status"] != "done":
            print(f"failed: {r['label']}: {r.get('error')}")


def _print_placement(out: Path) -> None:
    """What each trial asked Ray for and where each ran (``summary.json``)."""
    path = Path(out) / "summary.json"
    if not path.is_file():
        return
    summary = json.loads(path.read_text())
    res = summary.get("resources") or {}
    if res:
        print(f"trials: {res['count']} at once, {res['cpus']:g} CPU and {res['gpus']:g} GPU each")
    lines = placement_lines([{**p, "role": f"trial {p['trial_id']}"} for p in summary.get("placement") or []])
    if lines:
        print("\n".join(lines))


def sweep_command(spec: str | Path, out: str | Path | None, *, address: str | None, resume: bool,
                  overrides: list[str]) -> SweepResult:
    result = run_sweep(spec, out, address=address, resume=resume, overrides=overrides)
    n_done = sum(r["status"] == "done" for r in result.rows)
    n_stopped = sum(r["status"] == "stopped" for r in result.rows)
    stopped = f", {n_stopped} stopped early" if n_stopped else ""
    print(f"ragray sweep: {n_done}/{len(result.rows)} trials done{stopped} -> {result.out}")
    print_leaderboard(result)
    if line := decision_line(result.decision):
        print(line)
    _print_placement(result.out)
    for r in result.rows:
        if (r.get("attempts") or 0) > 1:
            print(f"started {r['attempts']} times (a lost worker or a resumed sweep), last on {r.get('node')}: {r['label']}")
    if "best_config" in result.files:
        print(f"best config: {result.files['best_config']}  (ragray run {result.files['best_config']})")
    return result
