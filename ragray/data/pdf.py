"""The retrieval-audit layout: a folder of PDFs with ``queries.json`` and ``ground_truth.json``.

Each PDF is one whole-document passage (id = file name, e.g. ``gdpr.pdf``, as in the auditor
seed; title = file stem); ``Dataset.documents=True`` so chunking splits it. The PDFs form one
knowledge base shared by every query, so it is both ``Dataset.corpus`` (global scope) and every
question's ``passages`` (per_question scope): the two scopes retrieve from the same documents
(the tuple is shared, not copied).

``queries.json`` is one ``{"query_id", "query"}`` object or a list of them; ``ground_truth.json``
maps query ids to document ids (``"gdpr.pdf"``; ``"gdpr"`` is accepted too). Both default to the
PDF folder itself or its parent (the seed's ``data/queries.json`` + ``data/pdfs/``); the ground
truth is optional (questions without it have no gold ids and are skipped by retrieval metrics).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ragray._imports import require
from ragray.data.records import BadRows
from ragray.errors import InputError
from ragray.types import Dataset, Passage, Question, frozen_meta

__all__ = ["load_pdf_folder", "pdf_files", "pdf_text"]

logger = logging.getLogger(__name__)

# pypdf signals malformed files with its own errors but also with these built-ins from its parser.
_PDF_ERRORS: tuple[type[Exception], ...] = (
    OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError,
)


def pdf_files(path: str | Path) -> list[Path]:
    """The ``*.pdf`` files of ``path`` (or of its ``pdfs/`` subfolder), sorted by name."""
    folder = Path(path)
    for candidate in (folder, folder / "pdfs"):
        if candidate.is_dir():
            found = sorted(p for p in candidate.iterdir()
                           if p.is_file() and p.suffix.lower() == ".pdf")
            if found:
                return found
    return []


def pdf_text(path: Path) -> tuple[str, list[int]]:
    """The text of a PDF (pages joined by blank lines) and each page's start offset in it."""
    pypdf = require("pypdf", extra="data", feature="PDF folders")
    try:
        reader = pypdf.PdfReader(path)
        if reader.is_encrypted:
            reader.decrypt("")
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except (pypdf.errors.PyPdfError, *_PDF_ERRORS) as exc:
        raise InputError(f"{path}: not a readable PDF ({type(exc).__name__}: {exc})") from None
    text, starts = "", []
    for page in pages:
        if text:
            text += "\n\n"
        starts.append(len(text))
        text += page
    if not text.strip():
        raise InputError(f"{path}: no extractable text (a scanned PDF needs OCR first)")
    return text, starts


def load_pdf_folder(
    path: str | Path,
    *,
    queries: str | Path | None = None,
    ground_truth: str | Path | None = None,
    on_bad_row: str = "error",
) -> Dataset:
    """Load a folder of PDFs with its queries and (optional) ground truth."""
    folder = Path(path)
    if not folder.is_dir():
        raise InputError(f"PDF folder not found: {folder}")
    files = pdf_files(folder)
    if not files:
        raise InputError(f"{folder}: no .pdf files (nor in {folder / 'pdfs'})")
    bad = BadRows(on_bad_row)
    docs = _read_pdfs(files, bad)
    if not docs:
        raise InputError(f"{folder}: none of the {len(files)} PDFs has readable text")
    places = _defaults(folder, files[0].parent)
    queries_path = _locate(queries, "queries.json", places)
    if queries_path is None:
        looked = ", ".join(str(p / "queries.json") for p in places)
        raise InputError(f"queries.json not found (looked for {looked}); set data.queries")
    gt_path = _locate(ground_truth, "ground_truth.json", places)
    asked = _read_queries(queries_path, bad)
    truth: dict[str, tuple[str, ...]] = {}
    rejected: set[str] = set()
    if gt_path is None:
        logger.warning("no ground_truth.json beside %s: questions have no gold documents", folder)
    else:
        truth, rejected = _read_ground_truth(gt_path, asked, {d.id for d in docs}, bad)
    questions = tuple(
        Question(id=qid, question=text, passages=docs, gold_passage_ids=truth.get(qid, ()))
        for qid, text in asked.items()
        if qid not in rejected  # its skipped ground-truth entry is the recorded reason
    )
    bad.summary()
    if not questions:
        raise InputError(f"{queries_path}: no usable queries")
    logger.info("loaded %d queries over %d PDFs from %s", len(questions), len(docs), folder)
    home = files[0].parent.resolve()  # the seed's data/pdfs/ is named after data/
    name = home.parent.name if home.name == "pdfs" else home.name
    return Dataset(name=name, questions=questions, corpus=docs,
                   skipped=tuple(bad.skipped), documents=True)


def _read_pdfs(files: list[Path], bad: BadRows) -> tuple[Passage, ...]:
    docs = []
    for pdf in files:
        try:
            text, starts = pdf_text(pdf)
        except InputError as exc:
            bad(str(pdf), 0, str(exc).removeprefix(f"{pdf}: "), where=str(pdf))
            continue
        meta = {"file": pdf.name, "pages": len(starts), "page_starts": tuple(starts)}
        docs.append(Passage(id=pdf.name, text=text, title=pdf.stem, meta=frozen_meta(meta)))
    return tuple(docs)


def _defaults(folder: Path, pdf_dir: Path) -> list[Path]:
    places = [folder, pdf_dir, pdf_dir.parent]
    return list(dict.fromkeys(places))


def _locate(explicit: str | Path | None, name: str, places: list[Path]) -> Path | None:
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise InputError(f"{name} not found: {path}")
        return path
    return next((p / name for p in places if (p / name).is_file()), None)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None


def _read_queries(path: Path, bad: BadRows) -> dict[str, str]:
    data = _read_json(path)
    items = [data] if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise InputError(f"{path}: expected an object or a list of objects with query_id, query")
    asked: dict[str, str] = {}
    for n, item in enumerate(items, start=1):
        reason = _query_problem(item, asked)
        if reason:
            bad(str(path), n, reason, where=f"{path}: query {n}")
            continue
        asked[str(item["query_id"]).strip()] = item["query"].strip()
    return asked


def _query_problem(item: Any, asked: dict[str, str]) -> str:
    if not isinstance(item, dict):
        return "not an object"
    for key in ("query_id", "query"):
        if key not in item:
            return f"'{key}' is missing"
    qid, text = item["query_id"], item["query"]
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or not str(qid).strip():
        return "'query_id' must be a non-empty string"
    if not isinstance(text, str) or not text.strip():
        return "'query' is empty" if isinstance(text, str) else "'query' must be a string"
    if str(qid).strip() in asked:
        return f"duplicate query_id '{qid}'"
    return ""


def _read_ground_truth(
    path: Path, asked: dict[str, str], doc_ids: set[str], bad: BadRows
) -> tuple[dict[str, tuple[str, ...]], set[str]]:
    """{query id: resolved doc ids} and the query ids whose entry was rejected (skip mode)."""
    data = _read_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected an object {{query_id: [document ids]}}")
    truth: dict[str, tuple[str, ...]] = {}
    rejected: set[str] = set()
    for n, (qid, docs) in enumerate(data.items(), start=1):
        docs = [docs] if isinstance(docs, str) else docs
        reason = ""
        if qid not in asked:
            reason = f"query '{qid}' is not in the queries file"
        elif not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
            reason = f"query '{qid}': expected a list of document ids"
        else:
            resolved = [_resolve(d, doc_ids) for d in docs]
            unknown = [d for d, r in zip(docs, resolved, strict=True) if r is None]
            if unknown:
                reason = f"query '{qid}' lists '{unknown[0]}', which is not a readable PDF here"
            else:
                truth[qid] = tuple(dict.fromkeys(r for r in resolved if r))
        if reason:
            bad(str(path), n, reason, where=str(path))
            rejected.add(qid)
    return truth, rejected


def _resolve(doc: str, doc_ids: set[str]) -> str | None:
    doc = doc.strip()
    for candidate in (doc, f"{doc}.pdf"):
        if candidate in doc_ids:
            return candidate
    return None
