"""The figures of ``bench_contextcite.py``'s results derived from its per-question rows: each row's
speedups and attribution agreements (from the row's own seconds and attribution lists) and the
summary over rows. No model, no ContextCite: ``benchmarks/verify.py`` reruns these on the committed
``contextcite*.json``. ``summarize_v1``/``rederive_v1``: the first version's rows (one ContextCite
and one ragray dtype, ``contextcite_s``/``ragray_s``), as ``contextcite_cc_batch8.json`` keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import spearmanr


def agreement(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Spearman rank correlation and top-1 agreement of two attribution vectors."""
    rho = spearmanr(a, b).statistic
    return {"spearman": None if np.isnan(rho) else float(rho), "top1_agree": int(np.argmax(a) == np.argmax(b))}


def _mean(vals: list[Any]) -> float | None:
    vals = [v for v in vals if v is not None]
    return float(np.mean(vals)) if vals else None


def summarize(rows: list[dict[str, Any]], reference: str) -> dict[str, Any]:
    """Totals and mean agreements over questions, per side and dtype; ``speedup`` is ragray's
    fastest dtype against ContextCite as shipped (``reference``: its default float32)."""
    cc = {d: sum(r["contextcite"][d]["seconds"] for r in rows) / len(rows) for d in rows[0]["contextcite"]}
    rg: dict[str, Any] = {}
    for d in rows[0]["ragray"]:
        per_q = sum(r["ragray"][d]["seconds"] for r in rows) / len(rows)
        rg[d] = {
            "s_per_question": per_q,
            "speedup": {c: cc[c] / per_q for c in cc},
            "target_max_abs_diff": max(r["ragray"][d]["target_max_abs_diff"] for r in rows),
            "same_solver_spearman_mean": _mean([r["ragray"][d]["same_solver"]["spearman"] for r in rows]),
            "same_solver_top1_agreement": _mean([r["ragray"][d]["same_solver"]["top1_agree"] for r in rows]),
            "surrogate_spearman_mean": _mean([r["ragray"][d]["surrogate"]["spearman"] for r in rows]),
            "surrogate_top1_agreement": _mean([r["ragray"][d]["surrogate"]["top1_agree"] for r in rows]),
        }
    best = min(rg, key=lambda d: rg[d]["s_per_question"])
    return {
        "questions": len(rows),
        "contextcite_s_per_question": cc,
        "ragray": rg,
        "all_prompt_ids_identical": all(r["identical_prompt_ids"] for r in rows),
        "all_response_ids_identical": all(r["identical_response_ids"] for r in rows),
        "fastest_ragray_dtype": best,
        "contextcite_reference_dtype": reference,
        "speedup": rg[best]["speedup"][reference],
        "same_solver_spearman_mean": rg[best]["same_solver_spearman_mean"],
        "same_solver_top1_agreement": rg[best]["same_solver_top1_agreement"],
    }


def rederive(row: dict[str, Any]) -> dict[str, Any]:
    """A row with its derived figures recomputed from its seconds and attribution lists (the first
    ContextCite dtype's attributions are the reference)."""
    cc_ref = next(iter(row["contextcite"].values()))["attributions"]
    ragray = {d: {**g, "speedup": {c: cc["seconds"] / g["seconds"] for c, cc in row["contextcite"].items()},
                  "same_solver": agreement(cc_ref, g["same_solver_attributions"]),
                  "surrogate": agreement(cc_ref, g["surrogate_attributions"])}
              for d, g in row["ragray"].items()}
    return {**row, "ragray": ragray}


def summarize_v1(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The first version's summary: means over questions (Spearman where it is defined)."""
    cc_total, rg_total = sum(r["contextcite_s"] for r in rows), sum(r["ragray_s"] for r in rows)
    return {
        "questions": len(rows),
        "contextcite_s_per_question": cc_total / len(rows),
        "ragray_s_per_question": rg_total / len(rows),
        "speedup": cc_total / rg_total,
        "all_prompt_ids_identical": all(r["identical_prompt_ids"] for r in rows),
        "all_response_ids_identical": all(r["identical_response_ids"] for r in rows),
        "target_max_abs_diff": max(r["target_max_abs_diff"] for r in rows),
        "same_solver_spearman_mean": _mean([r["same_solver"]["spearman"] for r in rows]),
        "same_solver_top1_agreement": _mean([r["same_solver"]["top1_agree"] for r in rows]),
        "surrogate_spearman_mean": _mean([r["surrogate"]["spearman"] for r in rows]),
        "surrogate_top1_agreement": _mean([r["surrogate"]["top1_agree"] for r in rows]),
    }


def rederive_v1(row: dict[str, Any]) -> dict[str, Any]:
    """A first-version row with its speedup and agreements recomputed from its seconds and lists."""
    ref = row["contextcite_attributions"]
    return {**row, "speedup": row["contextcite_s"] / row["ragray_s"],
            "same_solver": agreement(ref, row["ragray_same_solver_attributions"]),
            "surrogate": agreement(ref, row["ragray_surrogate_attributions"])}
