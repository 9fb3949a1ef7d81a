"""Okapi BM25 with rank_bm25's exact scoring, computed as one sparse matrix product.

rank_bm25's ``BM25Okapi`` (the reference the spec pins) scores a document d for query terms q as

    score(d) = Σ_{t ∈ q} idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl))
    idf(t)   = ln(N − df(t) + 0.5) − ln(df(t) + 0.5), negative idf replaced by ε·mean(idf)

with repeated query terms counted once per repetition. Here the per-(term, document) weights are
precomputed into a sparse matrix W (vocabulary × documents), so a batch of queries is scored with
one sparse product ``Q · W`` instead of a Python loop over documents — the same numbers, far faster.

A saved index (the index cache) is the vocabulary as JSON (terms in id order), ``idf.npy`` and
W's CSR arrays in ``weights.npz`` — plain numpy files read with ``allow_pickle=False``, as bm25s
stores its indexes. Loading restores W bit for bit, so scores equal a fresh build's exactly.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ragray.cache.fingerprint import library_versions
from ragray.config import BM25Config, RetrievalConfig
from ragray.retrieval.base import RETRIEVERS, Retriever, SearchIndex, hits_from_scores
from ragray.text.analyzer import Analyzer
from ragray.types import Hit, Passage, passage_text

__all__ = ["BM25Retriever", "BM25Index"]


class BM25Index(SearchIndex):
    """A BM25 index over tokenized passages; see the module docstring for the formula."""

    def __init__(
        self,
        passages: Sequence[Passage],
        config: BM25Config,
        analyzer: Analyzer,
        tokens: Sequence[Sequence[str]] | None = None,
    ) -> None:
        """Index ``passages``; ``tokens`` (one term list per passage) skips the analyzer."""
        super().__init__(passages)
        self.config = config
        self.analyzer = analyzer
        self.vocab: dict[str, int] = {}
        self.idf = np.zeros(0)
        self._weights = sp.csr_matrix((0, len(self.passages)))
        if self.passages:
            if tokens is None:
                tokens = analyzer.many([passage_text(p) for p in self.passages])
            self._build(tokens)

    def _build(self, docs: Sequence[Sequence[str]]) -> None:
        n_docs = len(docs)
        lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=n_docs)
        tf = self._term_frequencies(docs, lengths)
        df = np.diff(tf.indptr).astype(np.float64)
        idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
        if len(idf):
            floor = self.config.epsilon * idf.mean()
            idf = np.where(idf < 0, floor, idf)
        self.idf = idf
        k1, b = self.config.k1, self.config.b
        avgdl = lengths.sum() / n_docs
        norm = k1 * (1 - b + b * lengths / avgdl) if avgdl > 0 else np.full(n_docs, k1 * (1 - b))
        data = tf.data
        doc_of = tf.indices
        term_of = np.repeat(np.arange(len(self.vocab)), np.diff(tf.indptr))
        weights = idf[term_of] * data * (k1 + 1) / (data + norm[doc_of])
        self._weights = sp.csr_matrix((weights, tf.indices, tf.indptr), shape=tf.shape)

    def _term_frequencies(self, docs: Sequence[Sequence[str]], lengths: np.ndarray) -> sp.csr_matrix:
        """tf (vocabulary × documents, CSR with sorted indices); sets ``self.vocab`` with term ids
        in order of first occurrence. Terms are hashed by Arrow's ``dictionary_encode`` and the
        (term, document) pairs counted with one sort: ~2.5x faster than a dict and a COO matrix on
        SciFact's 785k tokens, the same matrix."""
        import pyarrow as pa
        import pyarrow.compute as pc

        flat = list(itertools.chain.from_iterable(docs))
        try:
            encoded = pc.dictionary_encode(pa.array(flat, type=pa.large_string()))
            self.vocab = {t: i for i, t in enumerate(encoded.dictionary.to_pylist())}
            terms = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        except (UnicodeError, pa.ArrowException):  # e.g. a lone surrogate: not UTF-8
            vocab: dict[str, int] = {}
            terms = np.fromiter((vocab.setdefault(t, len(vocab)) for t in flat), dtype=np.int64, count=len(flat))
            self.vocab = vocab
        n_docs, n_terms = len(docs), len(self.vocab)
        pairs, counts = np.unique(terms * n_docs + np.repeat(np.arange(n_docs), lengths), return_counts=True)
        term_of, doc_of = np.divmod(pairs, n_docs)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_of, minlength=n_terms), out=indptr[1:])
        return sp.csr_matrix((counts.astype(np.float64), doc_of, indptr), shape=(n_terms, n_docs))

    def save(self, directory: Path) -> None:
        """Vocabulary, idf and the weight matrix W as JSON / ``.npy`` / ``.npz`` files."""
        terms = json.dumps(list(self.vocab), ensure_ascii=False)
        (directory / "vocab.json").write_bytes(terms.encode("utf-8", "surrogatepass"))
        np.save(directory / "idf.npy", self.idf, allow_pickle=False)
        w = self._weights
        np.savez(directory / "weights.npz", data=w.data, indices=w.indices, indptr=w.indptr,
                 shape=np.asarray(w.shape, dtype=np.int64))

    @classmethod
    def load(
        cls, directory: Path, passages: Sequence[Passage], config: BM25Config, analyzer: Analyzer
    ) -> BM25Index:
        """The index :meth:`save` wrote, over ``passages``; ``ValueError`` when they do not fit."""
        index = cls((), config, analyzer)
        index.passages = tuple(passages)
        terms = json.loads((directory / "vocab.json").read_bytes().decode("utf-8", "surrogatepass"))
        index.vocab = {t: i for i, t in enumerate(terms)}
        index.idf = np.load(directory / "idf.npy", allow_pickle=False)
        with np.load(directory / "weights.npz", allow_pickle=False) as z:
            shape = tuple(int(n) for n in z["shape"])
            weights = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=shape)
        if len(index.vocab) != len(terms) or shape != (len(terms), len(index.passages)) or (
            index.idf.shape != (len(terms),)
        ):
            raise ValueError(f"saved BM25 index {shape} does not fit {len(index.passages)} passages")
        index._weights = weights
        return index

    def query_matrix(self, queries: Sequence[Sequence[str]]) -> sp.csr_matrix:
        """Counts of known query terms per query (unknown terms score 0, as in rank_bm25)."""
        rows, cols = [], []
        for i, terms in enumerate(queries):
            for t in terms:
                j = self.vocab.get(t)
                if j is not None:
                    rows.append(i)
                    cols.append(j)
        data = np.ones(len(rows))
        return sp.csr_matrix((data, (rows, cols)), shape=(len(queries), len(self.vocab)))

    def scores_tokens(self, queries: Sequence[Sequence[str]]) -> np.ndarray:
        """Dense (n_queries × n_passages) BM25 scores for tokenized queries."""
        if not self.passages:
            return np.zeros((len(queries), 0))
        return np.asarray((self.query_matrix(queries) @ self._weights).todense())

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        return self.scores_tokens(self.analyzer.many(queries))

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if not self.passages:
            return [[] for _ in queries]
        out: list[list[Hit]] = []
        batch = 256  # bounds the dense score block to batch × n_passages floats
        for start in range(0, len(queries), batch):
            block = self.scores(queries[start : start + batch])
            out.extend(hits_from_scores(self.passages, row, k) for row in block)
        return out


@RETRIEVERS.register("bm25")
class BM25Retriever(Retriever):
    """Lexical retrieval with rank_bm25's Okapi scoring (``retrieval.bm25``)."""

    name = "bm25"

    def __init__(self, config: BM25Config | None = None) -> None:
        self.config = config or BM25Config()
        self.analyzer = Analyzer(self.config.stopwords, self.config.stemmer)

    @classmethod
    def from_config(cls, config: RetrievalConfig) -> BM25Retriever:
        return cls(config.bm25)

    def index(self, passages: Sequence[Passage]) -> BM25Index:
        return BM25Index(passages, self.config, self.analyzer)

    def index_identity(self) -> dict[str, Any]:
        """The whole ``retrieval.bm25`` section and the libraries the scores are computed with."""
        libs = ["numpy", "scipy"] + (["PyStemmer"] if self.config.stemmer != "none" else [])
        return {"bm25": self.config.model_dump(mode="json"), "libraries": library_versions(*libs)}

    def load_index(self, directory: Path, passages: Sequence[Passage]) -> BM25Index:
        return BM25Index.load(directory, passages, self.config, self.analyzer)


