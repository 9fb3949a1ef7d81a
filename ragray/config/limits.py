"""The caps on the numbers an HTTP client may set, and on the model calls of one request.

:data:`CAPS` is the one list: every number (or list of numbers, or list whose length is work) among
the settings a client may set (:data:`ragray.config_access.CLIENT_SETTINGS`) has a cap here, with
what it bounds. An operator changes a cap with ``serve.limits: {<key>: <cap>}`` (``retrieval.top_k``
with ``serve.max_top_k``, which ``top_k_docs`` of the one-question endpoints obeys too), and the cost
of a whole request with ``serve.max_calls_per_request``. :class:`Limits` checks a client's values
before any work starts (:class:`~ragray.config_access.ClientPolicy`, for ``POST /runs`` overrides,
``PUT /presets`` and the endpoints' fields); docs/serve.md's table is :func:`limits_table`.

A cap measures the ``value`` (a number), its ``entries`` (how many items a list holds) or ``each``
entry of a list of numbers. The operator's own values are never checked: a client may restate them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ragray.errors import LimitError

__all__ = ["CAPS", "Cap", "DOCS_BEGIN", "DOCS_END", "Limits", "TOP_K_KEY", "check_limit_keys", "limits_table"]

Measure = Literal["value", "entries", "each"]


@dataclass(frozen=True)
class Cap:
    """The cap on one client setting: the most its ``measure`` may be, and what that bounds.
    ``default`` None: the cap is the server setting ``setting`` (``retrieval.top_k``)."""

    key: str
    default: float | None
    bounds: str
    measure: Measure = "value"
    setting: str | None = None


#: the cap ``top_k_docs`` and ``retrieval.top_k`` share: ``serve.max_top_k``
TOP_K_KEY = "retrieval.top_k"
_SEED = 2**32 - 1
_SEED_WHY = "a seed, a 32-bit word as numpy takes it"

#: every number a client may set, capped; a new numeric client setting must be added here (a test
#: walks the config for them)
CAPS: tuple[Cap, ...] = (
    Cap("seed", _SEED, _SEED_WHY),
    Cap("data.limit", 1000, "questions of a run"),
    Cap("chunking.size", 1000, "words, sentences or tokens per chunk: the length of every prompt"),
    Cap("chunking.overlap", 999, "units shared by consecutive chunks, below chunking.size"),
    Cap(TOP_K_KEY, None, "passages per question: every prompt's length and each question's calls",
        setting="serve.max_top_k"),
    Cap("retrieval.min_score", 1e6, "a score floor; above every score no passage is kept"),
    Cap("retrieval.bm25.k1", 10, "BM25 term saturation, 1.2 to 2 in practice"),
    Cap("retrieval.bm25.b", 1, "BM25 length normalisation, a fraction"),
    Cap("retrieval.bm25.epsilon", 10, "the idf floor, a share of the mean idf"),
    Cap("retrieval.hybrid.dense_k", 1000, "dense first-stage hits fused per question"),
    Cap("retrieval.hybrid.sparse_k", 1000, "BM25 first-stage hits fused per question"),
    Cap("retrieval.hybrid.rrf_k", 10_000, "the reciprocal-rank-fusion constant"),
    Cap("retrieval.hybrid.alpha", 1, "the dense weight of alpha fusion, a fraction"),
    Cap("retrieval.expand.window", 20, "neighbouring chunks added on each side of a hit"),
    Cap("rerank.candidates", 200, "first-stage hits the reranker scores per question, one pass each"),
    Cap("generation.temperature", 2, "sampling temperature"),
    Cap("generation.max_tokens", 1024, "tokens generated per model call"),
    Cap("generation.seed", _SEED, _SEED_WHY),
    Cap("influence.budget", 512, "contexts scored per question by the interactions design"),
    Cap("influence.interaction_pairs", 32, "passages whose pairwise interactions are fitted"),
    Cap("influence.interaction_shrinkage", 100, "a ridge penalty"),
    Cap("influence.noise_z", 100, "a noise bar, in jitters"),
    Cap("influence.min_effect", 1000, "a floor, in nats"),
    Cap("influence.min_share", 1, "a floor, a share of the log-prob gain"),
    Cap("influence.lead_z", 100, "the leader's noise bar, in jitters"),
    Cap("influence.lead_share", 1, "the leader's floor, a share of the log-prob gain"),
    Cap("influence.drop_z", 100, "the leave-out rule's noise bar, in jitters"),
    Cap("influence.drop_floor", 1000, "the leave-out rule's floor, in nats"),
    Cap("influence.context_threshold", 1000, "a threshold, in nats"),
    Cap("influence.masks", 512, "random subsets scored per question for the surrogate"),
    Cap("influence.mask_seed", _SEED, _SEED_WHY),
    Cap("influence.surrogate_alpha", 100, "a Lasso penalty"),
    Cap("influence.check_subsets", 512, "held-out subsets scored per question for the LDS check"),
    Cap("influence.check_top_k", 100, "each k of the top-k drop check; a k of all the passages is skipped", "each"),
    Cap("influence.check_seed", _SEED, _SEED_WHY),
    Cap("influence.divergence_threshold", 1, "a correlation"),
    Cap("influence.epsilon", 1, "an influence"),
    Cap("influence.used_threshold", 100, "the used rule's bar: a fraction, an influence or MADs"),
    Cap("influence.dominance_threshold", 1, "a share"),
    Cap("influence.buried_fraction", 1, "a share of k"),
    Cap("influence.misalignment_threshold", 1, "an nDCG"),
    Cap("influence.rbo_p", 1, "a persistence"),
    Cap("influence.position_seed", _SEED, _SEED_WHY),
    Cap("influence.position_threshold", 1, "a share"),
    Cap("faithfulness.hierarchical_top", 10, "passages, and sentences, refined at the next level"),
    Cap("faithfulness.k_values", 10, "K labels: each adds deletion arms and random draws per question", "entries"),
    Cap("faithfulness.random_repeats", 200, "DEL_RANDOM draws per K and question, a model call each"),
    Cap("faithfulness.threshold_t", 1, "a similarity"),
    Cap("faithfulness.buckets.most", 1, "a share of the units"),
    Cap("faithfulness.buckets.least", 1, "a share of the units"),
    Cap("faithfulness.decision.alpha", 1, "a significance level"),
    Cap("faithfulness.decision.min_effect", 1, "a similarity difference"),
    Cap("faithfulness.decision.redundancy_sim", 1, "a similarity"),
    Cap("faithfulness.decision.confidence", 1, "a confidence level"),
    Cap("faithfulness.max_units", 256, "units explained per question, a leave-one-out call each"),
    Cap("audit.k", 100, "documents audited per question"),
    Cap("audit.fetch", 1000, "passages retrieved per question to collect them"),
    Cap("audit.pass_score", 100, "the audit's pass mark; scores run 0 to 100"),
    Cap("metrics.tau_recall", 1, "a cosine"),
    Cap("metrics.tau_h", 1, "a cosine"),
)

#: the model calls one request may cost at most, unless ``serve.max_calls_per_request`` says otherwise
DEFAULT_MAX_CALLS = 50_000

_BY_KEY: dict[str, Cap] = {c.key: c for c in CAPS}


def check_limit_keys(limits: Mapping[str, float]) -> dict[str, float]:
    """``serve.limits`` validated: every key capped in :data:`CAPS`, no cap below 0."""
    unknown = sorted(k for k in limits if k not in _BY_KEY)
    if unknown:
        raise ValueError(f"serve.limits: no cap named {', '.join(unknown)}; valid: {', '.join(sorted(_BY_KEY))}")
    for key, cap in limits.items():
        if _BY_KEY[key].setting is not None:
            raise ValueError(f"serve.limits: {key} is capped by {_BY_KEY[key].setting}; set that")
        if cap < 0:
            raise ValueError(f"serve.limits: {key} must be >= 0, got {cap}")
    return dict(limits)


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else f"{number:g}"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _measured(cap: Cap, value: Any) -> tuple[float, str] | None:
    """What ``cap`` measures of ``value`` and how the message names it (None: nothing to measure)."""
    if cap.measure == "value":
        return (value, f"{cap.key}={value!r}") if _number(value) else None
    if not isinstance(value, (list, tuple)):
        return None
    if cap.measure == "entries":
        return len(value), f"{cap.key} with {len(value)} entries"
    numbers = [v for v in value if _number(v)]
    return (max(numbers), f"{cap.key} entry {max(numbers)!r}") if numbers else None


@dataclass(frozen=True)
class Limits:
    """The caps of one server (dotted key -> cap) and its ``max_calls`` per request."""

    caps: Mapping[str, float]
    max_calls: int = DEFAULT_MAX_CALLS

    @classmethod
    def for_serve(cls, serve: Any) -> Limits:
        """The limits of a server whose ``serve`` section is ``serve``."""
        caps = {c.key: c.default for c in CAPS if c.default is not None}
        return cls({**caps, TOP_K_KEY: serve.max_top_k, **serve.limits}, serve.max_calls_per_request)

    def check(self, values: Mapping[str, Any], where: str) -> None:
        """Raise :class:`LimitError` for the first of ``values`` (dotted key -> a client's value)
        over its cap; values that are not numbers (yet) are left to validation."""
        for key, value in values.items():
            cap = _BY_KEY.get(key)
            got = _measured(cap, value) if cap is not None else None
            if got is not None and got[0] > self.caps[key]:
                source = cap.setting or f"serve.limits.{key}"
                raise LimitError(f"{where}: {got[1]} is over this server's cap of {_fmt(self.caps[key])}: "
                                 f"{cap.bounds} ({source})")

    def check_calls(self, calls: int, what: str, where: str) -> None:
        """Raise :class:`LimitError` when ``calls`` (model calls, as ``what`` explains) exceed
        ``max_calls``."""
        if calls > self.max_calls:
            raise LimitError(f"{where}: {what} would make up to {_fmt(calls)} model calls; this server allows "
                             f"{_fmt(self.max_calls)} per request (serve.max_calls_per_request): ask for fewer "
                             "questions (data.limit), passages, units, K values or random repeats")


#: the markers of the table in docs/serve.md (written by scripts/serve_limits_table.py)
DOCS_BEGIN = "<!-- serve-limits:begin (written by: python scripts/serve_limits_table.py) -->"
DOCS_END = "<!-- serve-limits:end -->"


def limits_table(caps: Iterable[Cap] = CAPS) -> str:
    """The Markdown table of the caps and their defaults (docs/serve.md)."""
    rows = ["| client setting | default cap | of | bounds |", "|---|---|---|---|"]
    for c in caps:
        default = f"`{c.setting}` (100)" if c.setting else _fmt(c.default or 0)
        rows.append(f"| `{c.key}` | {default} | {c.measure} | {c.bounds} |")
    rows.append(f"| every request | {_fmt(DEFAULT_MAX_CALLS)} | model calls | `serve.max_calls_per_request` |")
    return "\n".join(rows)
