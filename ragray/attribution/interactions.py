"""An attribution that sees passages which substitute for, or complement, each other.

Drop-one (leave one passage out) is blind where the evidence sits in two passages: removing one
copy of the answer changes nothing while the other is there. Keeping one passage alone sees it:
each copy, alone, raises the answer's log-probability far above the closed-book answer. This
module fits a model of ``v(S) = log p(answer | S)`` over the scored subsets ``S`` of a question's
passages, with main effects and pairwise interactions:

    v(S) ≈ b + Σ_{i∈S} β_i + Σ_{(i,j)∈P, i,j∈S} γ_ij

- the design (:mod:`ragray.attribution.design`): the full context, the empty context, each passage
  left out, each passage kept alone, and optional random subsets (complementary pairs) up to
  ``influence.budget`` calls;
- ``P``: the pairs among the ``pairs_among`` strongest passages (by the larger of their keep-alone
  gain ``a_i = v({i}) − v(∅)`` and drop-one loss ``d_i = v(all) − v(all − i)``) of those whose
  strength clears the noise bar below;
- solved by ridge regression: main effects lightly shrunk (the singletons pin them), interactions
  shrunk harder (``shrinkage``), the intercept free.

Per passage, the **credit** is read off two contexts: ``w · a_i + (1 − w) · d_i`` with ``w`` =
:data:`KEEP_ALONE_WEIGHT` (0.25), where ``a_i`` is what the passage adds to nothing and ``d_i`` what
it adds to everything else. Two copies of the evidence each get ``w`` of the answer's gain (``d`` ≈ 0,
``a`` = the gain): they share credit, which drop-one (``w`` = 0) cannot give. ``w`` = ½ is the
Shapley value of any pairwise game that agrees with the two contexts (the credit before); 0.25 ranks
held-out subsets better (chosen on the evidence benchmark's tune exports, ``benchmarks/lds_credit.py``).
The printed ``influence`` is each passage's share of the question's positive credit. The fit gives
the groups and a model of ``v`` that is not additive.

**Use, not jitter.** A small model's log-probability moves whenever any passage leaves the prompt.
The question's own jitter is read from the design: ``σ = 1.4826 × median |d_i|`` over its drop-one
losses (a small model's log-prob moves whenever any passage leaves the prompt; most passages do
nothing, and copies leave ~0 each, so the median loss is jitter). A passage is used when its credit clears ``max(min_effect, noise_z × σ, min_share × gain)`` and the answer depends on the
passages at all (``gain = v(all) − v(∅) ≥ influence.context_threshold``): the last term because a
small model's log-prob moves more where the passages move it a lot. **The leader:** on such an answer
some passage lifted it, so the one passage with the largest credit is also used when its credit clears
a bar of its own, ``max(min_effect, lead_z × σ, lead_share × gain)`` — it only has to stand out from
jitter, not pass a test every passage takes at once (where the passages lift the answer by 1–2 nats
spread over two, or the jitter is large, no passage clears ``noise_z × σ`` though the top one carried
the answer; shared-evidence version 4, ``benchmarks/protocol/shared_evidence_v4.json``). **The
needed** (off by default: ``drop_z`` None): on such an answer a passage is also used when leaving it out costs at least
:data:`DROP_FRACTION` (0.75) of the largest leave-out loss and clears ``max(drop_floor, drop_z × σ)``:
drop-one's own rule, guarded by the question's jitter (where the passages lift the answer by under 2
nats, what each passage carries is under ``min_effect`` though well clear of jitter; shared-evidence
version 5, ``benchmarks/protocol/shared_evidence_v5.json``, withdrawn as the default after its read:
on the split fresh to both it found no gold version 4 missed and marked more off-topic passages,
``shared_evidence_decision.json``).
Passages that share evidence (both clear the bar alone and ``γ_ij ≤ −½ min(β_i, β_j)``) form a
group; it reads "either suffices" when no member is missed when left out (``d`` under the bar: the
others do its part), else "share evidence" (one carries what the other cannot); complements
(``γ_ij`` above the bar and above half of either main effect) are "needed together". Pairs cannot
carry evidence repeated in many passages (a corpus that states one fact in every paragraph: each
passage alone gives most of the answer, none is missed, and the pairwise fit spreads the
redundancy thin), so the design is also read directly: used passages that each **give most of the
answer alone** (``a ≥ max(bar, SUFFICES_SHARE × gain)``: two halves of different facts are not
merged) and are **not needed** (``d`` under the bar) are one group, however many, and either
suffices; used passages that are each **missed** when left out (``d`` over the bar) and each give
less than that alone are one group "needed together" (a bridge question's two paragraphs). The bar's settings and ``SUFFICES_SHARE`` were chosen on the tune split of
``benchmarks/bench_shared_evidence.py`` (the bar: version 4, ``benchmarks/protocol/shared_evidence_v4.json``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragray.attribution.base import MEASURES, Evidence, Fitted, Measure
from ragray.attribution.design import design_subsets
from ragray.attribution.subsets import Subset
from ragray.config import InfluenceConfig

__all__ = ["COMPLEMENTS", "DROP_FRACTION", "KEEP_ALONE_WEIGHT", "OVERLAPPING", "SUBSTITUTES", "SUFFICES_SHARE", "Design",
           "InteractionMeasure", "Interactions", "fit_at", "fit_design", "fit_interactions", "jitter", "read_design"]

#: how much of the context's gain passages must each give alone (with nothing lost without them)
#: to be read as one group of copies, however many
SUFFICES_SHARE = 0.75
#: a passage's credit is ``w · keep-alone gain + (1 − w) · left-out loss``: w 0.25 ranks held-out
#: subsets best among the candidates that let copies share credit (``benchmarks/lds_credit.py`` on
#: the evidence benchmark's tune exports: 0.782 against least squares on the design 0.773 and the
#: Shapley credit, w 0.5, 0.727)
KEEP_ALONE_WEIGHT = 0.25
#: the needed: a passage whose leave-out loss is at least this share of the question's largest (and
#: clears its jitter guard) is used whatever its credit — drop-one's relative rule, the rule before
#: version 1
DROP_FRACTION = 0.75
#: how the passages of a group relate: each alone gives the answer; they carry some of the same
#: evidence (each adds less beside the other) but not each enough alone; the answer needs them together
SUBSTITUTES = "either suffices"
OVERLAPPING = "share evidence"
COMPLEMENTS = "needed together"


@dataclass(frozen=True)
class Interactions:
    """One question's fitted interaction model and what it says about each passage (retrieval order).

    ``credit``: Shapley value of the fitted game (nats); ``influence``: the share of the positive
    credit, in [0, 1]; ``used``: credit clears the noise bar (all False when the answer does not
    depend on the passages); ``group``: an id shared by passages that substitute for or complement
    each other (None: alone); ``relation``: how the group's passages relate.
    """

    credit: tuple[float, ...]
    influence: tuple[float, ...]
    used: tuple[bool, ...]
    group: tuple[int | None, ...]
    relation: tuple[str | None, ...]
    keep_alone: tuple[float, ...]  # a_i: v({i}) − v(∅), NaN where not scored
    drop_one: tuple[float, ...]  # d_i: v(all) − v(all − i), NaN where not scored
    gain: float  # v(all) − v(∅)
    noise: float  # σ
    bar: float  # the credit a passage needs to count as used
    context_dependent: bool
    main: tuple[float, ...]  # β_i
    pairs: tuple[tuple[int, int, float], ...]  # (i, j, γ_ij) of the fitted interactions
    lead_bar: float = math.inf  # the credit the passage with the largest credit needs (inf: no leader rule)
    drop_bar: float = math.inf  # the leave-out loss that makes a passage used whatever its credit (inf: no such rule)

    @property
    def carried_by(self) -> tuple[int, ...]:
        """Where the answer depends on the passages but none clears the bar (diffuse): the fewest
        passages, by descending influence, whose influence sums to at least ½ — the passages that
        carry the answer together; empty otherwise."""
        if not self.context_dependent or any(self.used) or not any(v > 0 for v in self.influence):
            return ()
        order = sorted(range(len(self.influence)), key=lambda i: -self.influence[i])
        out: list[int] = []
        for i in order:
            out.append(i)
            if sum(self.influence[j] for j in out) >= 0.5:
                break
        return tuple(sorted(out))

    def predict(self, kept: Sequence[int]) -> float:
        """The model's v(S) up to its intercept (what the LDS check ranks)."""
        s = set(kept)
        return float(sum(self.main[i] for i in s) + sum(g for i, j, g in self.pairs if i in s and j in s))


def jitter(drop: Sequence[float]) -> float:
    """``1.4826 × median |d_i|`` over the drop-one losses but the largest (with two or three
    passages, the one used would be the median): the log-prob moves a small model makes whenever
    any passage leaves the prompt, symmetric around 0 for passages that do nothing; copies leave ~0
    each, so substitutes do not inflate it. (Chosen on the tune split over the credits' own median
    and MAD, the keep-alone and drop-one effects of the weaker half, and the drop-one losses of the
    weaker half.)"""
    d = sorted(abs(float(v)) for v in drop if not math.isnan(v))[:-1]
    if not d:
        return 0.0
    half = len(d) // 2  # the median as numpy takes it: the middle value, or the mean of the middle two
    return float(1.4826 * (d[half] if len(d) % 2 else (d[half - 1] + d[half]) / 2.0))


def _design_matrix(kept: Sequence[frozenset[int]], k: int, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """One row per context: an intercept, one column per passage (1 where kept) and one per pair
    (1 where both are kept)."""
    x = np.zeros((len(kept), 1 + k + len(pairs)))
    x[:, 0] = 1.0
    for row, s in enumerate(kept):
        for i in s:
            x[row, 1 + i] = 1.0
    for col, (i, j) in enumerate(pairs, start=1 + k):
        x[:, col] = x[:, 1 + i] * x[:, 1 + j]
    return x


@dataclass
class Design:
    """A question's scored contexts as the fit reads them, whatever its settings: one log-prob per
    context, each passage's keep-alone gain and drop-one loss, the jitter, the gain of the whole
    context. Read once (:func:`read_design`); fitted at any settings (:func:`fit_design`: a tune
    grid fits one question at hundreds), each least-squares solve kept per set of pairs."""

    k: int
    points: list[tuple[frozenset[int], float]]
    alone: list[float]
    drop: list[float]
    noise: float
    gain: float
    solved: dict[tuple[tuple[tuple[int, int], ...], float], np.ndarray] = field(default_factory=dict, repr=False)

    def weights(self, pairs: list[tuple[int, int]], shrinkage: float) -> np.ndarray:
        """The ridge-penalised least squares of the log-probs on the passages and ``pairs``."""
        key = (tuple(pairs), shrinkage)
        if key not in self.solved:
            x = _design_matrix([kept for kept, _ in self.points], self.k, pairs)
            y = np.array([lp for _, lp in self.points])
            penalty = np.diag([0.0] + [0.01] * self.k + [shrinkage] * len(pairs))
            self.solved[key] = np.linalg.lstsq(x.T @ x + penalty, x.T @ y, rcond=None)[0]
        return self.solved[key]


def read_design(k: int, scored: Sequence[tuple[frozenset[int], float]]) -> Design | None:
    """``scored`` (kept passage indices, log p of the answer; NaN skipped) as the fit reads it; None
    when the full or the empty context was not scored."""
    table: dict[frozenset[int], float] = {}
    for kept, lp in scored:  # one point per context: the arms and the design repeat some
        if not math.isnan(lp):
            table.setdefault(kept, lp)
    full, empty = frozenset(range(k)), frozenset()
    if full not in table or empty not in table:
        return None
    v_all, v_none = table[full], table[empty]
    nan = float("nan")
    alone = [table[frozenset({i})] - v_none if frozenset({i}) in table else nan for i in range(k)]
    drop = [v_all - table[full - {i}] if full - {i} in table else nan for i in range(k)]
    return Design(k, list(table.items()), alone, drop, jitter(drop), v_all - v_none)


def fit_interactions(k: int, scored: Sequence[tuple[frozenset[int], float]], **settings: Any) -> Interactions | None:
    """Fit the model above on ``scored`` (kept passage indices, log p of the answer; NaN skipped) at
    ``settings`` (:func:`fit_design`'s). None when the full or the empty context was not scored."""
    design = read_design(k, scored)
    return fit_design(design, **settings) if design is not None else None


def fit_design(design: Design, *, context_threshold: float, pairs_among: int = 4, shrinkage: float = 0.1,
               noise_z: float = 3.0, min_effect: float = 1.0, min_share: float | None = 0.1,
               lead_z: float | None = 2.0, lead_share: float = 0.25, drop_z: float | None = None,
               drop_floor: float = 0.25, keep_alone_weight: float = KEEP_ALONE_WEIGHT,
               needed_together: bool = True) -> Interactions:
    """The model above fitted on ``design`` at these settings. ``lead_z`` None: no leader (the rule
    of versions 1–3). ``drop_z`` None: no passage is used by its leave-out loss alone (the default: the rule of
    versions 1–4, back after version 5 was withdrawn). ``keep_alone_weight`` 0.5: the Shapley credit (the credit before);
    ``needed_together`` False: complements from pairs only (the rule before)."""
    k, alone, drop, noise, gain = design.k, design.alone, design.drop, design.noise, design.gain
    # the noise bar, and a floor that grows with what the context does for the answer: a small
    # model's log-prob moves more where the passages move it a lot
    bar = max(min_effect, noise_z * noise, (min_share or 0.0) * max(gain, 0.0))
    # interactions only among passages whose keep-alone gain or drop-one loss clears the bar: with
    # the design's k + 2 equations, pairs with inert passages would share out what two strong ones do
    strength = [max(x for x in (a, d, -math.inf) if not math.isnan(x)) for a, d in zip(alone, drop)]
    candidates = [i for i in sorted(range(k), key=lambda i: -strength[i]) if strength[i] >= bar]
    strongest = sorted(candidates[: max(0, pairs_among)])
    pairs = list(itertools.combinations(strongest, 2))
    w = design.weights(pairs, shrinkage)
    beta, gamma = w[1 : k + 1], w[k + 1 :]
    fitted = beta.copy()
    for (i, j), g in zip(pairs, gamma):
        fitted[i] += g / 2
        fitted[j] += g / 2
    # where both ends were scored, read off the two contexts (KEEP_ALONE_WEIGHT); else the fit's own
    # Shapley value
    credit = np.array([keep_alone_weight * a + (1 - keep_alone_weight) * d if not (math.isnan(a) or math.isnan(d))
                       else f for a, d, f in zip(alone, drop, fitted)])
    dependent = bool(gain >= context_threshold)
    used = [dependent and bool(c >= bar) for c in credit]
    lead_bar = math.inf if lead_z is None else max(min_effect, lead_z * noise, lead_share * max(gain, 0.0))
    if dependent and k and credit.max() >= lead_bar:
        used[int(np.argmax(credit))] = True
    losses = [d for d in drop if not math.isnan(d)]
    drop_bar = (math.inf if drop_z is None or not losses
                else max(drop_floor, drop_z * noise, DROP_FRACTION * max(losses)))
    used = [u or (dependent and not math.isnan(d) and d >= drop_bar) for u, d in zip(used, drop)]
    positive = np.clip(credit, 0.0, None)
    total = float(positive.sum())
    influence = [float(v / total) if total > 0 else 0.0 for v in positive]
    enough = max(bar, SUFFICES_SHARE * gain)  # what a passage must give alone to suffice
    redundant = _sufficient_not_needed(used, alone, drop, enough, bar)
    needed = _needed_not_sufficient(used, alone, drop, enough, bar, redundant) if needed_together else []
    group, relation = _groups(k, pairs, gamma, beta, used, alone, drop, bar, redundant, needed)
    return Interactions(
        credit=tuple(float(c) for c in credit), influence=tuple(influence), used=tuple(used), group=group,
        relation=relation, keep_alone=tuple(alone), drop_one=tuple(drop), gain=float(gain), noise=noise,
        bar=bar, context_dependent=dependent, main=tuple(float(b) for b in beta),
        pairs=tuple((i, j, float(g)) for (i, j), g in zip(pairs, gamma)), lead_bar=float(lead_bar),
        drop_bar=float(drop_bar))


def fit_at(config: InfluenceConfig, k: int, scored: Sequence[tuple[frozenset[int], float]]) -> Interactions | None:
    """:func:`fit_interactions` at an ``influence`` config's settings (what a run does)."""
    c = config
    return fit_interactions(k, scored, context_threshold=c.context_threshold, pairs_among=c.interaction_pairs,
                            shrinkage=c.interaction_shrinkage, noise_z=c.noise_z, min_effect=c.min_effect,
                            min_share=c.min_share, lead_z=c.lead_z, lead_share=c.lead_share, drop_z=c.drop_z,
                            drop_floor=c.drop_floor)


def _sufficient_not_needed(used: Sequence[bool], alone: Sequence[float], drop: Sequence[float], enough: float,
                           bar: float) -> list[int]:
    """Used passages that each give most of the answer alone (``enough``) and are not missed when
    left out (under the bar): read from the design's own contexts, substitutes of each other
    however many there are."""
    return [i for i, (u, a, d) in enumerate(zip(used, alone, drop))
            if u and not (math.isnan(a) or math.isnan(d)) and a >= enough and d < bar]


def _needed_not_sufficient(used: Sequence[bool], alone: Sequence[float], drop: Sequence[float], enough: float,
                           bar: float, redundant: Sequence[int]) -> list[int]:
    """Used passages that are each missed when left out (``d`` at or over the bar) and each give
    less than ``enough`` alone: where two or more are, each carries a part of the answer the others
    cannot — complements (a bridge question's two paragraphs), read from the design's own contexts.
    Empty where fewer than two."""
    out = [i for i, (u, a, d) in enumerate(zip(used, alone, drop))
           if u and i not in redundant and not (math.isnan(a) or math.isnan(d)) and d >= bar and a < enough]
    return out if len(out) > 1 else []


def _groups(k: int, pairs: Sequence[tuple[int, int]], gamma: np.ndarray, beta: np.ndarray, used: Sequence[bool],
            alone: Sequence[float], drop: Sequence[float], bar: float, redundant: Sequence[int] = (),
            needed: Sequence[int] = ()) -> tuple[tuple[int | None, ...], tuple[str | None, ...]]:
    """Union of used passages linked by what they share (both clear the bar alone, strongly
    negative γ; or ``redundant``: each gives most of the answer alone and none is missed) or,
    failing that, by what they need together (strongly positive γ); groups numbered 1.. by their
    best rank. A group that shares evidence reads "either suffices" only when no member is missed
    when left out (the others do its part), else "share evidence": one of them carries what the
    other cannot. Either way the group counts once in the alignment measures."""
    parent = list(range(k))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    links: list[tuple[int, int, str]] = []
    for (i, j), g in zip(pairs, gamma):
        if not (used[i] and used[j]):
            continue
        clears = all(not math.isnan(alone[n]) and alone[n] >= bar for n in (i, j))
        if clears and g <= -0.5 * min(beta[i], beta[j]):
            links.append((i, j, OVERLAPPING))
        elif g >= bar and g >= 0.5 * max(abs(beta[i]), abs(beta[j])):
            links.append((i, j, COMPLEMENTS))
    links += [(redundant[0], j, OVERLAPPING) for j in redundant[1:]]
    overlapping = {n for i, j, r in links if r == OVERLAPPING for n in (i, j)}
    links += [(needed[0], j, COMPLEMENTS) for j in needed[1:] if needed[0] not in overlapping and j not in overlapping]
    for i, j, _ in links:
        ri, rj = root(i), root(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    roots = [root(i) for i in range(k)]
    shared = {root(i) for i, _, relation in links if relation == OVERLAPPING}  # a group with any overlap
    sizes = {r: roots.count(r) for r in roots}
    number: dict[int, int] = {}
    group: list[int | None] = []
    relation_of: list[str | None] = []
    for i in range(k):
        r = roots[i]
        if sizes[r] < 2:
            group.append(None)
            relation_of.append(None)
            continue
        number.setdefault(r, len(number) + 1)
        group.append(number[r])
        if r not in shared:
            relation_of.append(COMPLEMENTS)
        elif all(not math.isnan(drop[m]) and drop[m] < bar for m in range(k) if roots[m] == r):
            relation_of.append(SUBSTITUTES)  # none is missed when left out: the others do its part
        else:
            relation_of.append(OVERLAPPING)
    return tuple(group), tuple(relation_of)


@MEASURES.register()
class InteractionMeasure(Measure):
    """The measure behind ``influence.mode: interactions`` (the default where the backend scores):
    the design's contexts scored, :func:`fit_interactions` on every scored context of the question."""

    name = "interactions"
    as_influence = True
    purpose = "design"
    own_contexts = True
    needs_closed_book = True
    influence_in_both_orders = False
    needs_drop_scores = True

    def subsets(self, n: int, question_id: str) -> list[Subset]:
        c = self.config
        return design_subsets(n, question_id, c.budget if c is not None else None, c.mask_seed if c is not None else 0)

    def fit(self, evidence: Evidence) -> Fitted | None:
        """The credit (Shapley value of the fitted game, nats) per passage, the fitted model's
        prediction and the model (its used marks and groups); None where the full or the empty
        context was not scored."""
        model = fit_at(self.config, evidence.n, evidence.points())
        if model is None:
            return None
        return Fitted(self.name, self.column, list(model.credit), predict=model.predict, model=model)

    def scores(self, evidence: Evidence) -> list[float]:
        fitted = self.fit(evidence)
        return fitted.scores if fitted is not None else [math.nan] * evidence.n

    def influence(self, fitted: Fitted | None, n: int) -> list[float]:
        """The credit's positive part as a share of the whole (the fitted model's ``influence``)."""
        return list(fitted.model.influence) if fitted is not None else [math.nan] * n

    def calls(self, n: int) -> int:
        return len(self.subsets(n, ""))
