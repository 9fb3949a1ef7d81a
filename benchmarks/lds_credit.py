"""Held-out LDS of per-passage credits on the evidence benchmark's exports (no model run).

For every question whose design contexts (full, empty, each passage left out, each kept alone)
were all scored there (as random or held-out subsets), each candidate per-passage score is read
additively (Σ over a subset's kept passages) and ranked against the actual log-prob on the
question's held-out subsets that are not design contexts and not masks a fit used: the mean of
per-question Spearman (LDS). Candidates:

- ``credit_w<w>``: ``w · keep-alone gain + (1 − w) · left-out loss`` (``w`` 0.5: the Shapley
  credit of a pairwise game; ``w`` 0: drop-one);
- ``ols_design``: least squares of v on the design's 2(k + 1) contexts (intercept free);
- ``*_printed``: the same as the influence ragray prints (positive credit over the question's
  total positive credit: negative credit reads 0);
- ``lasso_<m>``: a ContextCite-style Lasso on the first ``m`` random masks (k + 1, 2(k + 1), all
  24 committed; α 0.01);
- the interaction model's own prediction (not additive).

``per_question`` returns the per-question values, so every figure is recomputable from the exports.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

REPO = Path(__file__).resolve().parents[1]
EXPORTS = REPO / "benchmarks" / "results" / "evidence"
TUNE = ("tune/short_full", "tune/numbered_full", "tune/numbered_first_sentence")
TEST = ("test/frozen",)
WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)


def _spearman(pred: Sequence[float], act: Sequence[float]) -> float | None:
    from scipy.stats import spearmanr

    if np.ptp(act) == 0:
        return None
    return 0.0 if np.ptp(pred) < 1e-12 else float(spearmanr(pred, act).statistic)


def ols_design(k: int, points: Sequence[tuple[frozenset[int], float]]) -> list[float]:
    """Additive least squares on ``points`` (intercept free): per-passage weights."""
    x = np.array([[1.0, *(1.0 if i in s else 0.0 for i in range(k))] for s, _ in points])
    return [float(v) for v in np.linalg.lstsq(x, np.array([v for _, v in points]), rcond=None)[0][1:]]


def printed(scores: Sequence[float]) -> list[float]:
    """What ragray prints as ``influence`` from a credit: its positive share."""
    pos = [max(0.0, s) for s in scores]
    total = sum(pos)
    return [p / total if total > 0 else 0.0 for p in pos]


def questions(parts: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    for part in parts:
        for path in sorted((EXPORTS / part).glob("*.jsonl")):
            if path.stem == "sessions":
                continue
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    yield f"{part}/{path.stem}", json.loads(line)


class Scored(NamedTuple):
    """What :func:`per_question` reads of one exported question: ``k`` passages (indices in retrieval
    order), every scored context's log-prob (``table``: full, drop-one arms, every subset row), the
    design's contexts, the committed random masks (``surrogate`` rows, in export order), the first
    2(k + 1) of them not in the design (``extra``), and the held-out subsets the LDS is taken on
    (``ev``: held-out rows neither in the design nor in ``extra``) with their log-probs."""

    k: int
    table: dict[frozenset[int], float]
    design: list[frozenset[int]]
    masks: list[tuple[frozenset[int], float]]
    extra: list[frozenset[int]]
    ev: list[tuple[frozenset[int], float]]


def scored(rec: dict[str, Any]) -> Scored | None:
    """The question's scored contexts and held-out evaluation subsets; None where its design was not
    all scored or it has too few held-out subsets or masks (the rule of ``lds_on_exports`` before)."""
    q = rec["question"]
    ps = sorted(rec["passages"], key=lambda p: p["retrieval_rank"])
    ids = [p["passage_id"] for p in ps]
    k = len(ids)
    if q.get("logprob_all") is None or k < 3:
        return None
    full = frozenset(range(k))
    table = {full: q["logprob_all"], **{full - {i}: q["logprob_all"] - p["logprob_drop"]
                                        for i, p in enumerate(ps) if p["logprob_drop"] is not None}}
    held, masks = [], []
    for s in rec["subsets"]:
        if s["logprob"] is None:
            continue
        kept = frozenset(ids.index(x) for x in s["kept_passage_ids"])
        (held if s["purpose"] == "heldout" else masks if s["purpose"] == "surrogate" else []).append((kept, s["logprob"]))
        table.setdefault(kept, s["logprob"])
    design = [full, frozenset(), *(full - {i} for i in range(k)), *(frozenset({i}) for i in range(k))]
    if any(d not in table for d in design):
        return None
    extra = list(dict.fromkeys(s for s, _ in masks if s not in design))[: 2 * (k + 1)]
    ev = [(s, lp) for s, lp in held if s not in design and s not in extra]
    if len(ev) < 8 or len(extra) < 2 * (k + 1):
        return None
    return Scored(k, table, design, masks, extra, ev)


def additive_lds(weights: Sequence[float], ev: Sequence[tuple[frozenset[int], float]]) -> float | None:
    """LDS of per-passage ``weights`` read additively on the held-out subsets ``ev``."""
    return _spearman([sum(weights[i] for i in s) for s, _ in ev], [lp for _, lp in ev])


def per_question(rec: dict[str, Any], bar: tuple[float, float, float | None] | None = None
                 ) -> dict[str, float | None] | None:
    """Every candidate's LDS on one exported question; None where :func:`scored` is None. ``bar``
    (noise_z, min_effect, min_share): the interaction model's used bar, which picks its pairs
    (default: ragray's)."""
    from ragray.attribution.interactions import fit_interactions
    from ragray.attribution.measures import lasso_weights

    got = scored(rec)
    if got is None:
        return None
    k, table, design, masks, ev = got.k, got.table, got.design, got.masks, got.ev
    full = frozenset(range(k))
    act = [lp for _, lp in ev]

    def lds(w: Sequence[float]) -> float | None:
        return additive_lds(w, ev)

    points = [(d, table[d]) for d in dict.fromkeys(design)]
    alone = [table[frozenset({i})] - table[frozenset()] for i in range(k)]
    drop = [table[full] - table[full - {i}] for i in range(k)]
    z, m, f = bar if bar is not None else (None, None, None)
    fit = fit_interactions(k, points, context_threshold=1.0,
                           **({} if bar is None else {"noise_z": z, "min_effect": m, "min_share": f}))
    ols = ols_design(k, points)
    row: dict[str, float | None] = {"interactions_model": _spearman([fit.predict(sorted(s)) for s, _ in ev], act)}
    for w in WEIGHTS:
        c = [w * a + (1 - w) * d for a, d in zip(alone, drop)]
        row[f"credit_w{w:g}"] = lds(c)
        row[f"credit_w{w:g}_printed"] = lds(printed(c))
    row["ols_design"] = lds(ols)
    row["ols_design_printed"] = lds(printed(ols))
    # ContextCite's Lasso on random masks alone, at equal and larger budgets (the committed 24 masks
    # are the surrogate's; held-out subsets are never fitted on)
    random_masks = [(s, lp) for s, lp in masks]
    for m, label in ((k + 1, "lasso_k1"), (2 * (k + 1), "lasso_2k2"), (len(random_masks), "lasso_24")):
        w = lasso_weights(k, random_masks[:m], 0.01)
        row[label] = None if any(math.isnan(v) for v in w) else lds(w)
    return row


def table(parts: Sequence[str], bar: tuple[float, float, float | None] | None = None
          ) -> dict[str, dict[str, float | None]]:
    """Per question (``<part>/<set>:<question id>``): every candidate's LDS."""
    out = {}
    for where, rec in questions(parts):
        row = per_question(rec, bar)
        if row is not None:
            out[f"{where}:{rec['question']['question_id']}"] = row
    return out


def summary(values: Sequence[float], seed: int = 0) -> dict[str, Any]:
    arr = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    boots = rng.choice(arr, (2000, len(arr))).mean(axis=1)
    return {"mean": float(arr.mean()), "ci95": [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))],
            "n": int(len(arr))}


def paired(rows: dict[str, dict[str, float | None]], a: str, b: str, seed: int = 0) -> dict[str, Any]:
    """Mean of ``a − b`` over questions where both are defined, with a bootstrap interval."""
    d = [r[a] - r[b] for r in rows.values() if r.get(a) is not None and r.get(b) is not None]
    return summary(d, seed)


if __name__ == "__main__":
    for parts in (TUNE,):
        rows = table(parts)
        names = sorted({n for r in rows.values() for n in r})
        print(parts, len(rows))
        for n in names:
            vals = [r[n] for r in rows.values() if r.get(n) is not None]
            s = summary(vals)
            print(f"  {n:28s} {s['mean']:.3f} [{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}] n={s['n']}")
