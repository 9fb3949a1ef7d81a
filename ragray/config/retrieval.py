"""Where passages come from: the data set, chunking, retrieval and reranking sections."""

from __future__ import annotations




from typing import Annotated, Literal


from pydantic import AfterValidator, Field, model_validator

from ragray.catalog import ranks_corpus


from ragray.config.base import Scope, _registered, Section, _column_map


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



