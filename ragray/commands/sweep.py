"""``ragray sweep SPEC``: run a configuration sweep on Ray Tune and print its leaderboard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragray.sweep.runner import SweepResult, run_sweep

__all__ = ["sweep_command", "format_leaderboard"]

_COLUMNS = [("rank", "#"), ("score", "score"), ("confidence", "conf"), ("f1", "F1"), ("mrr", "MRR"),
            ("mean_rho", "rho"), ("wasted_context", "wasted"), ("latency_s", "s/q"), ("label", "configuration")]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def format_leaderboard(result: SweepResult, limit: int = 20) -> str:
    """The top ``limit`` rows as a plain-text table (failed trials with their error)."""
    rows = [[_cell(r.get(key)) for key, _ in _COLUMNS] for r in result.rows[:limit]]
    heads = [h for _, h in _COLUMNS]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    for r in result.rows:
        if r["status"] != "done":
            lines.append(f"failed: {r['label']}: {r.get('error')}")
    return "\n".join(lines)


def sweep_command(spec: str | Path, out: str | Path | None, *, address: str | None, resume: bool,
                  overrides: list[str]) -> SweepResult:
    result = run_sweep(spec, out, address=address, resume=resume, overrides=overrides)
    n_done = sum(r["status"] == "done" for r in result.rows)
    print(f"ragray sweep: {n_done}/{len(result.rows)} trials done -> {result.out}")
    print(format_leaderboard(result))
    if "best_config" in result.files:
        print(f"best config: {result.files['best_config']}  (ragray run {result.files['best_config']})")
    return result
