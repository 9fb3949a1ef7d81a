"""What is measured: influence, faithfulness, the retrieval audit and the answer metrics."""

from __future__ import annotations

import re


from typing import Annotated, Literal


from pydantic import AfterValidator, Field, model_validator

from ragray.catalog import check_name
from ragray.config.renamed import reading_old_names


from ragray.config.base import InfluenceMode, PositionControl, UsedRule, Level, FaithfulnessMode, Explainer, _registered, Section


class InfluenceConfig(Section):
    """Drop-one influence analysis (``influence``): how influence is measured, flag thresholds."""

    mode: Annotated[InfluenceMode, reading_old_names("influence.mode")] = Field(
        "auto",
        description="interactions: each passage's share of the positive credit, 0.25 x what it adds kept alone "
        "+ 0.75 x what the answer loses without it, from the full and empty contexts, each passage left out and "
        "each kept alone (copies of the evidence share the credit; used when it clears the question's noise); "
        "logprob_share: influence = 1 - exp(min(0, log p(baseline | without i) - log p(baseline | all))); "
        "loo: influence = 1 - sim(baseline, regenerated answer); jsd: mean Jensen-Shannon divergence "
        "(/ ln 2) of the next-token distributions over the scored answer without vs with the passage "
        "(ARC-JSD); surrogate: 1 - exp(-max(0, w)) of a sparse linear fit of log p(answer) on random "
        "passage subsets (ContextCite); auto: interactions where the backend can score log-probabilities, "
        "loo where it cannot (recorded per question and in the summary); docs/trust.md has the "
        "measurements behind the choice",
    )
    budget: int | None = Field(
        None, ge=2, le=512,
        description="interactions: model calls per question for the design (null: 2(k + 1), the full and empty "
        "contexts, each passage left out and each kept alone; more adds random subsets in complementary pairs, "
        "at most 512 and at most the 2^k subsets there are)",
    )
    interaction_pairs: int = Field(
        4, ge=0, description="interactions: pairwise interactions are fitted among at most this many of the "
        "strongest passages (those whose keep-alone gain or drop-one loss clears the noise bar)",
    )
    interaction_shrinkage: float = Field(
        0.1, ge=0, description="interactions: ridge penalty on the pairwise terms (main effects: 0.01)")
    noise_z: float = Field(
        3.0, ge=0, description="interactions: a passage is used when its credit is at least this many times the "
        "question's jitter (1.4826 x the median |drop-one loss| of its passages) ...",
    )
    min_effect: float = Field(
        1.0, ge=0, description="interactions: ... and at least this many nats ...",
    )
    min_share: float | None = Field(
        0.1, ge=0, le=1, description="interactions: ... and at least this share of the answer's log-prob gain over "
        "the closed book (null: no such floor); the three were chosen on the tune split of the shared-evidence "
        "benchmark (benchmarks/protocol/shared_evidence_v4.json)",
    )
    lead_z: float | None = Field(
        2.0, ge=0, description="interactions: on a context-dependent answer, the passage with the largest credit "
        "is also used when its credit is at least this many jitters, min_effect nats and lead_share x the gain "
        "(the leader: some passage lifted the answer, and the top one only has to stand out from jitter; null: "
        "no leader); chosen on the tune split of the shared-evidence benchmark "
        "(benchmarks/protocol/shared_evidence_v4.json)",
    )
    lead_share: float = Field(
        0.25, ge=0, le=1, description="interactions: the leader's floor, a share of the answer's log-prob gain "
        "over the closed book",
    )
    drop_z: float | None = Field(
        None, ge=0, description="interactions: on a context-dependent answer, a passage is also used when leaving it "
        "out costs at least 0.75 x the question's largest leave-out loss, this many jitters and drop_floor nats "
        "(drop-one's rule guarded by the jitter; null, the default: no such rule); version 5 of the "
        "shared-evidence benchmark chose 3 on its tune split (with min_share 0.05) and was withdrawn after its "
        "read (benchmarks/protocol/shared_evidence_decision.json)",
    )
    drop_floor: float = Field(
        0.25, ge=0, description="interactions: the least leave-out loss, in nats, that makes a passage used by "
        "drop_z's rule",
    )
    answer_span: Literal["full", "first_sentence", "first_line", "first_clause", "through_gold"] = Field(
        "through_gold",
        description="the part of the baseline answer that is scored (log-prob, jsd, surrogate): through_gold "
        "(up to the end of the first gold answer it contains, else all of it) | full | first_sentence | "
        "first_line | first_clause (recorded per question as scored_answer)",
    )
    closed_book: bool = Field(
        True, description="score the answer with no passages too (log-prob modes): logprob_none and "
        "context_dependent per question (one more scoring pass)"
    )
    context_threshold: float = Field(
        1.0, ge=0,
        description="context_dependent when log p(answer | all) - log p(answer | none) >= this (nats)",
    )
    masks: int = Field(
        0, ge=0, le=512, description="random passage subsets scored for the surrogate (0: 32 in surrogate mode, "
        "none otherwise; at most 512); each passage kept with probability 1/2"
    )
    mask_seed: int = Field(0, description="seed of the surrogate's subsets (with the question id)")
    shuffle_masks: bool = Field(True, description="show each surrogate subset's passages in a shuffled order")
    surrogate_alpha: float = Field(0.01, ge=0, description="L1 weight of the surrogate's Lasso fit")
    surrogate_fit: Literal["masks", "masks_and_arms"] = Field(
        "masks_and_arms",
        description="what the surrogate is fitted on: masks (its random subsets only) | masks_and_arms "
        "(also the full context and the drop-one arms, which every log-prob run scores anyway, less "
        "any the LDS check holds out; no extra pass; why: docs/trust.md)",
    )
    check_subsets: int = Field(
        0, ge=0, le=512, description="held-out random subsets scored to measure each measure's LDS (linear "
        "datamodeling score; >= 32 recommended, at most 512, 0: off)"
    )
    check_top_k: tuple[int, ...] = Field(
        (), description="k values of the top-k drop check: remove each measure's k most influential "
        "passages and record the answer's log-prob drop (e.g. [1, 2, 3]; empty: off)"
    )
    check_seed: int = Field(1, description="seed of the held-out subsets and the random control")
    edit_test: bool = Field(
        False, description="the validity panel's known-truth check, the answer follows the edit: after each "
        "question with gold answers, replace the gold answer in each passage holding it (alone, and in all "
        "of them where two or more do) by a same-kind substitute drawn from the data set's gold answers and "
        "regenerate; the passages table's edit_moved says whether the answer moved with the edit. Costs one "
        "generation per passage holding the answer, plus the unedited prompt and the every-copy case, in one "
        "batched call per question; off by default for that cost (docs/trust.md)",
    )

    similarity: Annotated[str, _registered("similarity")] = Field(
        "rouge_l", description="rouge_l | exact_match | token_jaccard | edit"
    )
    divergence_threshold: float = Field(0.7, ge=-1, le=1, description="Divergent when rho < this")
    epsilon: float = Field(
        0.01, ge=0, le=1, description="influence at or below this counts as unused (top-1 ignored)"
    )
    used_rule: UsedRule = Field(
        "relative",
        description="which passages the answer used (the passages table's used column), besides influence "
        "> epsilon: absolute (influence > used_threshold) | relative (influence >= used_threshold x the "
        "question's largest) | outlier (influence > median + used_threshold x MAD of the question's); "
        "how the default was chosen: docs/trust.md",
    )
    used_threshold: float = Field(
        0.75, ge=0, description="the used rule's bar: absolute: the influence; relative: the fraction of "
        "the largest (<= 1); outlier: the number of MADs above the median"
    )
    dominance_threshold: float = Field(
        0.5, gt=0, le=1, description="single-passage dominance when dominance >= this"
    )
    buried_fraction: float = Field(
        0.5, gt=0, lt=1,
        description="buried evidence when the most influential passage's retrieval rank > this x k",
    )
    misalignment_threshold: float = Field(
        0.8, gt=0, le=1,
        description="misaligned when usage_ndcg < this (a lone used passage at retrieval rank r scores "
        "1/log2(r + 1): 0.63 at rank 2)",
    )
    rbo_p: float = Field(0.9, gt=0, lt=1, description="persistence p of rbo_alignment")
    position_control: PositionControl = Field(
        "none",
        description="none | reversed | shuffled: also run drop-one with the passages in this order "
        "(separates the passage's content from its slot in the prompt)",
    )
    position_seed: int = Field(0, description="seed of the shuffled order (with the question id)")
    position_threshold: float = Field(
        0.5, ge=0, le=1,
        description="position_driven when position_sensitivity >= this and influence follows the slot "
        "more closely than the passage",
    )

    @model_validator(mode="after")
    def _checks(self) -> InfluenceConfig:
        bad = [k for k in self.check_top_k if k < 1]
        if bad:
            raise ValueError(f"influence.check_top_k: every k must be >= 1, got {list(self.check_top_k)}")
        if len(set(self.check_top_k)) != len(self.check_top_k):
            raise ValueError(f"influence.check_top_k: duplicate entries in {list(self.check_top_k)}")
        if self.used_rule == "relative" and self.used_threshold > 1:
            raise ValueError(f"influence.used_threshold must be <= 1 with used_rule relative (a fraction of the "
                             f"largest influence), got {self.used_threshold}")
        if 0 < self.masks < 4:
            raise ValueError(f"influence.masks must be 0 or >= 4 (a linear fit needs subsets), got {self.masks}")
        if 0 < self.check_subsets < 4:
            raise ValueError(f"influence.check_subsets must be 0 or >= 4 (LDS is a rank correlation), "
                             f"got {self.check_subsets}")
        return self

    @property
    def surrogate_masks(self) -> int:
        """Random subsets the surrogate is fitted on: ``masks``, or 32 in surrogate mode."""
        return self.masks or (32 if self.mode == "surrogate" else 0)



_K_VALUE = re.compile(r"^(top-(\d+)(%)?|cumulative)$")


def _k_values(values: tuple[str, ...]) -> tuple[str, ...]:
    for v in values:
        m = _K_VALUE.match(v)
        if m is None:
            raise ValueError(f"k_values: '{v}' is not top-N, top-P% or cumulative")
        if m.group(2) is not None and (int(m.group(2)) < 1 or (m.group(3) and int(m.group(2)) > 100)):
            raise ValueError(f"k_values: '{v}' must be top-1 or more (a percentage at most 100%)")
    if len(set(values)) != len(values):
        raise ValueError(f"k_values: duplicate entries in {list(values)}")
    return values


class BucketsConfig(Section):
    """Importance buckets: the top ``most`` and bottom ``least`` fractions of the ranked units."""

    most: float = Field(0.2, gt=0, lt=1)
    least: float = Field(0.2, gt=0, lt=1)

    @model_validator(mode="after")
    def _fit(self) -> BucketsConfig:
        if self.most + self.least > 1:
            raise ValueError(f"most + least must be <= 1, got {self.most} + {self.least}")
        return self


class DecisionConfig(Section):
    """How "much lower than random" and "about random" are decided (see ragray.faithfulness.cases)."""

    alpha: float = Field(0.05, gt=0, lt=1, description="one-sided significance level vs the random arm")
    min_effect: float = Field(
        0.05, ge=0, le=1, description="minimum |sim_arm - mean sim_random| to count as a difference"
    )
    redundancy_sim: float = Field(
        0.9, gt=0, le=1, description="Case C: sim_most still at or above this (redundant evidence)"
    )
    confidence: float = Field(0.95, gt=0, lt=1, description="confidence of the random-arm mean's CI")


class ControlsConfig(Section):
    closed_book: bool = Field(True, description="answer with no passages: is the answer parametric?")
    question_removal: bool = Field(True, description="DEL_Q: the passages without the question")
    positions: tuple[Literal["start", "middle", "end"], ...] = Field(
        ("middle", "end"), description="move the most influential passage here (lost in the middle)"
    )


class FaithfulnessConfig(Section):
    """Explanation faithfulness experiments (``faithfulness``, ``ragray interpret``)."""

    level: Level = "passage"
    mode: FaithfulnessMode = Field(
        "generate",
        description="generate: regenerate and compare answers; logprob: score the baseline answer "
        "under each ablated context (one forward pass, no generation)",
    )
    hierarchical: bool = Field(
        False, description="explain passages first, then only the units inside the top passages"
    )
    hierarchical_top: int = Field(
        2, ge=1, description="passages (and, for tokens, sentences) refined at the next level"
    )
    explainer: Annotated[Explainer, reading_old_names("faithfulness.explainer")] = Field(
        "loo", description="ranks units for DEL_MOST / DEL_LEAST"
    )
    attributions: Annotated[tuple[Explainer, ...], reading_old_names("faithfulness.attributions")] = Field(
        ("loo", "logprob_drop", "surrogate"), description="also computed, for the agreement report"
    )
    k_values: Annotated[tuple[str, ...], AfterValidator(_k_values)] = (
        "top-1", "top-3", "top-20%", "cumulative"
    )
    random_repeats: int = Field(50, ge=2, description="R: DEL_RANDOM draws per K")
    similarity: Annotated[str, _registered("similarity")] = Field(
        "semantic", description="primary answer similarity (decides unchanged and the cases)"
    )
    measures: tuple[str, ...] = Field(
        ("semantic", "exact_match", "token_jaccard", "edit", "bleu", "rouge_l"),
        description="answer comparisons reported for every arm",
    )
    threshold_t: float = Field(0.85, ge=0, le=1, description="unchanged iff similarity >= T")
    buckets: BucketsConfig = Field(default_factory=BucketsConfig)
    decision: DecisionConfig = Field(default_factory=DecisionConfig)
    controls: ControlsConfig = Field(default_factory=ControlsConfig)
    max_units: int = Field(
        256, ge=1, description="a question with more units is recorded as an error (use hierarchical)"
    )

    @model_validator(mode="after")
    def _check(self) -> FaithfulnessConfig:
        for name in self.measures:
            check_name("similarity", name, "faithfulness.measures")
        if self.explainer not in self.attributions:
            raise ValueError(
                f"explainer '{self.explainer}' must also be listed in attributions {list(self.attributions)}"
            )
        return self


class AuditConfig(Section):
    """Retrieval integrity audit (``ragray audit``)."""

    k: int = Field(3, ge=1, description="top-k documents audited per query")
    fetch: int = Field(
        30, ge=1, description="passages retrieved to collect k documents (chunks collapse to documents)"
    )
    pass_score: int = Field(60, description="PASS iff score >= this")
    llm: bool = Field(
        False, description="aspect extraction and a plain-language explanation via the configured generator "
        "(never changes the score)",
    )


class PriceConfig(Section):
    """USD per 1000 tokens of one model (``metrics.prices.<model>``)."""

    prompt_per_1k: float = Field(ge=0)
    completion_per_1k: float = Field(ge=0)


class MetricsConfig(Section):
    """Answer-quality metrics (``ragray score``, ``ragray run`` summaries)."""

    embedding: bool | Literal["auto"] = Field(
        "auto", description="embedding metrics (recall@k by cosine, grounding, hallucination); auto: on where "
        "sentence-transformers is installed (ragray[dense]), off without it (true then says what to install)",
    )
    encoder: str = Field("minilm", description="sentence encoder: 'minilm' (packaged), a path or a hub id")
    tau_recall: float = Field(0.75, ge=-1, le=1, description="recall@k: max cos(context, gold) >= this")
    tau_h: float = Field(0.5, ge=-1, le=1, description="hallucination: Sim(A,G) and Sim(A,C) both below this")
    diversity: bool = Field(False, description="ragray retrieve: 1 - mean pairwise cosine of each question's hits")
    chunking: bool = Field(False, description="ragray retrieve: token lengths, cohesion vs separation, coverage")
    chunking_sample: int = Field(300, ge=1, description="chunks embedded for cohesion/separation")
    prices: dict[str, PriceConfig] = Field(
        default_factory=dict, description="model name -> price; cost is reported for priced models"
    )

    @property
    def embedding_on(self) -> bool:
        """Whether the embedding metrics run: ``auto`` asks whether their package is installed
        (a lookup, nothing imported), so ``ragray[generate]`` alone runs without them."""
        if self.embedding == "auto":
            import importlib.util

            try:
                return importlib.util.find_spec("sentence_transformers") is not None
            except (ImportError, ValueError):  # a broken or hidden install counts as none
                return False
        return bool(self.embedding)


