"""``transformers``: a Hugging Face causal LM run in-process (CPU or GPU), with exact prefix reuse.

The generator loads the model, renders and tokenizes prompts and answers, and hands token ids to its
engine (:mod:`~ragray.generation.transformers.engine`: the CPU engine or the GPU engine, chosen once,
for every way a generator is built). The prompts of one call are prefilled over their prefix trie
(:mod:`~ragray.generation.transformers.plan`): each reuses the KV of the longest prefix it shares with
an already-prefilled prompt and runs only its own suffix (``generation.transformers.prefix_reuse``;
the ablations of a question share everything up to the removed passage).

Decoding is greedy at temperature 0. Above 0, prompt ``i`` of a call samples from its own
``torch.Generator`` seeded with ``seed + i``, so a call is reproducible and a prompt's sample does
not depend on the other rows of its batch.
"""

from __future__ import annotations

import gc
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ragray._imports import require
from ragray.config import GenerationConfig
from ragray.encoders import resolve_device
from ragray.errors import BackendError
from ragray.generation.base import GENERATORS, ChatPrompt, Generation, Generator, too_long_message
from ragray.generation.chat_tokens import encode_many, encode_scored, render_prompt
from ragray.generation.engine_counts import EngineCounts
from ragray.generation.packaged import resolve_generator_model
from ragray.generation.transformers.cpu_features import auto_bf16_on_cpu
from ragray.generation.transformers.cpu_engine import CpuEngine
from ragray.generation.transformers.engine import Engine, ScoreJob
from ragray.generation.transformers.gpu_engine import GpuEngine
from ragray.generation.transformers.kv import supports_prefix_reuse
from ragray.generation.transformers.plan import trie_tokens
from ragray.generation.transformers.strategy import GPU_PLANNED_IN_FLIGHT, resolve_strategy
from ragray.model_loads import MODEL_LOADS, check_materialized
from ragray.progress import calls_done

__all__ = ["TransformersGenerator", "make_engine"]

log = logging.getLogger(__name__)
#: what loads and from where, shown by default (the CLI and the Python API give it a handler)
loads = logging.getLogger("ragray.loads")


def _torch_dtype(torch: Any, name: str, device: str) -> Any:
    """``generation.dtype``; ``auto`` is bf16 on CUDA and fp32 on a CPU (bf16 there only with
    ``RAGRAY_CPU_BF16=1``: :mod:`~ragray.generation.transformers.cpu_features` says why)."""
    if name == "auto":
        on_cuda, bf16_cpu = device.startswith("cuda"), device == "cpu" and auto_bf16_on_cpu()
        return torch.bfloat16 if on_cuda or bf16_cpu else torch.float32
    return getattr(torch, name)


@GENERATORS.register("transformers")
class TransformersGenerator(Generator):
    """A causal LM loaded once with ``AutoModelForCausalLM`` (eval mode, no gradients)."""

    name = "transformers"
    reports_calls = True  # each prompt as it is scored or its decoding ends (ragray.progress)

    def __init__(
        self, model: Any, tokenizer: Any, config: GenerationConfig, *, path: str, device: str
    ) -> None:
        """A generator on a built model: moved to ``device`` in eval mode, run by the engine its
        strategy picks (which prepares the model: same numbers). ragray sets the process's threads
        only for a model it loads itself (:meth:`from_config`), never for one handed in."""
        self._torch = require("torch", extra="generate", feature="the transformers generator")
        self._tok = tokenizer
        self.config = config
        self.model_path = path
        self.device = device
        model.to(device).eval()
        self._eos = _eos_ids(model, tokenizer)
        limit = getattr(model.config.get_text_config(decoder=True), "max_position_embeddings", None)
        self.max_positions: int | None = int(limit) if limit else None
        #: forward passes, host waits, tokens computed / the exact-reuse minimum / padding (engine_counts)
        self.counts = EngineCounts()
        pad = getattr(tokenizer, "pad_token_id", None)
        self._engine = make_engine(model, self._torch, device, config, self._eos, self.counts,
                                   pad if isinstance(pad, int) else None)
        self._model = model
        #: cpu | gpu: the engine that runs this generator's calls
        self.strategy = self._engine.name
        #: decoding forward passes and the tokens they produced, over this generator's life
        self.decode_stats = self._engine.decoder.stats
        if self._engine.questions_in_flight:
            self.default_questions_in_flight = self._engine.questions_in_flight

    @classmethod
    def planned_questions_in_flight(cls, config: GenerationConfig, on_gpu: bool = False) -> int:
        """The gpu strategy's questions in flight before the model loads (sized from memory after)."""
        device = "cuda" if on_gpu and config.device == "auto" else config.device
        return GPU_PLANNED_IN_FLIGHT if resolve_strategy(config.transformers.strategy, device) == "gpu" else 1

    @classmethod
    def from_config(cls, config: GenerationConfig) -> TransformersGenerator:
        """Load ``config.model`` and build the generator on its device, one load at a time in this
        process (:mod:`ragray.model_loads`)."""
        with MODEL_LOADS:
            return cls._load(config)

    @classmethod
    def _load(cls, config: GenerationConfig) -> TransformersGenerator:
        torch = require("torch", extra="generate", feature="the transformers generator")
        transformers = require("transformers", extra="generate", feature="the transformers generator")
        device = resolve_device(config.device)
        if device == "cpu":
            # ragray loads this model, so it sets the process's threads (a model a user hands in
            # keeps the user's): the model is the bottleneck on CPU, so it gets the whole CPUs Ray
            # reserved for this worker (a sweep trial's cpus_per_trial), else every core this
            # process may use (a driver; a Serve replica's fractional num_cpus is a weight, not
            # cores), unless generation.transformers.threads says
            from ragray.worker import reserved_cpus

            torch.set_num_threads(config.transformers.threads or reserved_cpus() or len(os.sched_getaffinity(0)))
        path = resolve_generator_model(config.model)
        dtype = _torch_dtype(torch, config.dtype, device)
        loads.info("loading the generator %s from %s on %s (%s)", config.model, path, device, str(dtype).removeprefix("torch."))
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(path)
            model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        except (OSError, ValueError) as exc:
            raise BackendError(
                f"generation.model: could not load '{config.model}' (resolved to {path}) with "
                f"transformers: {exc}"
            ) from exc
        log.info("transformers generator %s on %s (%s)", path, device, dtype)
        generator = cls.from_model(model, tokenizer, config, path=path, device=device)
        check_materialized(model, f"generation.model '{config.model}'")
        return generator

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, config: GenerationConfig, *, path: str,
                   device: str) -> TransformersGenerator:
        """A generator on a model already built (the same as the constructor)."""
        return cls(model, tokenizer, config, path=path, device=device)

    @property
    def precision(self) -> str:
        return str(self._model.dtype).removeprefix("torch.")

    def resolved_settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"device": self.device, "dtype": self.precision, "strategy": self.strategy}
        if self.device == "cpu":
            out["threads"] = self._torch.get_num_threads()
        return {**out, **self._engine.settings()}  # the engine's own sizes after the common keys

    def engine_counts(self) -> dict[str, float]:
        """Running totals of the proxies (:mod:`~ragray.generation.engine_counts`), decoding included."""
        out = self.counts.snapshot()
        out["forward_passes"] += self.decode_stats["passes"]
        out["host_syncs"] += self.decode_stats["syncs"]
        return out

    def _count_minimum(self, seqs: dict[int, list[int]], caps: dict[int, int]) -> None:
        """Add the tokens exact prefix reuse of ``seqs`` would compute (the trie's nodes)."""
        self.counts.add(tokens_minimum=trie_tokens(seqs, caps))

    @property
    def model_id(self) -> str:
        return self.config.model

    @property
    def model(self) -> Any:
        """The loaded ``PreTrainedModel`` (``None`` once closed)."""
        return self._model

    @property
    def tokenizer(self) -> Any:
        return self._tok

    @property
    def engine(self) -> Any:
        """The :class:`~ragray.generation.transformers.engine.Engine` that runs the model."""
        return self._engine

    def with_config(self, config: GenerationConfig) -> TransformersGenerator:
        """Another generator on the same loaded model with other decoding options (temperature,
        seed, max_tokens, ``transformers``); ``model``, ``dtype`` and ``device`` are not re-read."""
        self._check_open()
        return type(self)(self._model, self._tok, config, path=self.model_path, device=self.device)

    def prompt_token_ids(self, prompts: Sequence[ChatPrompt]) -> list[list[int]]:
        """The token ids each prompt is run with: its messages rendered by the model's chat
        template (generation prompt added), encoded without a second BOS, a special token's text
        in a message as plain text (:mod:`~ragray.generation.chat_tokens`)."""
        return encode_many(self._tok, [render_prompt(self._tok, p) for p in prompts])

    def _check_open(self) -> None:
        if self._model is None:
            raise BackendError("the transformers generator is closed")

    # -- the Generator interface -------------------------------------------------------------------

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        """Generations in input order. ``latency_s`` of each prompt is the wall time of its decode
        group (prefills + batched decode) divided by the group's size."""
        self._check_open()
        token_ids = self.prompt_token_ids(prompts)
        results: dict[int, Generation] = {}
        budgets: dict[int, int] = {}
        for i, ids in enumerate(token_ids):
            room = self.config.max_tokens if self.max_positions is None else self.max_positions - len(ids)
            if room < 1:
                results[i] = Generation("", len(ids), 0, 0.0, error=too_long_message(len(ids), self.max_positions))
            budgets[i] = min(self.config.max_tokens, room)
        live = {i: ids for i, ids in enumerate(token_ids) if i not in results}
        calls_done(len(results))  # too long: answered with an error at once
        self._count_minimum(live, {i: len(ids) - 1 for i, ids in live.items()})
        with self._engine.lock, self._torch.inference_mode():
            decoded = self._engine.generate(live, budgets)
        for i, (tokens, seconds) in decoded.items():
            text = self._tok.decode([t for t in tokens if t not in self._eos], skip_special_tokens=True).strip()
            results[i] = Generation(text, len(token_ids[i]), len(tokens), seconds)
        return [results[i] for i in range(len(prompts))]

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        """Summed natural-log probability of each answer's tokens after its rendered prompt
        (the assistant turn, without an end-of-turn token); an empty answer scores 0.0."""
        job = self._score_job(prompts, answers)
        with self._engine.lock, self._torch.inference_mode():
            sums = self._engine.score_sums(job)
        return [sums.get(i, 0.0) for i in range(len(prompts))]

    def score_divergence(self, reference: ChatPrompt, prompts: Sequence[ChatPrompt], answer: str
                         ) -> list[tuple[float, float]]:
        """``(log p(answer | prompt), Σ JSD)`` per prompt over the full vocabulary (see
        :meth:`Generator.score_divergence`); the reference is scored in the same call, first, so
        the prompts reuse its prefix. An empty answer gives ``(0.0, 0.0)``."""
        if not answer or not prompts:
            return [(0.0, 0.0)] * len(prompts)
        torch = self._torch
        totals: dict[int, Any] = {}  # on the device until the one read at the end
        jsds: dict[int, Any] = {}
        reference_rows: list[Any] = []  # the reference's full-vocabulary log-softmax, once scored
        waiting: dict[int, Any] = {}  # prompts scored before the reference (a plan may reorder rows)

        def divergence(lp: Any) -> Any:
            # JSD(P, Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M), M = ½(P + Q), per position, in nats
            ref = reference_rows[0]
            m = torch.logaddexp(ref, lp) - math.log(2.0)
            return (0.5 * ((ref.exp() * (ref - m)).sum(-1) + (lp.exp() * (lp - m)).sum(-1))).clamp_min(0).sum()

        def store(i: int, lp: Any, target: Any) -> None:
            # each prompt's vocabulary rows are reduced to one number as they arrive: only the
            # reference's are held for the call, not every prompt's
            totals[i] = lp.gather(1, target[:, None]).sum()
            if i == 0:
                reference_rows.append(lp)
                for j in list(waiting):
                    jsds[j] = divergence(waiting.pop(j))
            elif reference_rows:
                jsds[i] = divergence(lp)
            else:
                waiting[i] = lp

        job = replace(self._score_job([reference, *prompts], [answer] * (len(prompts) + 1)), first=0)
        with self._engine.lock, torch.inference_mode():  # one call, reference first: the prompts reuse its prefix
            self._engine.score_rows(job, store)
            self.counts.add(host_syncs=1)  # every prompt's log-prob and divergence read at once
            order = range(1, len(prompts) + 1)
            values = torch.stack([totals[i] for i in order] + [jsds[i] for i in order]).tolist()
        return list(zip(values[: len(prompts)], values[len(prompts) :]))

    def divergence_problem(self) -> str | None:
        return None

    def answer_length(self, prompt: ChatPrompt, answer: str) -> int | None:
        if not answer:
            return 0
        text = render_prompt(self._tok, prompt)
        return len(encode_scored(self._tok, [text], [answer])[0][1])

    def _score_job(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> ScoreJob:
        """Each non-empty answer's ids after its rendered prompt (an empty one scores 0 and is
        reported done at once); too long for the model is an error."""
        self._check_open()
        if len(prompts) != len(answers):
            raise ValueError(f"score: {len(prompts)} prompts but {len(answers)} answers")
        fulls: dict[int, list[int]] = {}
        prompt_lens: dict[int, int] = {}
        scored = [i for i, answer in enumerate(answers) if answer]
        calls_done(len(answers) - len(scored))
        texts = [render_prompt(self._tok, prompts[i]) for i in scored]
        for i, (ids, answer_ids) in zip(scored, encode_scored(self._tok, texts, [answers[i] for i in scored])):
            fulls[i] = ids + answer_ids
            prompt_lens[i] = len(ids)
            if self.max_positions is not None and len(fulls[i]) > self.max_positions:
                raise BackendError(
                    f"score: prompt {i} and its answer have {len(fulls[i])} tokens; "
                    f"the model takes at most {self.max_positions}"
                )
        caps = {i: n - 1 for i, n in prompt_lens.items()}  # the answer's logits start at the prompt's end
        keep = {i: len(full) - prompt_lens[i] + 1 for i, full in fulls.items()}
        self._count_minimum(fulls, caps)
        return ScoreJob(fulls, prompt_lens, caps, keep)

    def close(self) -> None:
        """Release the weights and every cache that holds them or KV built from them (the GPU
        engine's padded prefill and its carried KV, the fixed-shape decoder), then the CUDA cache."""
        if self._model is None:
            return
        with self._engine.lock:
            self._model = None
            self._engine.close()
        gc.collect()
        if self.device.startswith("cuda"):
            self._torch.cuda.empty_cache()


def _eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        value = getattr(source, "eos_token_id", None)
        ids.update([value] if isinstance(value, int) else value or [])
    return frozenset(ids)


def make_engine(model: Any, torch: Any, device: str, config: GenerationConfig, eos: frozenset[int],
                counts: EngineCounts, pad_id: int | None) -> Engine:
    """The one place an engine is chosen: the GPU engine where the strategy (``auto``: the device)
    says gpu and every layer is global attention (padded passes cut and re-stack KV), else the CPU
    engine (a preset: the settings may choose any prefill and decoder). The engine prepares the
    model it runs (same numbers either way)."""
    if resolve_strategy(config.transformers.strategy, device) == "gpu" and supports_prefix_reuse(model.config):
        return GpuEngine(model, torch, device, config, eos, counts, pad_id=pad_id)
    return CpuEngine(model, torch, device, config, eos, counts, pad_id=pad_id)
