"""SQuAD v1.1 dev (``rajpurkar/squad``) and SQuAD 2.0 dev (``rajpurkar/squad_v2``) from the
Hugging Face hub, split ``validation``.

Hub rows are one question each: ``id``, ``title`` (the article, ``Super_Bowl_50``), ``context``
(its paragraph), ``question`` and ``answers`` (``{"text": [...], "answer_start": [...]}``, the
crowd answers, often repeated). A record keeps the distinct answers in order and its paragraph as
its one passage and gold id, ``<title>#p<i>`` where ``i`` counts the article's paragraphs in the
order they first appear (as in the official JSON). Every paragraph goes into the corpus, so global
retrieval searches all of the dev set's paragraphs. SQuAD 2.0 adds questions its paragraph does
not answer (no answer text): with ``unanswerable=True`` such a row is kept with no gold answer and
no gold passage, marked ``answerable: false`` (:mod:`ragray.data.answerable`).

:func:`parse_squad_rows` does the work on any iterable of such rows; :func:`fetch_squad` is the
thin network wrapper.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ragray.data.hub import stream_rows, struct_list
from ragray.data.records import BadRows, RowError
from ragray.errors import InputError
from ragray.types import Dataset, Passage, Question, frozen_meta

__all__ = ["SQUAD2_REPO", "SQUAD_REPO", "fetch_squad", "fetch_squad2", "parse_squad_rows"]

logger = logging.getLogger(__name__)

SQUAD_REPO = "rajpurkar/squad"
SQUAD2_REPO = "rajpurkar/squad_v2"
_SOURCE = "SQuAD v1.1 dev"


def _text(row: Mapping[str, Any], key: str) -> str:
    value = row.get(key)
    if not isinstance(value, (str, int)) or isinstance(value, bool) or not str(value).strip():
        raise RowError(f"'{key}' is missing or empty")
    return str(value)


def _answers(value: Any, unanswerable: bool) -> tuple[str, ...]:
    texts = [str(a.get("text") or "").strip() for a in struct_list(value)]
    answers = tuple(dict.fromkeys(t for t in texts if t))
    if not answers and not unanswerable:
        raise RowError("'answers' has no answer text")
    return answers


def parse_squad_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    source: str = f"{SQUAD_REPO}[validation]",
    on_bad_row: str = "error",
    name: str = "squad_v11_dev",
    unanswerable: bool = False,
    source_name: str = _SOURCE,
) -> Dataset:
    """SQuAD rows → records with their paragraph as passage and gold, plus the paragraph corpus.

    A malformed row raises ``InputError("<source>:<row>: ...")`` or, with ``on_bad_row="skip"``,
    is recorded in ``Dataset.skipped``.
    """
    bad = BadRows(on_bad_row)
    paragraphs: dict[tuple[str, str], Passage] = {}
    per_article: dict[str, int] = {}
    questions: list[Question] = []
    seen: set[str] = set()
    for n, row in enumerate(rows, start=1):
        try:
            if not isinstance(row, Mapping):
                raise RowError(f"expected an object, got {type(row).__name__}")
            qid, title = _text(row, "id").strip(), _text(row, "title").strip()
            context, question = _text(row, "context"), _text(row, "question").strip()
            answers = _answers(row.get("answers"), unanswerable)
            if qid in seen:
                raise RowError(f"duplicate id '{qid}'")
        except RowError as exc:
            bad(source, n, str(exc))
            continue
        passage = paragraphs.get((title, context))
        if passage is None:
            index = per_article.get(title, 0)
            per_article[title] = index + 1
            passage = Passage(id=f"{title}#p{index}", text=context, title=title.replace("_", " "))
            paragraphs[(title, context)] = passage
        seen.add(qid)
        meta = {"source": source_name, "article": title, **({} if answers else {"answerable": False})}
        questions.append(Question(
            id=qid, question=question, answers=answers, passages=(passage,),
            gold_passage_ids=(passage.id,) if answers else (), meta=frozen_meta(meta),
        ))
    bad.summary()
    if not questions:
        raise InputError(f"{source}: no SQuAD question in the rows")
    logger.info("SQuAD: %d questions over %d paragraphs", len(questions), len(paragraphs))
    return Dataset(name=name, questions=tuple(questions), corpus=tuple(paragraphs.values()),
                   skipped=tuple(bad.skipped))


def fetch_squad2() -> Dataset:
    """Download SQuAD 2.0 dev (11,873 questions, 5,945 of them unanswerable) and convert it."""
    rows = stream_rows(SQUAD2_REPO, "validation", feature="downloading SQuAD 2.0 (dataset 'squad2')")
    return parse_squad_rows(rows, source=f"{SQUAD2_REPO}[validation]", on_bad_row="skip", name="squad_v20_dev",
                            unanswerable=True, source_name="SQuAD 2.0 dev")


def fetch_squad() -> Dataset:
    """Download SQuAD v1.1 dev (10,570 questions) from the hub and convert it; bad rows skipped."""
    rows = stream_rows(SQUAD_REPO, "validation", feature="downloading SQuAD (dataset 'squad')")
    return parse_squad_rows(rows, on_bad_row="skip")
