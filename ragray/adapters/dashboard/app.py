"""The dashboard web app (FastAPI): runs, one run, a question's drill-down, compare, CSV upload.

``ragray dashboard [RUNS_DIR] [--port P]`` serves it with uvicorn; the Serve app mounts the same
router under ``/dashboard``. Pages are server-rendered with inline CSS/JS/SVG, so nothing is
fetched from the internet. Needs ``ragray[dashboard]`` (FastAPI, uvicorn, python-multipart).
Beyond loopback every route needs the API key (:mod:`ragray.adapters.dashboard.access`); an
upload is refused with 413 above ``dashboard.max_upload_bytes`` and 409 once RUNS_DIR/uploads
holds ``dashboard.max_uploads`` runs, with nothing written either way. Routes (``prefix`` first):

- ``GET /`` every run (history + folder), compare form, upload form;
- ``GET /runs/{id}`` the run's report (summary, plots, questions with flag filters);
- ``GET /runs/{id}/questions/{qid}`` passages with retrieval rank, text, influence, and the
  answer of every ablation (``qid`` URL-encoded; it may hold ``/``);
- ``GET /compare?a=ID&b=ID`` two runs (or sweep trials) side by side;
- ``POST /upload`` a CSV of per-passage results (:mod:`ragray.adapters.dashboard.upload`) → a new run;
- ``POST /login`` (only with a key) the key from the 401 page's form → a session cookie;
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
from ragray.adapters.dashboard.access import FRAMING_BYTES, BodyLimit, require_key
from ragray.adapters.dashboard.catalog import Catalog, dir_id
from ragray.adapters.dashboard.upload import count_uploads, import_csv
from ragray.config import DashboardConfig
from ragray.errors import InputError

__all__ = ["dashboard_router", "make_dashboard"]

log = logging.getLogger(__name__)

_FILES = ("report.html", "summary.json", "questions.csv", "passages.csv", "calls.csv")


def _texts(data: Any) -> dict[str, str]:
    """Passage id → text from the run's dataset, when it can still be read (else nothing; an
    uploaded run has no dataset here: its config's data section is only the default)."""
    if data.summary.get("uploaded"):
        return {}
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


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n:,} bytes"


class _Site:
    """What the dashboard's routes share: the run catalog, its upload folder and limits, its URLs."""

    def __init__(self, runs_dir: str | Path, history_url: str | None, prefix: str, limits: DashboardConfig) -> None:
        self.prefix, self.limits = prefix, limits
        self.uploads = Path(runs_dir) / "uploads"
        self.catalog = Catalog(runs_dir, history_url)
        self.texts: dict[str, dict[str, str]] = {}  # run id -> its passages' texts, read once

    def url(self, name: str, *args: str) -> str:
        prefix, q = self.prefix, [quote(str(a), safe="") for a in args]
        return {"index": f"{prefix}/", "compare": f"{prefix}/compare", "upload": f"{prefix}/upload",
                "run": f"{prefix}/runs/{q[0]}" if q else "",
                "question": f"{prefix}/runs/{q[0]}/questions/{q[1]}" if len(q) > 1 else "",
                "file": f"{prefix}/runs/{q[0]}/files/{q[1]}" if len(q) > 1 else ""}[name]

    def load(self, run_id: str) -> tuple[Any, Any]:
        try:
            return self.catalog.load(run_id)
        except KeyError:
            raise HTTPException(404, f"no run '{run_id}'") from None
        except InputError as exc:
            raise HTTPException(404, str(exc)) from None

    def index_page(self, message: str = "", status: int = 200) -> HTMLResponse:
        limits = self.limits
        note = (f"up to {_mib(limits.max_upload_bytes)}; {count_uploads(self.uploads)} of {limits.max_uploads} "
                "uploaded runs kept")
        return HTMLResponse(views.index_page(self.catalog.entries(), self.url, message, note), status_code=status)

    def run_page(self, run_id: str) -> HTMLResponse:
        entry, data = self.load(run_id)
        trials = {}
        if data.kind == "sweep":  # the leaderboard links each trial's run directory to its page
            trials = {e.path.name: e.id for e in self.catalog.entries()
                      if e.path and e.path.parent == entry.path / "trials"}
        return HTMLResponse(views.run_page(entry, data, self.url, trials))

    def question_page(self, run_id: str, qid: str) -> HTMLResponse:
        entry, data = self.load(run_id)
        if not any(q["question_id"] == qid for q in data.table("questions")) or data.kind != "run":
            raise HTTPException(404, f"run '{run_id}' has no question '{qid}' with passages")
        if run_id not in self.texts:
            self.texts[run_id] = _texts(data)
        return HTMLResponse(views.question_page(entry, data, qid, self.url, self.texts[run_id]))

    def receive(self, name: str | None, raw: bytes) -> Any:
        """An uploaded CSV (``raw``: at most one byte over the limit, read so) saved as a run: the run's
        page, or the index saying why nothing was saved. Called with no await in between the count and
        the write: one step of the event loop."""
        limits, uploads = self.limits, self.uploads
        if len(raw) > limits.max_upload_bytes:
            return self.index_page(f"upload {name}: the file is larger than {_mib(limits.max_upload_bytes)} "
                                   "(dashboard.max_upload_bytes); nothing was saved", 413)
        if limits.max_uploads == 0:
            return self.index_page("uploads are off here (dashboard.max_uploads is 0); nothing was saved", 409)
        if count_uploads(uploads) >= limits.max_uploads:
            return self.index_page(f"upload {name}: {uploads} already holds {limits.max_uploads} uploaded runs "
                                   "(dashboard.max_uploads); delete some there, or raise the limit, to upload "
                                   "more; nothing was saved", 409)
        try:
            try:
                text = raw.decode("utf-8-sig")
            except UnicodeDecodeError:
                raise InputError("the file is not UTF-8 text") from None
            out = import_csv(text, uploads, name or "upload.csv")
        except InputError as exc:
            return self.index_page(f"upload {name}: {exc}", 400)
        return RedirectResponse(self.url("run", dir_id(out)), status_code=303)


def dashboard_router(runs_dir: str | Path, history_url: str | None = None, prefix: str = "",
                     limits: DashboardConfig | None = None, paths: bool = True) -> APIRouter:
    """An ``APIRouter`` with the dashboard's routes under ``prefix`` (see the module docstring);
    ``limits`` bound the uploads (default: :class:`~ragray.config.DashboardConfig`'s); ``paths``
    False: ``/api/runs`` names run folders, not their paths (inside ``ragray serve``, whose
    clients read none of the server's paths)."""
    site = _Site(runs_dir, history_url, prefix, limits or DashboardConfig())
    router = APIRouter(prefix=prefix)

    @router.get("/", response_class=HTMLResponse)
    def index() -> HTMLResponse:
        return site.index_page()

    @router.get("/runs/{run_id}", response_class=HTMLResponse)
    def run(run_id: str) -> HTMLResponse:
        return site.run_page(run_id)

    # ``path``: a question id may hold "/" (links send it as %2F, which the server decodes before
    # routing); the id is only ever looked up among the run's questions, never used as a file path
    @router.get("/runs/{run_id}/questions/{qid:path}", response_class=HTMLResponse)
    def question(run_id: str, qid: str) -> HTMLResponse:
        return site.question_page(run_id, qid)

    @router.get("/compare", response_class=HTMLResponse)
    def compare(a: str, b: str) -> HTMLResponse:
        return HTMLResponse(views.compare_page(site.load(a), site.load(b), site.url))

    @router.post("/upload")
    async def upload(file: UploadFile = File(...)) -> Any:
        raw = await file.read(site.limits.max_upload_bytes + 1)
        return site.receive(file.filename, raw)  # no await from here on

    @router.get("/runs/{run_id}/files/{name}")
    def files(run_id: str, name: str) -> FileResponse:
        entry, _ = site.load(run_id)
        if name not in _FILES or not (entry.path / name).is_file():
            raise HTTPException(404, f"run '{run_id}' has no file '{name}'")
        return FileResponse(entry.path / name)

    @router.get("/api/runs")
    def api_runs() -> JSONResponse:
        return JSONResponse([{"id": e.id, "name": e.name, "kind": e.kind, "status": e.status,
                              "path": (str(e.path) if paths else e.path.name) if e.path else None,
                              "source": e.source,
                              "started": e.started.isoformat() if e.started else None, "openable": e.openable}
                             for e in site.catalog.entries()])

    @router.get("/api/runs/{run_id}")
    def api_run(run_id: str) -> JSONResponse:
        entry, data = site.load(run_id)
        return JSONResponse({"id": entry.id, "name": data.name, "kind": data.kind, "summary": data.summary,
                             "questions": data.table("questions")})

    router.url_for_page = site.url  # type: ignore[attr-defined]
    return router


def make_dashboard(runs_dir: str | Path, history_url: str | None = None, *, api_key: str | None = None,
                   limits: DashboardConfig | None = None) -> FastAPI:
    """The dashboard as its own FastAPI app (``ragray dashboard``); HTTP errors as HTML pages. With
    ``api_key`` every route needs it (:mod:`ragray.adapters.dashboard.access`); ``limits`` bound
    the uploads, and no request body larger than an upload is read."""
    limits = limits or DashboardConfig()
    app = FastAPI(title="ragray dashboard", docs_url=None, redoc_url=None)
    router = dashboard_router(runs_dir, history_url, limits=limits)
    app.include_router(router)
    app.add_middleware(BodyLimit, limit=limits.max_upload_bytes + FRAMING_BYTES,
                       message=f"the upload is larger than {_mib(limits.max_upload_bytes)} "
                               "(dashboard.max_upload_bytes); nothing was saved",
                       page=lambda message: views.error_page(message, router.url_for_page, 413))
    if api_key:  # added last: the outermost middleware, so a refused request's body is never read
        require_key(app, api_key, views.login_page)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Any, exc: HTTPException) -> HTMLResponse:
        return HTMLResponse(views.error_page(str(exc.detail), router.url_for_page, exc.status_code),
                            status_code=exc.status_code)

    return app
