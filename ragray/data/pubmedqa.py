"""PubMedQA's expert-labelled set (PQA-L) from the Hugging Face hub (``qiaojin/PubMedQA``,
config ``pqa_labeled``, split ``train``: all of its 1,000 questions).

Hub rows: ``pubid``, ``question``, ``context`` (``{"contexts": [...], "labels": [...], "meshes":
[...], ...}``: the abstract without its conclusion, in labelled sections), ``long_answer`` (the
conclusion) and ``final_decision`` (yes / no / maybe). A record's answer is the decision; its one
passage and gold id is the abstract (``pmid:<pubid>``, sections joined by a space); the long
answer, section labels and MeSH terms go to its meta. No corpus file: the corpus is the union of
the abstracts.

:func:`parse_pubmedqa_rows` does the work on any iterable of such rows; :func:`fetch_pubmedqa`
is the thin network wrapper.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ragray.data.hub import stream_rows
from ragray.data.records import BadRows, RowError
from ragray.errors import InputError
from ragray.types import Dataset, Passage, Question, frozen_meta

__all__ = ["PUBMEDQA_REPO", "parse_pubmedqa_rows", "fetch_pubmedqa"]

logger = logging.getLogger(__name__)

PUBMEDQA_REPO = "qiaojin/PubMedQA"
_SOURCE = "PubMedQA PQA-L (expert-labelled)"
_DECISIONS = ("yes", "no", "maybe")


def _strings(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RowError(f"'context.{key}' must be a list of strings")
    return value


def _parse_row(row: Any) -> Question:
    if not isinstance(row, Mapping):
        raise RowError(f"expected an object, got {type(row).__name__}")
    pubid = row.get("pubid")
    if isinstance(pubid, bool) or not isinstance(pubid, (int, str)) or not str(pubid).strip():
        raise RowError("'pubid' is missing")
    pubid = str(pubid).strip()
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        raise RowError("'question' is missing or empty")
    decision = str(row.get("final_decision") or "").strip().lower()
    if decision not in _DECISIONS:
        raise RowError(f"'final_decision' must be one of {', '.join(_DECISIONS)}, "
                       f"got {row.get('final_decision')!r}")
    context = row.get("context")
    if not isinstance(context, Mapping):
        raise RowError("'context' is missing")
    text = " ".join(c.strip() for c in _strings(context.get("contexts"), "contexts") if c.strip())
    if not text:
        raise RowError("'context.contexts' has no text")
    passage = Passage(id=f"pmid:{pubid}", text=text, title="")
    meta = {"source": _SOURCE, "long_answer": str(row.get("long_answer") or ""),
            "context_labels": _strings(context.get("labels"), "labels"),
            "meshes": _strings(context.get("meshes"), "meshes"), "answer_type": "yes/no/maybe"}
    return Question(id=f"pubmedqa-{pubid}", question=question.strip(), answers=(decision,),
                    passages=(passage,), gold_passage_ids=(passage.id,), meta=frozen_meta(meta))


def parse_pubmedqa_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    source: str = f"{PUBMEDQA_REPO}[pqa_labeled/train]",
    on_bad_row: str = "error",
    name: str = "pubmedqa_pqal",
) -> Dataset:
    """PubMedQA rows → records: the decision as answer, the abstract as passage and gold.

    A malformed row raises ``InputError("<source>:<row>: ...")`` or, with ``on_bad_row="skip"``,
    is recorded in ``Dataset.skipped``.
    """
    bad = BadRows(on_bad_row)
    questions: list[Question] = []
    seen: set[str] = set()
    for n, row in enumerate(rows, start=1):
        try:
            q = _parse_row(row)
            if q.id in seen:
                raise RowError(f"duplicate pubid '{q.id.removeprefix('pubmedqa-')}'")
        except RowError as exc:
            bad(source, n, str(exc))
            continue
        seen.add(q.id)
        questions.append(q)
    bad.summary()
    if not questions:
        raise InputError(f"{source}: no PubMedQA question in the rows")
    logger.info("PubMedQA: %d questions", len(questions))
    return Dataset(name=name, questions=tuple(questions), skipped=tuple(bad.skipped))


def fetch_pubmedqa() -> Dataset:
    """Download PubMedQA PQA-L (1,000 questions) from the hub and convert it; bad rows skipped."""
    rows = stream_rows(PUBMEDQA_REPO, "train", config="pqa_labeled",
                       feature="downloading PubMedQA (dataset 'pubmedqa')")
    return parse_pubmedqa_rows(rows, on_bad_row="skip")
