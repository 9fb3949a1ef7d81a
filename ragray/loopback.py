"""A loopback OpenAI-compatible server for load tests: fixed latency, a concurrency limit, throttling.

    python -m ragray.loopback --latency 0.5 --limit 64 --port 8011

then ``ragray run --backend openai --set generation.openai.base_url=http://127.0.0.1:8011/v1``.
It answers like a model server that takes ``latency`` seconds per request and serves ``limit``
requests at once, so the best any client can do is ``limit / latency`` requests per second —
the yardstick of ``benchmarks/bench_throughput.py``. What it answers is deterministic and depends
on the prompt's passages (so drop-one changes answers), never on timing:

- ``POST /v1/chat/completions``: the first three words of the first numbered passage (``[1] ...``)
  of the last user message, else ``"unknown"``;
- ``POST /v1/completions`` with ``echo`` + ``logprobs`` and token-id prompts (log-prob scoring): a
  log-probability per token that depends on the token, its position and the token before;
- ``POST /limit`` with ``{"limit": n}``: serve ``n`` at once from now on (a cap that moves mid-run);
- ``GET /stats``: requests answered, rejected and throttled, the most in flight, the seconds from
  the first request to the last answer and the rate over them, and how many distinct request
  bodies were answered more than once (duplicates show); ``POST /stats/reset`` starts over.

Over the limit, a request waits (``over_limit="queue"``, like vLLM's server) or gets ``429`` with
``Retry-After`` (``"reject"``, like a hosted API). ``throttle_every=N`` answers every N-th request
``429`` regardless (a storm: 2 throttles half of them).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LoopbackServer", "LoopbackStats", "loopback_app"]

_PASSAGE = re.compile(r"^\s*\[1\]\s*(.*)$", re.M)


@dataclass
class LoopbackStats:
    """What the server saw (``GET /stats``)."""

    answered: int = 0
    rejected: int = 0  # over the limit, with over_limit="reject"
    throttled: int = 0  # by throttle_every
    max_in_flight: int = 0
    first_at: float | None = None
    last_at: float | None = None
    in_flight: int = 0
    bodies: Counter = field(default_factory=Counter)

    def reset(self) -> None:
        """Forget what was seen (requests in flight keep counting themselves out)."""
        in_flight = self.in_flight
        self.__init__()  # type: ignore[misc]
        self.in_flight = in_flight

    def as_dict(self) -> dict[str, Any]:
        span = (self.last_at - self.first_at) if self.first_at is not None and self.last_at is not None else None
        return {"answered": self.answered, "rejected": self.rejected, "throttled": self.throttled,
                "max_in_flight": self.max_in_flight, "seconds": span,
                "answered_per_second": self.answered / span if span else None,
                "distinct_bodies": len(self.bodies),
                "answered_twice": sum(1 for n in self.bodies.values() if n > 1)}


def _answer(messages: list[dict[str, Any]]) -> str:
    users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    found = _PASSAGE.search(users[-1]) if users else None
    words = found.group(1).split()[:3] if found else []
    return " ".join(words) or "unknown"


def _token_logprobs(ids: list[int]) -> list[float | None]:
    return [None] + [-0.05 - ((ids[i] * 31 + ids[i - 1] * 7 + i) % 17) / 10 for i in range(1, len(ids))]


def _chat(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat completion answering the prompt's question from its passages."""
    text = _answer(body.get("messages") or [])
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": sum(len(str(m.get("content", "")).split()) for m in body["messages"]),
                      "completion_tokens": len(text.split())}}

def _completions(body: dict[str, Any]) -> dict[str, Any]:
    """A completions answer scoring the prompt's tokens (``echo``), with the top log-probs asked for."""
    ids = [int(t) for t in body.get("prompt") or []]
    lps = _token_logprobs(ids)
    out: dict[str, Any] = {"token_logprobs": lps}
    if int(body.get("logprobs") or 0) > 1:  # the actual token and one other, as vLLM's server lists them
        out["top_logprobs"] = [None] + [{str(t): lp, "other": math.log(max(1e-9, 1 - math.exp(lp)) / 2)}
                                        for t, lp in zip(ids[1:], lps[1:])]
    return {"choices": [{"index": 0, "text": "", "logprobs": out}]}


def loopback_app(latency: float, limit: int, *, over_limit: str = "queue", retry_after: float = 0.05,
                 throttle_every: int = 0) -> tuple[Any, LoopbackStats]:
    """The Starlette app and the stats it keeps."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    if over_limit not in ("queue", "reject"):
        raise ValueError(f"over_limit must be queue or reject, not {over_limit!r}")
    stats = LoopbackStats()
    slots = asyncio.Semaphore(limit)
    seen = {"n": 0, "limit": limit}

    def throttle(headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse({"error": {"message": "rate limited (loopback)"}}, status_code=429,
                            headers={"Retry-After": f"{retry_after:g}", **(headers or {})})

    async def serve(request: Request, answer: Any) -> JSONResponse:
        body = await request.json()
        seen["n"] += 1
        if throttle_every and seen["n"] % throttle_every == 0:
            stats.throttled += 1
            return throttle()
        if over_limit == "reject":
            if stats.in_flight >= seen["limit"]:
                stats.rejected += 1
                return throttle()
            return await _answer_now(body, answer)
        async with slots:
            return await _answer_now(body, answer)

    async def _answer_now(body: Any, answer: Any) -> JSONResponse:
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        now = time.perf_counter()
        stats.first_at = now if stats.first_at is None else stats.first_at
        try:
            await asyncio.sleep(latency)
            out = answer(body)
        finally:
            stats.in_flight -= 1
        stats.answered += 1
        stats.last_at = time.perf_counter()
        stats.bodies[hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()] += 1
        return JSONResponse(out)

    async def chat_route(request: Request) -> JSONResponse:
        return await serve(request, _chat)

    async def completions_route(request: Request) -> JSONResponse:
        return await serve(request, _completions)

    async def stats_route(request: Request) -> JSONResponse:
        return JSONResponse(stats.as_dict())

    async def limit_route(request: Request) -> JSONResponse:
        seen["limit"] = int((await request.json())["limit"])
        return JSONResponse({"limit": seen["limit"]})

    async def reset_route(request: Request) -> JSONResponse:
        stats.reset()
        seen["n"] = 0
        return JSONResponse(stats.as_dict())

    app = Starlette(routes=[Route("/v1/chat/completions", chat_route, methods=["POST"]),
                            Route("/v1/completions", completions_route, methods=["POST"]),
                            Route("/stats", stats_route, methods=["GET"]),
                            Route("/stats/reset", reset_route, methods=["POST"]),
                            Route("/limit", limit_route, methods=["POST"])])
    return app, stats


class LoopbackServer:
    """The loopback server on a free local port in a background thread (a context manager)."""

    def __init__(self, latency: float = 0.5, limit: int = 64, **options: Any) -> None:
        self.latency, self.limit = latency, limit
        self.app, self.stats = loopback_app(latency, limit, **options)
        self.port: int | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def ideal_per_second(self) -> float:
        """The most requests per second this server can answer: ``limit / latency``."""
        return self.limit / self.latency

    def __enter__(self) -> LoopbackServer:
        import socket

        import uvicorn

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning",
                                backlog=4096, limit_concurrency=None, timeout_keep_alive=30)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="ragray-loopback", daemon=True)
        self._thread.start()
        deadline = time.time() + 30
        while not self._server.started:
            if time.time() > deadline or not self._thread.is_alive():
                raise RuntimeError("the loopback server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ragray.loopback", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.5, help="seconds per request")
    ap.add_argument("--limit", type=int, default=64, help="requests served at once")
    ap.add_argument("--over-limit", choices=["queue", "reject"], default="queue")
    ap.add_argument("--throttle-every", type=int, default=0, help="answer every N-th request 429")
    ap.add_argument("--retry-after", type=float, default=0.05, help="the Retry-After header of a 429 (seconds)")
    ap.add_argument("--port", type=int, default=8011)
    args = ap.parse_args(argv)
    import uvicorn

    app, _ = loopback_app(args.latency, args.limit, over_limit=args.over_limit, throttle_every=args.throttle_every,
                          retry_after=args.retry_after)
    print(f"loopback OpenAI-compatible server: http://127.0.0.1:{args.port}/v1, {args.latency:g} s per request, "
          f"{args.limit} at once (ideal {args.limit / args.latency:g} requests/s)")
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", backlog=4096)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
