"""The ``placement`` block of a summary: where each model holder ran (a Ray Data actor, a Tune trial,
a Serve replica), one row per holder, and the lines the console prints for it. Pure data shaping
over the ``worker`` entries records carry (:mod:`ragray.adapters.execution.placement` makes them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["idle_gpus", "placement_lines", "summarize_placements"]


def idle_gpus(entry: Mapping[str, Any]) -> bool:
    """A placement entry (:meth:`Placement.as_dict`, as saved) of a holder that loads a model on a
    node with GPUs and was given none."""
    return bool(entry.get("holds_model", True) and float(entry.get("node_gpus") or 0) > 0 and not entry.get("gpu_ids"))


def summarize_placements(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per holder (node id + pid) from the ``worker`` entries of many records, with how
    many records each made (``questions``), in order of first appearance."""
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for e in entries:
        key = (str(e.get("node_id")), int(e.get("pid") or 0))
        if key not in rows:
            rows[key] = {**dict(e), "questions": 0}
        rows[key]["questions"] += 1
    return list(rows.values())


def placement_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the console prints: one line per holder, then a warning per holder with idle GPUs."""
    lines = []
    for r in rows:
        gpus = ",".join(r.get("gpu_ids") or []) or "none"
        device = f", device {r['device']}" if r.get("device") else ""
        count = f", {r['questions']} questions" if "questions" in r else ""
        lines.append(f"  {r.get('role', 'worker')} pid {r.get('pid')} on {r.get('node_ip') or '?'} "
                     f"({str(r.get('node_id'))[:8]}): GPU {gpus}{device}{count}")
    for r in rows:
        if idle_gpus(r):
            lines.append(f"  warning: {r.get('role', 'worker')} pid {r.get('pid')} ran with no GPU on a node "
                         f"with {float(r['node_gpus']):g} GPU(s)")
    return lines
