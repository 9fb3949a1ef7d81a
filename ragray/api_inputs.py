"""What a notebook hands ragray, turned into ragray's records: passages as strings, dicts,
LangChain ``Document``s or LlamaIndex ``NodeWithScore``/``TextNode``s (duck-typed: neither library
is imported), questions as a DataFrame or a list of dicts, and retrievers from either library.

Every error names the argument and the item (``passages[3]``, ``data row 7``) in one line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from numbers import Real
from typing import Any

from ragray.errors import InputError

__all__ = ["GOLD_COLUMNS", "passage_dicts", "question_records", "retrieve_with"]


def _text_of(item: Any) -> tuple[str | None, dict[str, Any]]:
    """(text, extra fields) of one passage-like object; text None when it is not one."""
    if isinstance(item, str):
        return item, {}
    if isinstance(item, Mapping):
        text = next((item[k] for k in ("text", "page_content", "content", "passage") if k in item), None)
        extra = {k: item[k] for k in ("id", "title", "score") if k in item}
        return (text if isinstance(text, str) else None), extra
    if hasattr(item, "page_content"):  # LangChain Document
        meta = dict(getattr(item, "metadata", None) or {})
        extra = {"id": getattr(item, "id", None) or meta.get("id"), "title": meta.get("title") or meta.get("source")}
        if isinstance(meta.get("score"), Real):
            extra["score"] = meta["score"]
        return item.page_content, extra
    if hasattr(item, "node") and hasattr(item, "score"):  # LlamaIndex NodeWithScore
        text, extra = _text_of(item.node)
        if isinstance(item.score, Real):
            extra["score"] = float(item.score)
        return text, extra
    if hasattr(item, "get_content") and hasattr(item, "node_id"):  # LlamaIndex TextNode
        meta = dict(getattr(item, "metadata", None) or {})
        return item.get_content(), {"id": item.node_id, "title": meta.get("title") or meta.get("file_name")}
    return None, {}


def passage_dicts(passages: Iterable[Any], *, argument: str = "passages", prefix: str = "p") -> list[dict[str, Any]]:
    """``[{id, title, text, score?}]`` in the given order (the retrieval ranking): ids kept where
    the objects have them (made unique), else ``<prefix><rank>``."""
    if isinstance(passages, (str, bytes)) or not isinstance(passages, Iterable):
        raise InputError(f"{argument} must be a list of passages (strings, dicts, LangChain Documents or "
                         f"LlamaIndex nodes), got {type(passages).__name__}")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(passages):
        text, extra = _text_of(item)
        if text is None:
            raise InputError(f"{argument}[{i}]: a {type(item).__name__} is not a passage (expected a string, a dict "
                             "with 'text', a LangChain Document or a LlamaIndex node)")
        if not text.strip():
            raise InputError(f"{argument}[{i}] is empty")
        pid = str(extra.get("id") or f"{prefix}{i + 1}")
        if pid in seen:
            pid = f"{pid}#{i + 1}"
        seen.add(pid)
        row = {"id": pid, "title": str(extra.get("title") or ""), "text": text}
        if isinstance(extra.get("score"), Real):
            row["score"] = float(extra["score"])
        out.append(row)
    if not out:
        raise InputError(f"{argument} is empty: give at least one passage")
    return out


def _rows(data: Any) -> list[Mapping[str, Any]]:
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a pandas DataFrame
        return list(data.to_dict("records"))
    if isinstance(data, Mapping) or isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
        raise InputError(f"data must be a DataFrame, a list of dicts or a path, got {type(data).__name__}")
    rows = list(data)
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise InputError(f"data row {i}: expected a dict, got {type(row).__name__}")
    return rows


def _answers(value: Any) -> list[str]:
    if value is None or (isinstance(value, float) and value != value):  # missing / NaN cell
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


#: columns that hold the gold answers (``answer`` / ``response`` are a pipeline's own answer)
GOLD_COLUMNS = ("answers", "gold_answers", "ground_truth", "reference")


def question_records(data: Any, *, keep_answer: bool = False,
                     columns: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """ragray's JSONL records from rows with ``question`` and, optionally, ``id``, gold answers
    (:data:`GOLD_COLUMNS`), ``passages`` (any of :func:`passage_dicts`' kinds) and
    ``gold_passage_ids``; ``keep_answer``: also the pipeline's ``answer`` (for scoring);
    ``columns``: ragray field -> the data's column (``{"question": "query"}``)."""
    records = []
    rename = {theirs: ours for ours, theirs in (columns or {}).items()}
    for i, row in enumerate(_rows(data)):
        if rename:
            row = {rename.get(k, k): v for k, v in row.items()}
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            hint = "" if "question" in row or "question" in (columns or {}) else (
                "; name the one that holds the questions: columns={'question': '<column>'}")
            raise InputError(f"data row {i}: 'question' is missing or empty (columns: {sorted(row)}){hint}")
        rid = str(row.get("id") or f"q{i + 1}")
        gold = next((row[c] for c in GOLD_COLUMNS if c in row), None)
        rec: dict[str, Any] = {"id": rid, "question": question, "answers": _answers(gold)}
        if keep_answer:
            answer = row.get("answer", row.get("response"))
            if not isinstance(answer, str):
                raise InputError(f"data row {i}: 'answer' (the pipeline's answer to score) is missing")
            rec["answer"] = answer
        passages = row.get("passages")
        if passages is not None and not (isinstance(passages, float) and passages != passages):
            rec["passages"] = passage_dicts(passages, argument=f"data row {i} passages", prefix=f"{rid}-p")
        gold_ids = row.get("gold_passage_ids")
        if gold_ids is not None and not (isinstance(gold_ids, float) and gold_ids != gold_ids):
            rec["gold_passage_ids"] = [str(g) for g in gold_ids]
        records.append(rec)
    if not records:
        raise InputError("data has no rows")
    return records


def retrieve_with(retriever: Any, questions: Sequence[str], k: int | None = None) -> list[list[Any]]:
    """What the user's own retriever returns for each question, in its order: a LangChain
    retriever (``invoke``), a LlamaIndex retriever (``retrieve``) or query engine (``query``,
    its ``source_nodes``), or any callable ``question -> passages``."""
    out = []
    for q in questions:
        if hasattr(retriever, "retrieve"):  # LlamaIndex retriever
            got = retriever.retrieve(q)
        elif hasattr(retriever, "query"):  # LlamaIndex query engine: the nodes it answered from
            got = list(getattr(retriever.query(q), "source_nodes", None) or [])
        elif hasattr(retriever, "invoke"):  # LangChain retriever (a Runnable)
            got = retriever.invoke(q)
        elif callable(retriever):
            got = retriever(q)
        else:
            raise InputError(f"retriever: a {type(retriever).__name__} has no invoke/retrieve/query method and is "
                             "not callable")
        got = list(got)
        out.append(got[:k] if k else got)
    return out
