"""What an in-process engine did, counted: the proxies of its speed that need no GPU to measure.

On a GPU the cost of ablation is set less by arithmetic than by its shape: how many forward
passes the model runs (each launches every kernel of every layer), how often the host waits for
the device (each wait drains the queue), how many tokens go through the model against the fewest
an exact prefix-reusing plan needs, and how many of those are padding. The transformers backend
counts them for every call; runs record them per question and in ``summary.json``.
"""

from __future__ import annotations

import threading

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ENGINE_COUNTS", "EngineCounts", "counts_delta", "engine_columns", "engine_summary", "split_counts"]

#: the counts, in the order runs record them
ENGINE_COUNTS = ("forward_passes", "host_syncs", "tokens_computed", "tokens_minimum", "padding_tokens")


@dataclass
class EngineCounts:
    """Running totals of one engine (see the module docstring); ``tokens_computed`` includes
    padding, ``tokens_minimum`` is what exact prefix reuse of each call's prompts would compute."""

    values: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ENGINE_COUNTS, 0))
    #: calls from several threads (JSD questions, Serve's requests) may count at once
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: float) -> None:
        unknown = [name for name in counts if name not in self.values]
        if unknown:
            raise KeyError(f"unknown engine count {unknown[0]!r}; known: {', '.join(ENGINE_COUNTS)}")
        with self._lock:
            for name, value in counts.items():
                self.values[name] += value

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self.values.copy())


def counts_delta(after: Mapping[str, float], before: Mapping[str, float]) -> dict[str, float]:
    """``after - before`` per count (a count missing before is 0)."""
    return {name: after[name] - before.get(name, 0) for name in after}


def split_counts(total: Mapping[str, float], weights: list[float]) -> list[dict[str, float]]:
    """``total`` shared out in proportion to ``weights`` (the prompts each question sent in one
    merged engine call): fractional shares, summing to the total."""
    whole = sum(weights)
    if not whole:
        return [dict.fromkeys(total, 0.0) for _ in weights]
    return [{name: value * w / whole for name, value in total.items()} for w in weights]


def engine_columns(after: Mapping[str, float], before: Mapping[str, float]) -> dict[str, float | None]:
    """A question's columns: what the engine did for it (None for backends that do not count)."""
    if not after:
        return dict.fromkeys(ENGINE_COUNTS)
    spent = counts_delta(after, before)
    return {name: round(spent.get(name, 0), 3) for name in ENGINE_COUNTS}


def engine_summary(questions: list[dict]) -> dict[str, float | int] | None:
    """``summary.json``'s ``engine``: totals over the questions that counted, per question, and
    tokens computed against the exact-reuse minimum; None when no question counted."""
    counted = [q for q in questions if q.get("forward_passes") is not None]
    if not counted:
        return None
    totals = {name: sum(q[name] for q in counted) for name in ENGINE_COUNTS}
    n = len(counted)
    return {
        "questions": n,
        **{f"{name}_total": round(value, 3) for name, value in totals.items()},
        "forward_passes_per_question": round(totals["forward_passes"] / n, 3),
        "host_syncs_per_question": round(totals["host_syncs"] / n, 3),
        "tokens_computed_per_question": round(totals["tokens_computed"] / n, 1),
        "computed_over_minimum": round(totals["tokens_computed"] / totals["tokens_minimum"], 4)
        if totals["tokens_minimum"] else None,
        "padding_share": round(totals["padding_tokens"] / totals["tokens_computed"], 4)
        if totals["tokens_computed"] else None,
    }
