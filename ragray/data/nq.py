"""Google Natural Questions, streamed through Hugging Face ``datasets`` (the influence seed).

Rows are consumed lazily and only those with a human short answer are kept, until ``limit`` valid
samples are found (so streaming stops early). HTML is stripped with the row's own
``document.tokens.is_html`` mask; block-level tags (paragraphs, headings, list items, table rows)
become blank lines so structure-aware chunking can see them. Each question's own Wikipedia page is
its single whole-document passage (``Dataset.documents=True``; chunking splits it later) and its
gold id; ``Question.meta["answer_spans"]`` holds the character spans of the short answers in that
text, so chunk-level gold can be derived after chunking.

:func:`parse_nq_rows` does all the work on any iterable of rows shaped as ``datasets`` yields them
(sequences of structs are dicts of lists); :func:`load_nq` is the thin network wrapper.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ragray._imports import require
from ragray.data.hub import struct_list as _records
from ragray.data.records import BadRows, RowError
from ragray.errors import InputError
from ragray.types import Dataset, Passage, Question, frozen_meta

__all__ = ["NQ_DATASET", "NQ_DEFAULT_SAMPLES", "parse_nq_rows", "load_nq", "document_text"]

logger = logging.getLogger(__name__)

NQ_DATASET = "google-research-datasets/natural_questions"
NQ_DEFAULT_SAMPLES = 50  # the influence seed's N
_SPLITS = {"test": "validation", "dev": "validation"}  # NQ's test set is hidden
_BLOCK_TAGS = frozenset({
    "p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "dd", "dt", "tr", "table", "ul", "ol", "dl",
    "div", "br", "caption", "blockquote",
})


def _is_block_tag(token: str) -> bool:
    name = token.strip("<>/ ").split(" ")[0].lower()
    return name in _BLOCK_TAGS


def document_text(tokens: Any) -> tuple[str, dict[int, tuple[int, int]]]:
    """Clean text of ``document.tokens`` and each kept token's character span in it.

    Tokens flagged ``is_html`` are dropped; block-level tags start a new paragraph ("\\n\\n").
    """
    parts: list[str] = []
    spans: dict[int, tuple[int, int]] = {}
    pos, new_block = 0, False
    for i, tok in enumerate(_records(tokens)):
        text = str(tok.get("token", ""))
        if tok.get("is_html"):
            new_block = new_block or _is_block_tag(text)
            continue
        if not text.strip():
            continue
        sep = ("\n\n" if new_block else " ") if parts else ""
        new_block = False
        parts.append(sep + text)
        pos += len(sep)
        spans[i] = (pos, pos + len(text))
        pos += len(text)
    return "".join(parts), spans


def _short_answers(annotations: Any, spans: dict[int, tuple[int, int]]
                   ) -> tuple[tuple[str, ...], tuple[tuple[int, int], ...]]:
    """Distinct short-answer texts of all annotations, and their character spans in the text."""
    answers: list[str] = []
    char_spans: list[tuple[int, int]] = []
    for ann in _records(annotations):
        for short in _records(ann.get("short_answers") or {}):
            text = " ".join(str(short.get("text") or "").split())
            if not text:
                continue
            if text not in answers:
                answers.append(text)
            kept = [spans[t] for t in range(int(short.get("start_token", -1)),
                                             int(short.get("end_token", -1))) if t in spans]
            if kept and (kept[0][0], kept[-1][1]) not in char_spans:
                char_spans.append((kept[0][0], kept[-1][1]))
    return tuple(answers), tuple(char_spans)


def _parse_row(row: Mapping[str, Any]) -> Question | None:
    """One NQ row → Question, or None when it has no human short answer (not an error)."""
    try:
        qid = str(row["id"])
        question = str(row["question"]["text"]).strip()
        document = row["document"]
        tokens, annotations = document["tokens"], row["annotations"]
    except (KeyError, TypeError) as exc:
        raise RowError(f"not shaped like a Natural Questions row (missing {exc})") from None
    text, spans = document_text(tokens)
    answers, char_spans = _short_answers(annotations, spans)
    if not answers:
        return None
    if not question:
        raise RowError("'question' is empty")
    if not text.strip():
        raise RowError("the document has no text once HTML is stripped")
    doc_id = f"nq:{qid}"
    title = str(document.get("title") or "")
    url = str(document.get("url") or "")
    passage = Passage(id=doc_id, text=text, title=title,
                      meta=frozen_meta({"source": "Natural Questions", "url": url}))
    return Question(
        id=qid, question=question, answers=answers, passages=(passage,),
        gold_passage_ids=(doc_id,),
        meta=frozen_meta({"source": "Natural Questions", "url": url, "answer_spans": char_spans}),
    )


def parse_nq_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    limit: int = NQ_DEFAULT_SAMPLES,
    source: str = "natural_questions",
    on_bad_row: str = "error",
    name: str = "natural_questions",
) -> Dataset:
    """Keep the first ``limit`` rows with a human short answer; stop reading there.

    Rows without a short answer are filtered out by design (counted in the log, not "skipped").
    A malformed row raises ``InputError("<source>:<row>: ...")`` or is skipped and recorded.
    """
    if limit < 1:
        raise InputError(f"the number of Natural Questions samples must be >= 1, got {limit}")
    bad = BadRows(on_bad_row)
    questions: list[Question] = []
    seen: set[str] = set()
    read = 0
    for read, row in enumerate(rows, start=1):
        try:
            q = _parse_row(row)
            if q is not None and q.id in seen:
                raise RowError(f"duplicate id '{q.id}'")
        except RowError as exc:
            bad(source, read, str(exc))
            continue
        if q is None:
            continue
        seen.add(q.id)
        questions.append(q)
        if len(questions) >= limit:
            break
    bad.summary()
    logger.info("Natural Questions: kept %d of %d rows read (short answer required)",
                len(questions), read)
    if not questions:
        raise InputError(f"{source}: no row with a human short answer among {read} rows")
    return Dataset(name=name, questions=tuple(questions), skipped=tuple(bad.skipped),
                   documents=True)


def load_nq(
    split: str = "validation",
    *,
    limit: int = NQ_DEFAULT_SAMPLES,
    dataset: str = NQ_DATASET,
    on_bad_row: str = "error",
) -> Dataset:
    """Stream ``dataset`` (the NQ hub id or a local copy) and keep ``limit`` answerable rows.

    ``split`` "test"/"dev" map to "validation" (NQ's test set is not public). Needs the hub.
    """
    datasets = require("datasets", extra="data", feature="Natural Questions streaming")
    split = _SPLITS.get(split, split)
    logger.info("streaming %s (split %s) until %d answerable rows", dataset, split, limit)
    rows = datasets.load_dataset(dataset, split=split, streaming=True)
    return parse_nq_rows(rows, limit=limit, source=f"{dataset}[{split}]", on_bad_row=on_bad_row)
