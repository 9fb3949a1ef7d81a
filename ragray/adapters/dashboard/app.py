"""The dashboard web app (FastAPI): runs, one run, a question's drill-down, compare, CSV upload.

``ragray dashboard [RUNS_DIR] [--port P]`` serves it with uvicorn; the Serve app mounts the same
router under ``/dashboard``. Pages are server-rendered with inline CSS/JS/SVG, so nothing is
fetched from the internet. Needs ``ragray[dashboard]`` (FastAPI, uvicorn, python-multipart).
Routes (``prefix`` first):

- ``GET /`` every run (history + folder), compare form, upload form;
- ``GET /runs/{id}`` the run's report (summary, plots, questions with flag filters);
- ``GET /runs/{id}/questions/{qid}`` passages with retrieval rank, text, influence, and the
  answer of every ablation (``qid`` URL-encoded; it may hold ``/``);
- ``GET /compare?a=ID&b=ID`` two runs (or sweep trials) side by side;
- ``POST /upload`` a CSV of per-passage results (:mod:`ragray.adapters.dashboard.upload`) → a new run;
- ``GET /runs/{id}/files/{name}`` the run's report/summary/CSV files;
- ``GET /api/runs``, ``GET /api/runs/{id}`` the same as JSON.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, File, HTTPException, UploadFile
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse

from ragray.adapters.dashboard import views
from ragray.adapters.dashboard.catalog import Catalog, dir_id
from ragray.adapters.dashboard.upload import import_csv
from ragray.errors import InputError

__all__ = ["dashboard_router", "make_dashboard"]

log = logging.getLogger(__name__)

MAX_UPLOAD_BYTES = 20 * 2**20
_FILES = ("report.html", "summary.json", "questions.csv", "passages.csv", "calls.csv")


def _texts(data: Any) -> dict[str, str]:
    """Passage id → text from the run's dataset, when it can still be read (else nothing)."""
    try:
        from ragray.config import DataConfig
        from ragray.data import load_dataset

        section = DataConfig.model_validate(data.config.get("data") or {})
        if section.path == "demo" or Path(section.path).exists():
            dataset = load_dataset(section)
            return {p.id: p.text for q in dataset.questions for p in q.passages}
    except Exception as exc:  # noqa: BLE001 - texts are a convenience of the drill-down
        log.info("dashboard: passage texts unavailable for %s: %s", data.path, exc)
    return {}


def dashboard_router(runs_dir: str | Path, history_url: str | None = None, prefix: str = "") -> APIRouter:
    """An ``APIRouter`` with the dashboard's routes under ``prefix`` (see the module docstring)."""
    catalog = Catalog(runs_dir, history_url)
    texts: dict[str, dict[str, str]] = {}
    router = APIRouter(prefix=prefix)

    def url(name: str, *args: str) -> str:
        q = [quote(str(a), safe="") for a in args]
        return {"index": f"{prefix}/", "compare": f"{prefix}/compare", "upload": f"{prefix}/upload",
                "run": f"{prefix}/runs/{q[0]}" if q else "",
                "question": f"{prefix}/runs/{q[0]}/questions/{q[1]}" if len(q) > 1 else "",
                "file": f"{prefix}/runs/{q[0]}/files/{q[1]}" if len(q) > 1 else ""}[name]

    def html(text: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(text, status_code=status)

    def load(run_id: str) -> tuple[Any, Any]:
        try:
            return catalog.load(run_id)
        except KeyError:
            raise HTTPException(404, f"no run '{run_id}'") from None
        except InputError as exc:
            raise HTTPException(404, str(exc)) from None

    @router.get("/", response_class=HTMLResponse)
    def index() -> HTMLResponse:
        return html(views.index_page(catalog.entries(), url))

    @router.get("/runs/{run_id}", response_class=HTMLResponse)
    def run(run_id: str) -> HTMLResponse:
        entry, data = load(run_id)
        trials = {}
        if data.kind == "sweep":  # the leaderboard links each trial's run directory to its page
            trials = {e.path.name: e.id for e in catalog.entries() if e.path and e.path.parent == entry.path / "trials"}
        return html(views.run_page(entry, data, url, trials))

    # ``path``: a question id may hold "/" (links send it as %2F, which the server decodes before
    # routing); the id is only ever looked up among the run's questions, never used as a file path
    @router.get("/runs/{run_id}/questions/{qid:path}", response_class=HTMLResponse)
    def question(run_id: str, qid: str) -> HTMLResponse:
        entry, data = load(run_id)
        if not any(q["question_id"] == qid for q in data.table("questions")) or data.kind != "run":
            raise HTTPException(404, f"run '{run_id}' has no question '{qid}' with passages")
        if run_id not in texts:
            texts[run_id] = _texts(data)
        return html(views.question_page(entry, data, qid, url, texts[run_id]))

    @router.get("/compare", response_class=HTMLResponse)
    def compare(a: str, b: str) -> HTMLResponse:
        return html(views.compare_page(load(a), load(b), url))

    @router.post("/upload")
    async def upload(file: UploadFile = File(...)) -> Any:
        raw = await file.read(MAX_UPLOAD_BYTES + 1)
        try:
            if len(raw) > MAX_UPLOAD_BYTES:
                raise InputError(f"the file is larger than {MAX_UPLOAD_BYTES // 2**20} MB")
            try:
                text = raw.decode("utf-8-sig")
            except UnicodeDecodeError:
                raise InputError("the file is not UTF-8 text") from None
            out = import_csv(text, Path(runs_dir) / "uploads", file.filename or "upload.csv")
        except InputError as exc:
            return html(views.index_page(catalog.entries(), url, f"upload {file.filename}: {exc}"), 400)
        return RedirectResponse(url("run", dir_id(out)), status_code=303)

    @router.get("/runs/{run_id}/files/{name}")
    def files(run_id: str, name: str) -> FileResponse:
        entry, _ = load(run_id)
        if name not in _FILES or not (entry.path / name).is_file():
            raise HTTPException(404, f"run '{run_id}' has no file '{name}'")
        return FileResponse(entry.path / name)

    @router.get("/api/runs")
    def api_runs() -> JSONResponse:
        return JSONResponse([{"id": e.id, "name": e.name, "kind": e.kind, "status": e.status,
                              "path": str(e.path) if e.path else None, "source": e.source,
                              "started": e.started.isoformat() if e.started else None, "openable": e.openable}
                             for e in catalog.entries()])

    @router.get("/api/runs/{run_id}")
    def api_run(run_id: str) -> JSONResponse:
        entry, data = load(run_id)
        return JSONResponse({"id": entry.id, "name": data.name, "kind": data.kind, "summary": data.summary,
                             "questions": data.table("questions")})

    router.url_for_page = url  # type: ignore[attr-defined]
    return router


def make_dashboard(runs_dir: str | Path, history_url: str | None = None) -> FastAPI:
    """The dashboard as its own FastAPI app (``ragray dashboard``); HTTP errors as HTML pages."""
    app = FastAPI(title="ragray dashboard", docs_url=None, redoc_url=None)
    router = dashboard_router(runs_dir, history_url)
    app.include_router(router)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Any, exc: HTTPException) -> HTMLResponse:
        return HTMLResponse(views.error_page(str(exc.detail), router.url_for_page, exc.status_code),
                            status_code=exc.status_code)

    return app
