"""The FastAPI application: routes, error mapping, and the gates every request and answer pass.

In front (:mod:`~ragray.adapters.serving.gate`): a bad ``X-Request-ID`` is 400, a missing key 401
(``$RAGRAY_API_KEY``, ``serve.api_key_env``) — both before the body is read — then a body over
``serve.max_request_bytes`` is 413 and one not received within ``serve.body_timeout_s`` 408; then
admission (503 JSON with ``Retry-After`` when full). Behind: every text answer passes
:class:`~ragray.adapters.serving.secrets.Scrub` (no URL credentials, paths or key names).

Status codes: 422 for a body that does not match the schema (FastAPI's detail lists the fields;
JSON's ``Infinity``/``NaN`` included), 400 for well-formed input the server cannot use (unknown
retriever or preset, a preset name or config that does not validate, top_k above
``serve.max_top_k``, a number over its cap in ``serve.limits``, more model calls than
``serve.max_calls_per_request``), 403 for a setting a client may not set, 404 for unknown
presets/runs, 409 for a client's preset over an operator's file preset and to cancel a run not
going on here, 502 when the model failed on the question (every call of ``/influence``, the
baseline of ``/interpretation``), 503 for a request stopped (its client gone, the server stopping)
and when a deployment's queue is full, 504 when a deployment call times out, 500 for bugs — logged
with the request id, which every response carries in ``X-Request-ID``.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ragray import __version__
from ragray.errors import BackendError, ConfigError, ConflictError, InputError, NotAllowedError, PromptTooLongError
from ragray.adapters.serving import schemas as s
from ragray.adapters.serving.admission import Admission
from ragray.adapters.serving.disconnect import until_done
from ragray.adapters.serving.gate import Gate
from ragray.adapters.serving.inflight import stops_with_the_server
from ragray.adapters.serving.runs import Presets, RunManager, RunNotRunningError
from ragray.adapters.serving.secrets import Redactor, Scrub
from ragray.adapters.serving.service import RagService

__all__ = ["ServeFront", "make_app"]

log = logging.getLogger("ragray.serve")

# list endpoints: a page of at most 1000; larger offsets are a 422, not a database overflow
Limit = Annotated[int, Query(ge=1, le=1000, description="page size")]
Offset = Annotated[int, Query(ge=0, le=1_000_000_000, description="items to skip")]

ASGIApp = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


class _AsciiJSON(JSONResponse):
    """JSON with every non-ASCII character escaped: an error may quote a client's invalid text
    (a lone surrogate has no UTF-8 encoding), and its answer must still be sent."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def _error(status: int, message: str, request_id: str, detail: Any = None, **headers: str) -> JSONResponse:
    body = {"error": message, "request_id": request_id} | ({"detail": detail} if detail is not None else {})
    return _AsciiJSON(body, status_code=status, headers={"X-Request-ID": request_id, **headers})


def _field_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    """FastAPI's list of body problems without the inputs they quote (which may be invalid text)."""
    return [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")).removeprefix("Value error, "),
             "type": str(e.get("type", ""))} for e in exc.errors()]


def _field_message(detail: list[dict[str, Any]]) -> str:
    """``field: problem; ...`` (a check of the whole body names its field in the problem)."""
    return "; ".join(f"{'.'.join(map(str, d['loc'][1:]))}: {d['msg']}" if d["loc"][1:] else d["msg"]
                     for d in detail)


def _unexpected(exc: Exception, rid: str, timeout_s: float) -> JSONResponse:
    name = type(exc).__name__
    if name in ("BackPressureError", "DeploymentUnavailableError"):  # a deployment's queue is full (or
        # it is not up yet): retry later, do not hang
        return _error(503, "server busy: a deployment's request queue is full, retry later", rid,
                      **{"Retry-After": "1"})
    if isinstance(exc, TimeoutError) or name == "GetTimeoutError":
        return _error(504, f"a deployment did not answer within {timeout_s:g} s", rid)
    log.error("request %s failed", rid, exc_info=exc)
    return _error(500, f"internal error ({name}); see the server log for request {rid}", rid)


class _NoRequestIdHeader:
    """ASGI middleware behind Ray Serve: the proxy stamps ``X-Request-ID`` (the id the app read
    from the request) on every response, so the app's own copy would be a second header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        async def without(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [(k, v) for k, v in message.get("headers", [])
                                                   if k.lower() != b"x-request-id"]}
            await send(message)

        await self.app(scope, receive, without if scope["type"] == "http" else send)


class ServeFront:
    """The API as Ray Serve's ingress takes it: a plain ASGI callable, not the FastAPI object.

    Serve installs its own exception handlers on an app that has ``add_exception_handler``: for
    ``BackPressureError`` a plain-text 503 (a full generator queue answered without the API's JSON
    and ``Retry-After``, issue 64). Behind this wrapper the app's own mapping (:func:`_unexpected`)
    answers it. Lifespan and HTTP scopes pass through unchanged."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def make_app(service: RagService, runs: RunManager, presets: Presets, *, api_key: str | None = None,
             behind_serve: bool = False) -> FastAPI:
    """The HTTP API over ``service``; ``api_key`` defaults to ``$serve.api_key_env`` (unset: no auth).
    ``behind_serve``: Ray Serve's proxy in front stamps the request ids."""
    config = service.config
    key = api_key if api_key is not None else os.environ.get(config.serve.api_key_env) or None
    app = FastAPI(
        title="ragray", version=__version__,
        description="Influence-aware RAG diagnostics: retrieval, generation, influence, faithfulness "
                    "(deletion experiments, Case A/B/C) and retrieval integrity for one question at a time, "
                    "plus whole runs over presets.",
        responses={400: {"model": s.ErrorBody}, 401: {"model": s.ErrorBody}, 403: {"model": s.ErrorBody},
                   413: {"model": s.ErrorBody},
                   500: {"model": s.ErrorBody}, 503: {"model": s.ErrorBody}},
        lifespan=stops_with_the_server(runs.stop),  # the runs stop (recorded interrupted) with the server
    )

    _answer_errors(app, config.serve.timeout_s)
    for router in (_pipeline_routes(service, runs), _preset_routes(presets, runs), _run_routes(runs)):
        app.include_router(router)
    from ragray.adapters.dashboard.app import dashboard_router
    from ragray.store.history import history_url

    # the dashboard over the runs POST /runs writes (and the history), behind the same key
    app.include_router(dashboard_router(config.serve.runs_dir, history_url(config.history.url), prefix="/dashboard",
                                        limits=config.dashboard, paths=False), include_in_schema=False)
    ingress = config.serve.ingress
    app.add_middleware(Admission, ongoing=ingress.max_ongoing_requests, queued=ingress.max_queued_requests)
    # outside admission: the key and the whole body come first (ragray.adapters.serving.gate)
    app.add_middleware(Gate, key=key, limit=config.serve.max_request_bytes, body_timeout_s=config.serve.body_timeout_s)
    # the last gate: no operator secret in any text the API sends (ragray.adapters.serving.secrets)
    app.add_middleware(Scrub, redactor=Redactor.for_server([config, *presets.file_configs()], [key or ""]))
    if behind_serve:
        app.add_middleware(_NoRequestIdHeader)
    return app


def _rid(request: Request) -> str:
    return getattr(request.state, "request_id", None) or uuid.uuid4().hex


def _answer_errors(app: FastAPI, timeout_s: float) -> None:
    """Every answer carries its request id; every error is an :class:`~schemas.ErrorBody` with the
    status its cause calls for (422 a field, 403 a setting, 409 a conflict, 400 bad input, 502 a
    model or index, 500/503/504 the unexpected)."""

    @app.middleware("http")
    async def ids_and_errors(request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:
        rid = request.scope.get("state", {}).get("request_id") or uuid.uuid4().hex
        request.state.request_id = rid
        try:
            response = await call_next(request)
        except Exception as exc:  # after the specific handlers: busy, timeout, or a bug
            return _unexpected(exc, rid, timeout_s)
        response.headers["X-Request-ID"] = rid
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = _field_errors(exc)
        return _error(422, _field_message(detail) or "invalid request", _rid(request), detail=detail)

    @app.exception_handler(PromptTooLongError)
    async def too_long(request: Request, exc: Exception) -> JSONResponse:
        return _error(422, str(exc), _rid(request))

    @app.exception_handler(NotAllowedError)
    async def not_allowed(request: Request, exc: Exception) -> JSONResponse:
        return _error(403, str(exc), _rid(request))

    @app.exception_handler(ConflictError)
    async def conflict(request: Request, exc: Exception) -> JSONResponse:
        return _error(409, str(exc), _rid(request))

    @app.exception_handler(InputError)
    @app.exception_handler(ConfigError)
    async def bad_input(request: Request, exc: Exception) -> JSONResponse:
        return _error(400, str(exc), _rid(request))

    @app.exception_handler(BackendError)
    async def backend_failed(request: Request, exc: Exception) -> JSONResponse:
        log.error("request %s: backend error: %s", _rid(request), exc)
        return _error(502, f"a model or index failed: {exc}", _rid(request))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), _rid(request))


def _pipeline_routes(service: RagService, runs: RunManager) -> APIRouter:
    """Health, one question's retrieval and generation, and the long diagnostics (influence,
    interpretation, audit)."""
    router = APIRouter()

    @router.get("/health", response_model=s.Health, tags=["service"])
    def health() -> s.Health:
        return s.Health(status="ok", model=service.model_name, corpus_passages=service.search.size(),
                        retrievers=service.search.retrievers, reranker=service.reranker.name)

    @router.post("/retrieve", response_model=s.RetrieveResponse, tags=["pipeline"])
    def retrieve(req: s.RetrieveRequest) -> s.RetrieveResponse:
        return service.retrieve(req)

    @router.post("/generate", response_model=s.GenerateResponse, tags=["pipeline"])
    def generate(req: s.GenerateRequest) -> s.GenerateResponse:
        return service.generate(req)

    # the long diagnostics stop when their client disconnects (ragray.adapters.serving.disconnect)
    @router.post("/influence", response_model=s.InfluenceResponse, tags=["diagnostics"])
    async def influence(req: s.InfluenceRequest, request: Request) -> s.InfluenceResponse:
        qid = _rid(request)
        return await until_done(request, runs.inflight, lambda token: service.influence(req, qid, token))

    @router.post("/interpretation", response_model=s.InterpretationResponse, tags=["diagnostics"])
    async def interpretation(req: s.InterpretationRequest, request: Request) -> s.InterpretationResponse:
        qid = _rid(request)
        return await until_done(request, runs.inflight, lambda token: service.interpretation(req, qid, token))

    @router.post("/audit", response_model=s.AuditResponse, tags=["diagnostics"])
    def audit(req: s.AuditRequest, request: Request) -> s.AuditResponse:
        return service.audit(req, _rid(request))

    return router


def _preset_routes(presets: Presets, runs: RunManager) -> APIRouter:
    """The presets a run may name, and the history's cleanup."""
    router = APIRouter()

    @router.get("/presets", response_model=list[s.Preset], tags=["presets"])
    def list_presets(limit: Limit = 50, offset: Offset = 0) -> list[s.Preset]:
        return presets.page(limit, offset)

    @router.get("/presets/{name}", tags=["presets"], responses={404: {"model": s.ErrorBody}})
    def get_preset(name: str) -> dict[str, Any]:
        """The preset's source, description and the values of the settings a client may set."""
        try:
            return presets.public(name)
        except KeyError:
            raise HTTPException(404, f"no preset '{name}'; valid: {', '.join(presets.names())}") from None

    @router.put("/presets/{name}", response_model=s.Preset, tags=["presets"], responses={409: {"model": s.ErrorBody}})
    def save_preset(name: str, req: s.PresetRequest) -> s.Preset:
        return presets.save(name, req.config, req.description)

    @router.delete("/presets/{name}", status_code=204, response_class=Response, tags=["presets"],
                responses={404: {"model": s.ErrorBody}, 409: {"model": s.ErrorBody}})
    def delete_preset(name: str) -> Response:
        if not presets.delete(name):
            raise HTTPException(404, f"no preset '{name}' in the database (files in serve.presets_dir are read-only)")
        return Response(status_code=204)

    @router.post("/cleanup", response_model=s.CleanupResponse, tags=["presets"])
    def cleanup() -> s.CleanupResponse:
        return s.CleanupResponse(**runs.history.cleanup_expired())

    return router


def _run_routes(runs: RunManager) -> APIRouter:
    """Whole runs: start, list, status, finished questions so far, cancel."""
    router = APIRouter()

    @router.post("/runs", response_model=s.RunStatus, status_code=202, tags=["runs"])
    def start_run(req: s.RunRequest) -> s.RunStatus:
        return runs.start(req)

    @router.get("/runs", response_model=list[s.RunStatus], tags=["runs"])
    def list_runs(
        limit: Limit = 50,
        offset: Offset = 0,
        kind: Annotated[s.RunKind | None, Query(description="only runs of this kind")] = None,
        status: Annotated[s.RecordedStatus | None, Query(description="only runs in this state")] = None,
    ) -> list[s.RunStatus]:
        return runs.list(limit, offset, kind=kind, status=status)

    @router.get("/runs/{run_id}", response_model=s.RunStatus, tags=["runs"], responses={404: {"model": s.ErrorBody}})
    def get_run(run_id: str) -> s.RunStatus:
        try:
            return runs.status(run_id)
        except KeyError:
            raise HTTPException(404, f"no run '{run_id}'") from None

    @router.get("/runs/{run_id}/questions", response_model=list[s.FinishedQuestion], tags=["runs"],
             responses={404: {"model": s.ErrorBody}})
    def run_questions(run_id: str, limit: Limit = 50, offset: Offset = 0) -> list[s.FinishedQuestion]:
        """The run's finished questions so far, in finishing order: readable while it runs."""
        try:
            return runs.questions(run_id, limit, offset)
        except KeyError:
            raise HTTPException(404, f"no run '{run_id}'") from None

    @router.delete("/runs/{run_id}", response_model=s.RunStatus, status_code=202, tags=["runs"],
                responses={404: {"model": s.ErrorBody}, 409: {"model": s.ErrorBody}})
    def cancel_run(run_id: str) -> s.RunStatus:
        """Cancel a run going on in this server: it stops at its next model call, recorded interrupted."""
        try:
            return runs.cancel(run_id)
        except KeyError:
            raise HTTPException(404, f"no run '{run_id}'") from None
        except RunNotRunningError as exc:
            raise HTTPException(409, str(exc)) from None

    return router
