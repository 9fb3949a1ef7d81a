"""``openai``: any OpenAI-compatible HTTP endpoint (vLLM's server, Ollama, hosted APIs), via httpx.

Generation posts ``{base_url}/chat/completions`` (``model`` = ``generation.model``, the name the
server knows), results in input order. Up to ``generation.openai.concurrency`` requests are in
flight at once across every question the pipeline keeps in flight (:class:`AdaptiveLimit`: halved
when the server answers 429 or 503, grown back as requests succeed, settled just under a cap that
throttles at the same level again and again: :mod:`ragray.generation.concurrency`); each has ``timeout_s``. A bearer key is read from the env var named by ``generation.openai.api_key_env`` (unset:
no ``Authorization`` header).

Failures, per request:

- timeouts, connection errors, HTTP 5xx and 429 are retried ``max_retries`` times, waiting
  ``backoff_s``, then twice that, and so on — or what a ``Retry-After`` header asks (at most
  :data:`MAX_RETRY_AFTER_S`);
- other HTTP 4xx (bad request, unknown model, bad key) are not retried;
- a request that fails for good gives ``Generation(text="", error=...)`` naming the URL, the last
  problem and the number of attempts: the run records it on the question and goes on.

Scoring (:meth:`OpenAIGenerator.logprobs`) needs the legacy ``{base_url}/completions`` endpoint with
``echo`` + ``logprobs`` (vLLM's server has it; chat-only hosted APIs and Ollama do not). The
prompt is rendered and tokenized locally with the served model's tokenizer
(``generation.openai.tokenizer``, else ``generation.model`` when it names a packaged model, a
local folder or a hub id) and sent as token ids, so the answer's tokens are known exactly.

User text is text (:mod:`~ragray.generation.chat_tokens`): a prompt whose messages hold a special
token's text (``<|im_start|>`` in a passage) is generated from ``/completions`` with token ids
rendered and encoded locally, not sent as chat messages, which the server's template and tokenizer
would read as chat markup. Without a local tokenizer ragray cannot tell such text, and every prompt
goes as chat messages (docs/running.md, "User text is text").
"""

from __future__ import annotations

import dataclasses
import email.utils
import functools
import logging
import math
import os
import time
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, ClassVar

from ragray._imports import require
from ragray.config import GenerationConfig
from ragray.errors import BackendError, ConfigError, MissingDependencyError
from ragray.generation.base import GENERATORS, ChatPrompt, Generation, Generator, Message
from ragray.generation.concurrency import AdaptiveLimit
from ragray.generation.chat_tokens import encode_rendered, encode_scored, has_special_text, render_prompt
from ragray.generation.packaged import resolve_generator_model
from ragray.text.urls import public_url

__all__ = ["MAX_RETRY_AFTER_S", "AdaptiveLimit", "OpenAIGenerator", "parse_retry_after"]

log = logging.getLogger(__name__)

MAX_RETRY_AFTER_S = 120.0
"""Longest wait a server's ``Retry-After`` header may impose before a retry."""

_CANNOT_SCORE = "this endpoint cannot score log-probabilities"


@functools.lru_cache(maxsize=8)
def _load_tokenizer(folder: str) -> Any:
    """The tokenizer in ``folder``, loaded once per process: every generator scoring through one
    served model (a run's, each Serve request's) shares it (it is only read; ~1 s a load)."""
    return require("transformers", extra="generate",
                   feature="log-probability scoring over an OpenAI-compatible endpoint"
                   ).AutoTokenizer.from_pretrained(folder)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date), clamped to
    ``[0, MAX_RETRY_AFTER_S]``; None when absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _check_base_url(url: str) -> str:
    try:
        parts = urllib.parse.urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - raises ValueError on an invalid port
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(
            f"generation.openai.base_url must be an http(s) URL such as "
            f"http://127.0.0.1:8000/v1, got {url!r}"
        )
    return url.rstrip("/")


def _detail(response: Any) -> str:
    """The server's error message (OpenAI's ``{"error": {"message": ...}}``) or a body excerpt."""
    try:
        err = response.json().get("error")
        message = err.get("message") if isinstance(err, dict) else err
    except (ValueError, AttributeError):
        message = None
    text = str(message) if message else response.text
    return " ".join(text.split())[:300] or "(empty body)"


@dataclass(frozen=True)
class _Outcome:
    """One logical request after its retries: the JSON body, or the error and last HTTP status."""

    body: dict[str, Any] | None
    error: str | None
    attempts: int
    status: int | None = None


@GENERATORS.register("openai")
class OpenAIGenerator(Generator):
    """Chat completions from an OpenAI-compatible server.

    ``transport`` (an ``httpx.BaseTransport``, e.g. ``httpx.MockTransport``) and ``sleep`` (called
    with each retry delay) are injectable for tests; :meth:`from_config` uses the defaults.
    """

    name = "openai"
    #: questions kept with the server at once (its requests share ``concurrency``)
    default_questions_in_flight = 64  # bench_throughput --defaults: 0.93-0.94 of ideal at 0.5 s x 64 vs 0.80 with 16
    concurrent_calls = True

    def __init__(
        self,
        config: GenerationConfig,
        *,
        transport: Any = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._httpx = require("httpx", extra="openai", feature="the openai generator")
        self.config = config
        self.options = config.openai
        self.base_url = _check_base_url(self.options.base_url)
        headers = {"Accept": "application/json"}
        key = os.environ.get(self.options.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        n = self.options.concurrency
        self._client: Any = self._httpx.Client(
            headers=headers,
            timeout=self.options.timeout_s,
            transport=transport,
            limits=self._httpx.Limits(max_connections=n, max_keepalive_connections=n),
        )
        self._sleep = sleep
        self.limit = AdaptiveLimit(n)
        self._pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="ragray-openai")
        self._tok: Any = None
        self._no_tokenizer: str | None = None  # why generation has no local tokenizer ('' : it has one)
        self._probed: tuple[str | None] | None = None  # (scoring problem,) once probed

    @classmethod
    def from_config(cls, config: GenerationConfig) -> OpenAIGenerator:
        return cls(config)

    @property
    def model_id(self) -> str:
        return self.config.model

    def resolved_settings(self) -> dict[str, Any]:
        """The adaptive concurrency limit as it stands (at the end of a run: where it settled)."""
        return {"concurrency": self.limit.state()}

    def identity(self) -> dict[str, Any]:
        """The served model's name on this server (``base_url``): another server is another model."""
        return {**super().identity(), "base_url": self.base_url}

    # -- HTTP -------------------------------------------------------------------------------------

    def _send(self, url: str, payload: dict[str, Any]) -> tuple[Any, str | None]:
        """One attempt within the adaptive limit: the response, or what went wrong on the wire."""
        httpx = self._httpx
        ticket, response = self.limit.acquire(), None
        try:
            response = self._client.post(url, json=payload)
            return response, None
        except httpx.TimeoutException:
            return None, f"timed out (timeout_s={self.options.timeout_s:g})"
        except httpx.TransportError as exc:
            return None, f"connection error ({type(exc).__name__}: {exc})"
        finally:
            self.limit.release(ticket, response is not None and response.status_code in (429, 503))

    def _post(self, path: str, payload: dict[str, Any]) -> _Outcome:
        """POST with retries (see the module docstring); never raises for HTTP or network errors."""
        if self._client is None:
            raise BackendError("the openai generator is closed")
        url = f"{self.base_url}/{path}"
        shown = f"{public_url(self.base_url)}/{path}"  # what messages name: no credentials, no query
        tries = self.options.max_retries + 1
        status: int | None = None
        for attempt in range(1, tries + 1):
            delay = self.options.backoff_s * 2 ** (attempt - 1)
            response, problem = self._send(url, payload)
            if response is not None:
                status = response.status_code
                if 200 <= status < 300:
                    try:
                        return _Outcome(response.json(), None, attempt, status)
                    except ValueError:
                        return _Outcome(None, f"POST {shown}: HTTP {status} with a body that is not "
                                        f"JSON: {response.text[:200]!r}", attempt, status)
                problem = f"HTTP {status} {response.reason_phrase}: {_detail(response)}"
                if status != 429 and status < 500:
                    done = f"{attempt} attempt" + ("s" if attempt > 1 else "")
                    return _Outcome(None, f"POST {shown}: {problem} (not retried; {done})", attempt, status)
                asked = parse_retry_after(response.headers.get("retry-after"))
                delay = delay if asked is None else asked
            if attempt == tries:
                break
            log.warning("POST %s: %s; retry %d/%d in %.2f s", shown, problem, attempt,
                        tries - 1, delay)
            self._sleep(delay)
        return _Outcome(None, f"POST {shown}: {problem}; gave up after {tries} attempts", tries, status)

    # -- generation -------------------------------------------------------------------------------

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        """Generations in input order; prompt ``i`` is sent with seed ``generation.seed + i``.
        ``latency_s`` is each request's own wall time, retries included. A prompt whose messages
        hold a special token's text goes to ``/completions`` as token ids (:meth:`_literal_ids`)."""
        if self._client is None:
            raise BackendError("the openai generator is closed")
        if not prompts:
            return []
        literal = self._literal_ids(prompts)

        def one(index: int) -> Generation:
            ids = literal.get(index)
            if ids is None:
                return self._chat(index, prompts[index])
            return ids if isinstance(ids, Generation) else self._complete(index, ids)

        return list(self._pool.map(one, range(len(prompts))))

    def _literal_ids(self, prompts: Sequence[ChatPrompt]) -> dict[int, list[int] | Generation]:
        """Token ids of each prompt whose messages hold a special token's text (``<|im_start|>``
        in a passage), rendered and encoded locally so that text stays plain text (issue 64): sent
        as chat messages, the server's template and tokenizer would read it as chat markup. Needs
        the local tokenizer scoring uses; without one, every prompt goes as chat messages
        (docs/running.md says so). A prompt ragray cannot encode so gets its error."""
        tok = self._prompt_tokenizer()
        if tok is None:
            return {}
        out: dict[int, list[int] | Generation] = {}
        for i in [i for i, p in enumerate(prompts) if any(has_special_text(tok, m.content) for m in p)]:
            try:
                out[i] = encode_rendered(tok, render_prompt(tok, prompts[i]))
            except (BackendError, ValueError) as exc:  # ValueError: the template refuses the messages
                out[i] = Generation("", 0, 0, 0.0, error=str(exc))
        return out

    def _prompt_tokenizer(self) -> Any:
        """The local tokenizer (:meth:`_scoring_tokenizer`), or None where there is none or it has
        no chat template (looked for once)."""
        if self._no_tokenizer is None:
            try:
                tok = self._scoring_tokenizer()
                self._no_tokenizer = "" if getattr(tok, "chat_template", None) else "it has no chat template"
            except (BackendError, MissingDependencyError) as exc:
                self._no_tokenizer = str(exc)
            if self._no_tokenizer:
                log.info("openai: prompts go to the server as chat messages, whose template may read special "
                         "tokens' text in them as chat markup (no local tokenizer: %s)", self._no_tokenizer)
        return None if self._no_tokenizer else self._tok

    def _sampling(self, index: int) -> dict[str, Any]:
        return {"model": self.config.model, "temperature": self.config.temperature,
                "max_tokens": self.config.max_tokens, "seed": self.config.seed + index}

    def _chat(self, index: int, prompt: ChatPrompt) -> Generation:
        payload = {"messages": [{"role": m.role, "content": m.content} for m in prompt], **self._sampling(index)}
        return self._generation("chat/completions", payload, lambda choice: choice["message"].get("content"))

    def _complete(self, index: int, token_ids: list[int]) -> Generation:
        """A generation from ``/completions`` with the prompt as token ids (vLLM's server takes them)."""
        out = self._generation("completions", {"prompt": token_ids, **self._sampling(index)}, lambda c: c["text"])
        if out.error:  # say why a chat run posted /completions
            return dataclasses.replace(out, error=f"{out.error} (a prompt whose messages hold a special token's "
                                                  f"text goes to /completions as token ids, so it stays plain text)")
        return out

    def _generation(self, path: str, payload: dict[str, Any], content: Callable[[dict[str, Any]], Any]) -> Generation:
        began = time.perf_counter()
        out = self._post(path, payload)
        latency = time.perf_counter() - began
        if out.body is None:
            return Generation("", 0, 0, latency, error=out.error)
        try:
            text = content(out.body["choices"][0]) or ""
            usage = out.body.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens") or 0)
            completion_tokens = int(usage.get("completion_tokens") or 0)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            error = f"POST {public_url(self.base_url)}/{path}: unexpected response {str(out.body)[:200]}"
            return Generation("", 0, 0, latency, error=error)
        return Generation(str(text).strip(), prompt_tokens, completion_tokens, latency)

    # -- scoring ----------------------------------------------------------------------------------

    def _scoring_tokenizer(self) -> Any:
        if self._tok is None:
            spec = self.options.tokenizer or self.config.model
            try:
                self._tok = _load_tokenizer(os.path.realpath(resolve_generator_model(spec)))  # one key a folder
            except (OSError, ValueError) as exc:
                raise BackendError(
                    f"{_CANNOT_SCORE} without a local tokenizer: '{spec}' did not load ({exc}); "
                    f"set generation.openai.tokenizer to the served model's tokenizer (path or hub id)"
                ) from exc
        return self._tok

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        """Summed natural-log probability of each answer's tokens after its rendered prompt, from
        ``/completions`` with ``echo`` + ``logprobs``; an empty answer scores 0.0.

        Raises :class:`BackendError` when the endpoint cannot score (no such endpoint, no prompt
        log-probabilities in the response) or rejects a request (HTTP 4xx, e.g. too long). A
        request that still fails after its retries (timeouts, 5xx, 429) scores NaN: unmeasured.
        """
        if len(prompts) != len(answers):
            raise ValueError(f"score: {len(prompts)} prompts but {len(answers)} answers")
        scored = [i for i, answer in enumerate(answers) if answer]
        jobs: dict[int, tuple[list[int], int]] = {}
        if scored:
            tok = self._scoring_tokenizer()
            try:
                texts = [render_prompt(tok, prompts[i]) for i in scored]
            except ValueError as exc:  # the tokenizer has no chat template
                raise BackendError(f"{_CANNOT_SCORE}: cannot render the prompt ({exc})") from exc
            for i, (ids, answer_ids) in zip(scored, encode_scored(tok, texts, [answers[i] for i in scored])):
                jobs[i] = (ids + answer_ids, len(ids))
        scores = [0.0] * len(prompts)
        if jobs:
            values = self._pool.map(lambda job: self._score_one(*job), jobs.values())
            for i, value in zip(jobs, values):
                scores[i] = value
        return scores

    def scoring_problem(self) -> str | None:
        """Scores a two-word answer once (cached): None when the endpoint returned its prompt
        log-probabilities, else what stood in the way (no ``/completions``, no ``echo``, no local
        tokenizer, no answer after the retries)."""
        if self._probed is None:
            try:
                (value,) = self.logprobs([(Message("user", "Reply with OK."),)], ["OK"])
                problem = None if math.isfinite(value) else (
                    f"{_CANNOT_SCORE}: the probe POST {public_url(self.base_url)}/completions got no answer after "
                    f"{self.options.max_retries + 1} attempts")
            except (BackendError, MissingDependencyError) as exc:
                problem = str(exc)
            self._probed = (problem,)
        return self._probed[0]

    #: top log-probabilities per answer position that jsd mode asks the endpoint for (vLLM's
    #: server allows up to its ``max_logprobs``, 20 by default; OpenAI's legacy API 5)
    jsd_top_n: ClassVar[int] = 20

    def divergence_problem(self) -> str | None:
        return self.scoring_problem()

    def score_divergence(self, reference: ChatPrompt, prompts: Sequence[ChatPrompt], answer: str
                         ) -> list[tuple[float, float]]:
        """``(log p(answer | prompt), Σ JSD)`` per prompt from ``/completions`` with ``echo`` and
        ``logprobs: jsd_top_n`` (:func:`ragray.generation.divergence.jsd_top_n`: top-N JSD, a lower
        bound of the full-vocabulary one). A request that fails after its retries gives NaN."""
        from ragray.generation.divergence import jsd_top_n

        if not answer:
            return [(0.0, 0.0)] * len(prompts)
        tok = self._scoring_tokenizer()
        texts = [render_prompt(tok, prompt) for prompt in (reference, *prompts)]
        jobs = [(ids + answer_ids, len(ids)) for ids, answer_ids in encode_scored(tok, texts, [answer] * len(texts))]
        got = list(self._pool.map(lambda job: self._score_rows(*job, top_n=self.jsd_top_n), jobs))
        ref = got[0][1]
        nan = float("nan")
        return [(total, jsd_top_n(ref, rows) if rows is not None and ref is not None else nan)
                for total, rows in got[1:]]

    def _score_one(self, token_ids: list[int], start: int) -> float:
        return self._score_rows(token_ids, start)[0]

    def _score_rows(self, token_ids: list[int], start: int, top_n: int = 0
                    ) -> tuple[float, list[dict[str, float]] | None]:
        """The answer's summed log-prob and, with ``top_n``, the endpoint's top log-probs per
        answer position (None where it sent none)."""
        payload = {"model": self.config.model, "prompt": token_ids, "echo": True, "logprobs": max(1, top_n),
                   "max_tokens": 1, "temperature": 0.0}
        out = self._post("completions", payload)
        if out.body is None:
            if out.status in (404, 405, 501):
                raise BackendError(f"{_CANNOT_SCORE}: {out.error}")
            if out.status is not None and out.status < 500 and out.status != 429:
                raise BackendError(f"score: {out.error}")
            log.warning("score: %s; recording NaN", out.error)
            return float("nan"), None
        top: list[dict[str, float]] | None = None
        try:
            logprobs = out.body["choices"][0]["logprobs"]
            values = [float(v) for v in logprobs["token_logprobs"][start : len(token_ids)]]
            if top_n:
                top = [{str(k): float(v) for k, v in (row or {}).items()}
                       for row in (logprobs.get("top_logprobs") or [])[start : len(token_ids)]] or None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            values = []
        if len(values) != len(token_ids) - start:
            raise BackendError(
                f"{_CANNOT_SCORE}: POST {public_url(self.base_url)}/completions returned no prompt "
                f"log-probabilities for the answer (it needs echo=true with logprobs, which vLLM's "
                f"server supports and chat-only APIs do not)"
            )
        return float(sum(values)), top

    def close(self) -> None:
        """Close the HTTP connection pool (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            client.close()
