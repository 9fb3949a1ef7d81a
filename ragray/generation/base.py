"""The generator interface: batch generation and log-probability scoring behind one ABC.

Every backend (transformers, vLLM, any OpenAI-compatible endpoint) takes chat prompts — tuples of
(role, content) messages — and renders them with the model's own chat template. Decoding is
deterministic by default (temperature 0, a fixed seed), so a changed answer under ablation is
caused by the ablation, not by sampling noise.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, TypeVar

from ragray.registry import Component, Registry

R = TypeVar("R")


__all__ = ["Message", "ChatPrompt", "Generation", "Generator", "GeneratorProxy", "GENERATORS", "too_long",
           "too_long_message"]


class Message(NamedTuple):
    role: str  # "system" | "user" | "assistant"
    content: str


ChatPrompt = tuple[Message, ...]


#: how a backend says a prompt does not fit the model's context (:func:`too_long_message`)
_TOO_LONG = re.compile(r"prompt has (\d+) tokens; the model takes at most (\d+)")


def too_long_message(prompt_tokens: int, limit: int, setting: str | None = None) -> str:
    """The error of a prompt over the model's context, in the one wording :func:`too_long` reads
    (``setting``: the config key that sets the limit, when there is one)."""
    why = f" ({setting})" if setting else ""
    return f"prompt has {prompt_tokens} tokens; the model takes at most {limit}{why}"


def too_long(error: str | None) -> tuple[int, int] | None:
    """``(prompt_tokens, limit)`` when ``error`` says a prompt did not fit the context, else None."""
    m = _TOO_LONG.search(error or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass(frozen=True)
class Generation:
    """One completion. ``error`` is set (and ``text`` empty) when the call failed for good."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Generator(Component):
    """A text generator, built (and loaded) from its own ``generation`` config section."""

    #: True for simulation mode's generator (answers by design, no model): runs are marked simulated
    simulated: ClassVar[bool] = False
    #: False for generators whose answers cost nothing and are not a model's (scripted, simulated):
    #: the persistent call cache (:mod:`ragray.cache.calls`) leaves them alone
    cacheable: ClassVar[bool] = True
    #: questions whose prompts the pipeline keeps with this backend at once when
    #: ``execution.max_questions_in_flight`` is unset (endpoints: many; one local model: one)
    default_questions_in_flight: ClassVar[int] = 1
    #: True when the backend reports each prompt as it finishes (:func:`ragray.progress.calls_done`);
    #: for the others the ablation engine reports a call's prompts when it returns
    reports_calls: ClassVar[bool] = False
    #: True when calls from many threads may run at once (endpoints: each request waits on the
    #: server); False for one in-process engine: questions in flight then have their calls merged
    #: into one engine call (:mod:`ragray.pipeline.in_flight`)
    concurrent_calls: ClassVar[bool] = False

    @classmethod
    def planned_questions_in_flight(cls, config: Any, on_gpu: bool = False) -> int:
        """Questions in flight before a generator of this class is built (a Ray Data batch's
        size), from its ``generation`` config and whether its workers hold a GPU."""
        return cls.default_questions_in_flight

    @classmethod
    def simulation_marker(cls, model: str) -> dict[str, Any] | bool:
        """What ``summary.json`` says of a run by a :attr:`simulated` generator on ``model``."""
        return cls.simulated

    @property
    @abstractmethod
    def model_id(self) -> str:
        """What the run records as the model (a hub id, a path or a packaged model name)."""

    @abstractmethod
    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        """One :class:`Generation` per prompt, in order. Prompts that share a token prefix
        (the ablations of one question) should be passed together: backends reuse the prefix."""

    @abstractmethod
    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        """Teacher-forced log-probability (natural log, summed over the answer's tokens) of each
        ``answers[i]`` as the assistant reply to ``prompts[i]``; one forward pass, no sampling."""

    def score(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        """Deprecated name of :meth:`logprobs` (``score`` is answer quality: ``ragray.score``)."""
        import warnings

        warnings.warn("Generator.score is deprecated: call Generator.logprobs (the same log-probabilities)",
                      DeprecationWarning, stacklevel=2)
        return self.logprobs(prompts, answers)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A generator written against the old name (it defines ``score``, not ``logprobs``) keeps
        working: its ``score`` is its ``logprobs``, with a deprecation warning."""
        super().__init_subclass__(**kwargs)
        inherited = getattr(cls, "logprobs", None)
        if "score" in cls.__dict__ and getattr(inherited, "__isabstractmethod__", False):
            import warnings

            warnings.warn(f"{cls.__name__} defines score(): rename it logprobs() (Generator.score is deprecated)",
                          DeprecationWarning, stacklevel=2)
            cls.logprobs = cls.__dict__["score"]

    def score_divergence(self, reference: ChatPrompt, prompts: Sequence[ChatPrompt], answer: str
                         ) -> list[tuple[float, float]]:
        """Per prompt: ``(log p(answer | prompt), JSD)``, where JSD is the Jensen–Shannon divergence
        (nats) between the next-token distributions under ``reference`` and under the prompt at
        each of the answer's positions (teacher-forced), summed over the positions (ARC-JSD,
        arXiv 2505.16415). Backends without next-token distributions raise :class:`BackendError`
        (:meth:`divergence_problem` says why beforehand)."""
        from ragray.errors import BackendError

        raise BackendError(self.divergence_problem() or f"{self.name}: score_divergence is not implemented")

    def divergence_problem(self) -> str | None:
        """Why :meth:`score_divergence` cannot work with this backend, or None when it can."""
        return f"the {self.name} backend does not give next-token distributions (influence.mode jsd)"

    def answer_length(self, prompt: ChatPrompt, answer: str) -> int | None:
        """How many tokens :meth:`logprobs` scores for ``answer`` after ``prompt`` (None: unknown)."""
        return None

    @property
    def precision(self) -> str | None:
        """The dtype the model computes in (``float32``, ``bfloat16`` ...), where this process
        knows it; None for a remote endpoint or a backend without a model."""
        return None

    def identity(self) -> dict[str, Any]:
        """Everything besides the prompt and the sampling settings that decides this generator's
        outputs: the call cache's key (a model re-saved in place, another dtype or another server
        is another identity). A backend with local weights (``model_path``) adds their files'
        fingerprint (names, sizes, modification times)."""
        out = {"backend": self.name, "model": self.model_id, "precision": self.precision}
        path = getattr(self, "model_path", None)
        if path:
            from ragray.encoders import model_identity

            out["files"] = model_identity(path)
        return out

    def resolved_settings(self) -> dict[str, Any]:
        """Settings this backend resolved when it opened, as JSON (the device its model runs on,
        vLLM's engine options, an endpoint's learned concurrency): what ``auto`` became, recorded
        in the run's ``summary.json``. Empty by default."""
        return {}

    def scoring_problem(self) -> str | None:
        """Why :meth:`logprobs` cannot work with this backend, or None when it can (the default:
        local models score). ``influence.mode: auto`` asks once per process and generates
        instead when there is a problem; endpoints override it with a probe."""
        return None

    def engine_counts(self) -> dict[str, float]:
        """Running totals of what this generator's engine did (forward passes, host waits, tokens
        computed, the exact-reuse minimum, padding: :mod:`~ragray.generation.engine_counts`), as
        seen by the calling question; empty for backends that do not count (endpoints, vLLM)."""
        return {}

    def aside(self, call: Callable[[], R]) -> R:
        """Run ``call``, heavy work of a question that is not a model call (encoding its answer
        metrics), the way this generator's calls run: with questions in flight, without the turn,
        so the others keep sending their calls (:mod:`ragray.pipeline.in_flight`); else at once."""
        return call()

    def close(self) -> None:
        """Release models, engines and connections (idempotent)."""

    def __enter__(self) -> Generator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


GENERATORS: Registry[Generator] = Registry("generator")  # built-ins: ragray.catalog


class GeneratorProxy(Generator):
    """A generator that hands every call to ``inner`` (base of the wrappers that add one thing:
    the call cache, taking turns, a lock); it says what ``inner`` says of itself."""

    def __init__(self, inner: Generator) -> None:
        self.inner = inner
        self.name = inner.name
        self.cacheable = inner.cacheable
        self.concurrent_calls = inner.concurrent_calls
        self.default_questions_in_flight = inner.default_questions_in_flight
        self.reports_calls = inner.reports_calls

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def precision(self) -> str | None:
        return self.inner.precision

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def resolved_settings(self) -> dict[str, Any]:
        return self.inner.resolved_settings()

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        return self.inner.generate(prompts)

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        return self.inner.logprobs(prompts, answers)

    def scoring_problem(self) -> str | None:
        return self.inner.scoring_problem()

    def score_divergence(self, reference: ChatPrompt, prompts: Sequence[ChatPrompt], answer: str
                         ) -> list[tuple[float, float]]:
        return self.inner.score_divergence(reference, prompts, answer)

    def divergence_problem(self) -> str | None:
        return self.inner.divergence_problem()

    def answer_length(self, prompt: ChatPrompt, answer: str) -> int | None:
        return self.inner.answer_length(prompt, answer)

    def engine_counts(self) -> dict[str, float]:
        return self.inner.engine_counts()

    def aside(self, call: Callable[[], R]) -> R:
        return self.inner.aside(call)

    def close(self) -> None:
        self.inner.close()
