"""What each endpoint does, independent of HTTP and of where the components run.

:class:`RagService` takes a searcher, a reranker and a generator (local objects, or proxies of
Ray Serve deployment handles) and runs the same code as the CLI for one ad-hoc question:
the influence loop for ``/influence`` and the deletion experiment for ``/interpretation`` (built by the
pipeline's own factories, :mod:`ragray.pipeline.processors`),
``audit_documents`` for ``/audit``. Bad input raises :class:`~ragray.errors.InputError` (400).

``/influence`` and ``/interpretation`` cost up to ``serve.max_calls_per_request`` model calls
(:mod:`ragray.pipeline.cost`, checked before retrieval) and call the model through a
:class:`~ragray.generation.cancellable.CancellableGenerator`: their request's token stops them at
the next call, and their calls hold the model for at most ``serve.max_prompts_per_call`` prompts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ragray.audit.explain import explain_audits
from ragray.cancel import CancelToken
from ragray.config import ExperimentConfig
from ragray.config_access import ClientPolicy
from ragray.errors import BackendError, ConfigError, InputError, PromptTooLongError
from ragray.generation import Generator
from ragray.generation.base import too_long
from ragray.generation.cancellable import CancellableGenerator
from ragray.generation.prompts import get_template, system_message
from ragray.metrics.quality import QualityScorer
from ragray.metrics.similarity import Similarity, all_measures, get_similarity
from ragray.pipeline.audit import audit_entry
from ragray.pipeline.cost import check_cost, command_cost
from ragray.pipeline.processors import faithfulness_experiment, influence_loop
from ragray.rerank import reranks
from ragray.retrieval.stage import QuestionHits
from ragray.retrieval.tail import finish_hits, first_stage_k
from ragray.adapters.serving import schemas as s
from ragray.adapters.serving.secrets import public_model
from ragray.types import Hit, Passage, Question, frozen_meta

__all__ = ["RagService"]


def _hit_out(h: Hit) -> s.HitOut:
    p = h.passage
    return s.HitOut(rank=h.rank, score=h.score, passage_id=p.id, doc_id=p.doc_id or p.id, title=p.title, text=p.text)


def _raise_too_long(error: str | None) -> None:
    """A question whose prompt did not fit the model is the request's fault: 422 with the counts."""
    counts = too_long(error)
    if counts is not None:
        raise PromptTooLongError(*counts, what="the prompt (question and passages)")


def _raise_failed(error: str | None, failed: bool) -> None:
    """A question the model could not answer (the prompt too long: 422; every call or the baseline
    failed: 502, as the docs promise, not a 200 whose body says ``error``)."""
    _raise_too_long(error)
    if failed:
        raise BackendError(f"the generator failed on this question: {error or 'no call succeeded'}")


class _Cache:
    """Builds an expensive object (encoders inside similarity measures) once per key."""

    def __init__(self) -> None:
        self._items: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, build: Callable[[], Any]) -> Any:
        with self._lock:
            if key not in self._items:
                self._items[key] = build()
            return self._items[key]


class RagService:
    """The API's operations over one served config and its three components."""

    def __init__(self, config: ExperimentConfig, search: Any, reranker: Any, generator: Generator) -> None:
        self.config = config
        self.search = search
        self.reranker = reranker
        self.generator = generator
        self.template = get_template(config.generation.template)
        #: the system message of every prompt (``generation.decline: auto`` means never here: no data set)
        self.system = system_message(self.template, config.generation.system_prompt, config.generation.decline)
        self.policy = ClientPolicy.for_server(config)
        self._cache = _Cache()

    @property
    def model_name(self) -> str:
        """The generator's model as a client reads it (a folder's name, not its path)."""
        return public_model(self.generator.model_id)

    def _within_cost(self, cfg: ExperimentConfig, command: str, k: int | None, endpoint: str) -> None:
        """Refuse (:class:`~ragray.errors.LimitError`) one question of ``command`` with ``k`` passages
        costing more than ``serve.max_calls_per_request``."""
        self._check_top_k(k or cfg.retrieval.top_k)  # first: the cost is counted per passage
        cost = command_cost(cfg, command, questions=1, passages=k, what=f"{endpoint} request")
        check_cost(cost, self.policy.limits, "request")

    def _model(self, token: CancelToken | None) -> Generator:
        """The generator one request calls: stopped by ``token``, its calls split."""
        return CancellableGenerator(self.generator, token or CancelToken(), self.config.serve.max_prompts_per_call)

    def _settings(self, values: dict[str, Any]) -> ExperimentConfig:
        """The served config with a request's settings (dotted key -> value, None: unset), under
        the same :class:`ClientPolicy` as ``POST /runs`` and the presets."""
        return self.policy.apply(self.config, {k: v for k, v in values.items() if v is not None}, where="request")

    # ----------------------------------------------------------------------------- retrieval

    def _check_top_k(self, k: int) -> None:
        most = self.config.serve.max_top_k  # the cap of retrieval.top_k too (ragray.config.limits)
        if k > most:
            raise InputError(f"top_k_docs: {k} is above this server's limit serve.max_top_k={most}")

    def _retrieve(self, req: s.RetrieveRequest, k: int | None = None, fetch: int = 0) -> tuple[str, bool, list[Hit]]:
        """``k`` (default: the request's ``top_k_docs``) hits; ``fetch``: at least this many (audit)."""
        cfg = self.config
        retriever = req.retriever or cfg.retrieval.retriever
        if retriever not in self.search.retrievers:
            raise InputError(f"retriever: unknown '{retriever}'; valid: {', '.join(self.search.retrievers)}")
        k = k or req.top_k_docs or cfg.retrieval.top_k
        self._check_top_k(k)
        k = max(k, fetch)
        rerank = reranks(cfg.rerank.strategy) if req.rerank is None else req.rerank
        hits = self.search.search(req.question, retriever, first_stage_k(k, rerank, cfg.rerank.candidates))
        hits = list(finish_hits(req.question, hits, self.reranker if rerank else None, k, cfg.retrieval.min_score))
        if cfg.retrieval.expand.window and hits:
            hits = self.search.expand(hits)
        return retriever, rerank, hits

    def retrieve(self, req: s.RetrieveRequest) -> s.RetrieveResponse:
        retriever, reranked, hits = self._retrieve(req)
        return s.RetrieveResponse(question=req.question, retriever=retriever, reranked=reranked,
                                  hits=[_hit_out(h) for h in hits])

    def _question_hits(self, req: s.RetrieveRequest, qid: str, answers: Sequence[str] = (),
                       answerable: bool | None = None) -> QuestionHits:
        _, _, hits = self._retrieve(req)
        if not hits:
            raise InputError("question: the retriever found no passage for it")
        # marked as a data set's row marks it (ragray.data.answerable): the prompt stays the served one
        question = Question(id=qid, question=req.question, answers=tuple(answers))
        if answerable is False:
            question = replace(question, meta=frozen_meta({"answerable": False}))
        return QuestionHits(question, tuple(hits))

    # ---------------------------------------------------------------------------- generation

    def generate(self, req: s.GenerateRequest) -> s.GenerateResponse:
        if req.passages is not None:
            passages = [Passage(id=f"p{i}", text=t) for i, t in enumerate(req.passages, start=1)]
        else:
            passages = [h.passage for h in self._retrieve(req)[2]]
        prompt = self.template.build(req.question, passages, self.system)
        (g,) = self.generator.generate([prompt])
        if g.error is not None:
            _raise_too_long(g.error)
            raise BackendError(f"the generator failed: {g.error}")
        return s.GenerateResponse(
            question=req.question, answer=g.text, model=self.model_name, passages=[p.text for p in passages],
            prompt_tokens=g.prompt_tokens, completion_tokens=g.completion_tokens, latency_s=g.latency_s,
            error=g.error,
        )

    # ----------------------------------------------------------------------------- influence

    def influence(self, req: s.InfluenceRequest, qid: str, token: CancelToken | None = None) -> s.InfluenceResponse:
        """``token``: cancelled, the work stops at its next model call (:class:`~ragray.cancel.Cancelled`)."""
        cfg = self._settings({"influence.mode": req.mode, "influence.position_control": req.position_control})
        icfg = cfg.influence
        self._within_cost(cfg, "run", req.top_k_docs, "/influence")
        qh = self._question_hits(req, qid, req.answers, req.answerable)
        similarity: Similarity = self._cache.get(("sim", icfg.similarity), lambda: get_similarity(icfg.similarity))
        quality = self._cache.get("quality", lambda: QualityScorer(cfg.metrics))
        loop = influence_loop(cfg, self._model(token), similarity=similarity, quality=quality,
                              retrieval_k=req.top_k_docs)
        record = loop.run(qh)
        _raise_failed(record.question.error, record.question.state == "error")
        return s.InfluenceResponse(question=record.question, passages=list(record.passages),
                                   calls=list(record.calls) if req.debug else None, model=self.model_name)

    # ------------------------------------------------------------------------ interpretation

    def _faithfulness_config(self, req: s.InterpretationRequest) -> Any:
        """The config with the request's faithfulness settings (through the client policy)."""
        return self._settings({
            "faithfulness.level": req.explanation_level, "faithfulness.hierarchical": req.hierarchical,
            "faithfulness.explainer": req.explainer, "faithfulness.mode": req.mode,
            "faithfulness.k_values": list(req.k_values) if req.k_values else None,
            "faithfulness.random_repeats": req.random_repeats, "faithfulness.threshold_t": req.semantic_threshold_t,
        })

    def interpretation(self, req: s.InterpretationRequest, qid: str,
                       token: CancelToken | None = None) -> s.InterpretationResponse:
        """``token``: cancelled, the work stops at its next model call (:class:`~ragray.cancel.Cancelled`)."""
        cfg = self._faithfulness_config(req)
        fc = cfg.faithfulness
        self._within_cost(cfg, "interpret", req.top_k_docs, "/interpretation")
        names = tuple(dict.fromkeys((fc.similarity, *fc.measures)))
        try:
            measures = self._cache.get(("measures", names), lambda: all_measures(names))
        except ConfigError as exc:
            raise InputError(str(exc)) from None
        qh = self._question_hits(req, qid, req.answers)
        experiment = faithfulness_experiment(cfg, self._model(token), measures=measures)
        record = experiment.run(qh)
        _raise_failed(record.question.error, record.question.error is not None)
        arms = list(record.arms) if req.debug else [replace(a, answer=None, removed_unit_ids=None) for a in record.arms]
        return s.InterpretationResponse(question=record.question, importances=list(record.units),
                                        cases=list(record.cases), deletions=arms, curves=list(record.curves),
                                        model=self.model_name)

    # --------------------------------------------------------------------------------- audit

    def audit(self, req: s.AuditRequest, qid: str) -> s.AuditResponse:
        ac = self.config.audit
        k = req.k or ac.k
        _, _, hits = self._retrieve(req, k=k, fetch=max(ac.fetch, req.top_k_docs or 0))
        entry = audit_entry(qid, req.question, hits, req.relevant_ids, k, ac.pass_score)
        if req.explain:
            (entry,) = explain_audits(self.generator, [entry])
        return s.AuditResponse(audit=entry, hits=[_hit_out(h) for h in hits])
