"""HotpotQA dev, distractor setting, from the Hugging Face hub (``hotpotqa/hotpot_qa``, config
``distractor``, split ``validation``).

Hub rows: ``id``, ``question``, ``answer``, ``type`` (bridge / comparison), ``level``,
``supporting_facts`` (``{"title": [...], "sent_id": [...]}``) and ``context`` (``{"title":
[...], "sentences": [[...], ...]}``: ten paragraphs, two of them gold, eight distractors). A
record's passages are its ten paragraphs (sentences joined as written: each carries its own
leading space), each with id ``hotpot:<title>``; the gold ids are the supporting facts' titles.
A title met again with a different text gets ``hotpot:<title>#2`` (and so on), so one id always
means one text. No corpus file: the corpus is the union of the records' paragraphs.

:func:`parse_hotpotqa_rows` does the work on any iterable of such rows; :func:`fetch_hotpotqa`
is the thin network wrapper.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ragray.data.hub import stream_rows, struct_list
from ragray.data.records import BadRows, RowError
from ragray.errors import InputError
from ragray.types import Dataset, Passage, Question, frozen_meta

__all__ = ["HOTPOTQA_REPO", "parse_hotpotqa_rows", "fetch_hotpotqa"]

logger = logging.getLogger(__name__)

HOTPOTQA_REPO = "hotpotqa/hotpot_qa"
_SOURCE = "HotpotQA dev, distractor setting"


def _text(row: Mapping[str, Any], key: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RowError(f"'{key}' is missing or empty")
    return value.strip()


def _paragraphs(context: Any) -> list[tuple[str, str]]:
    """``(title, text)`` of each non-empty paragraph, a repeated title kept once (its first)."""
    out: dict[str, str] = {}
    for para in struct_list(context):
        title, sentences = str(para.get("title") or "").strip(), para.get("sentences")
        if not title or not isinstance(sentences, list):
            raise RowError("a 'context' paragraph has no title or no sentence list")
        text = "".join(str(s) for s in sentences).strip()
        if text and title not in out:
            out[title] = text
    if not out:
        raise RowError("'context' has no paragraph with text")
    return list(out.items())


class _Ids:
    """``hotpot:<title>`` for a title's first text, ``hotpot:<title>#k`` for its k-th."""

    def __init__(self) -> None:
        self.texts: dict[str, list[str]] = {}

    def peek(self, title: str, text: str) -> str:
        known = self.texts.get(title, [])
        k = known.index(text) + 1 if text in known else len(known) + 1
        return f"hotpot:{title}" if k == 1 else f"hotpot:{title}#{k}"

    def commit(self, title: str, text: str) -> None:
        known = self.texts.setdefault(title, [])
        if text not in known:
            known.append(text)


def _parse_row(row: Any, ids: _Ids) -> tuple[Question, list[tuple[str, str]]]:
    if not isinstance(row, Mapping):
        raise RowError(f"expected an object, got {type(row).__name__}")
    qid, question, answer = _text(row, "id"), _text(row, "question"), _text(row, "answer")
    paragraphs = _paragraphs(row.get("context"))
    by_title = {title: ids.peek(title, text) for title, text in paragraphs}
    facts = [(str(f.get("title") or "").strip(), f.get("sent_id"))
             for f in struct_list(row.get("supporting_facts") or {})]
    gold = list(dict.fromkeys(title for title, _ in facts))
    if not gold:
        raise RowError("'supporting_facts' is empty")
    for title in gold:
        if title not in by_title:
            raise RowError(f"supporting fact '{title}' is not among the context's paragraphs")
    passages = tuple(Passage(id=by_title[title], text=text, title=title) for title, text in paragraphs)
    meta = {"source": _SOURCE, "type": row.get("type"), "level": row.get("level"),
            "supporting_facts": [[title, sent] for title, sent in facts]}
    question_ = Question(id=qid, question=question, answers=(answer,), passages=passages,
                         gold_passage_ids=tuple(by_title[t] for t in gold), meta=frozen_meta(meta))
    return question_, paragraphs


def parse_hotpotqa_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    source: str = f"{HOTPOTQA_REPO}[distractor/validation]",
    on_bad_row: str = "error",
    name: str = "hotpotqa_distractor_dev",
) -> Dataset:
    """HotpotQA rows → records with their ten paragraphs and the supporting titles as gold.

    A malformed row raises ``InputError("<source>:<row>: ...")`` or, with ``on_bad_row="skip"``,
    is recorded in ``Dataset.skipped``.
    """
    bad = BadRows(on_bad_row)
    ids = _Ids()
    questions: list[Question] = []
    seen: set[str] = set()
    for n, row in enumerate(rows, start=1):
        try:
            q, paragraphs = _parse_row(row, ids)
            if q.id in seen:
                raise RowError(f"duplicate id '{q.id}'")
        except RowError as exc:
            bad(source, n, str(exc))
            continue
        for title, text in paragraphs:
            ids.commit(title, text)
        seen.add(q.id)
        questions.append(q)
    bad.summary()
    if not questions:
        raise InputError(f"{source}: no HotpotQA question in the rows")
    logger.info("HotpotQA: %d questions over %d paragraph titles", len(questions), len(ids.texts))
    return Dataset(name=name, questions=tuple(questions), skipped=tuple(bad.skipped))


def fetch_hotpotqa() -> Dataset:
    """Download HotpotQA's distractor dev set (7,405 questions) from the hub and convert it; bad
    rows skipped."""
    rows = stream_rows(HOTPOTQA_REPO, "validation", config="distractor",
                       feature="downloading HotpotQA (dataset 'hotpotqa')")
    return parse_hotpotqa_rows(rows, on_bad_row="skip")
