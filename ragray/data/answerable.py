"""Which questions are unanswerable: the passages cannot answer them, and the right response is to
decline (SQuAD 2.0's ``is_impossible`` rows, ragray's demo ``kind: unanswerable`` rows).

A question is unanswerable when its row says so (``answerable: false`` or ``is_impossible: true``,
top level or in ``meta``), or when it has no gold answer in a set whose other rows have gold
answers (a set without any gold answer is unlabelled, not unanswerable). :func:`mark_unanswerable`
writes the verdict into ``Question.meta["answerable"]`` (False) once, when the set is loaded;
:func:`is_unanswerable` reads it wherever a question travels (Ray actors, Serve replicas).
"""

from __future__ import annotations

from dataclasses import replace

from ragray.config import ExperimentConfig
from ragray.types import Dataset, Question, frozen_meta

__all__ = ["is_unanswerable", "mark_unanswerable", "resolve_decline"]


def is_unanswerable(q: Question) -> bool:
    """True when ``q`` is marked unanswerable (by its row or by :func:`mark_unanswerable`)."""
    meta = q.meta or {}
    return meta.get("answerable") is False or meta.get("is_impossible") is True


def mark_unanswerable(dataset: Dataset) -> Dataset:
    """``dataset`` with ``meta["answerable"] = False`` on every unanswerable question (see above);
    the same object when there is none."""
    labelled = any(q.answers for q in dataset.questions)

    def marked(q: Question) -> Question:
        meta = q.meta or {}
        if q.answers or is_unanswerable(q) or not labelled or meta.get("answerable") is True:
            return q
        return replace(q, meta=frozen_meta({**dict(meta), "answerable": False}))

    questions = tuple(marked(q) for q in dataset.questions)
    n = sum(is_unanswerable(q) for q in questions)
    if all(a is b for a, b in zip(questions, dataset.questions)) and n == dataset.n_unanswerable:
        return dataset
    return replace(dataset, questions=questions, n_unanswerable=n)


def resolve_decline(config: ExperimentConfig, dataset: Dataset) -> ExperimentConfig:
    """``config`` with ``generation.decline: auto`` resolved for ``dataset``: ``always`` (the prompt
    tells the model how to decline) where the whole set has an unanswerable question (``--limit``
    does not change a question's prompt), else ``never``."""
    gen = config.generation
    if gen.decline != "auto":
        return config
    unanswerable = dataset.n_unanswerable or any(is_unanswerable(q) for q in dataset.questions)
    decline = "always" if unanswerable else "never"
    return config.model_copy(update={"generation": gen.model_copy(update={"decline": decline})})
