"""``transformers``: a Hugging Face causal LM run in-process (CPU or GPU), with exact prefix reuse.

The prompts of one :meth:`TransformersGenerator.generate` call are prefilled in the order of
:func:`~ragray.generation.kv_prefix.plan_prefills`: each reuses the KV cache of the longest
prefix it shares with an already-prefilled prompt and runs only its own suffix through the model
(``generation.transformers.prefix_reuse``; the ablations of a question share everything up to the
removed passage). Groups of ``generation.transformers.batch_size`` prompts are then decoded together:
their caches are stacked right-aligned (left padding) and every row keeps its own position ids.

Decoding is greedy at temperature 0. Above 0, prompt ``i`` of a call samples from its own
``torch.Generator`` seeded with ``seed + i``, so a call is reproducible and a prompt's sample does
not depend on the other rows of its batch.
"""

from __future__ import annotations

import gc
import inspect
import logging
import math
import os
import time
from collections.abc import Sequence
from typing import Any

from ragray._imports import require
from ragray.config import GenerationConfig
from ragray.encoders import resolve_device
from ragray.errors import BackendError
from ragray.generation.base import GENERATORS, ChatPrompt, Generation, Generator, too_long_message
from ragray.generation.chat_tokens import encode_many, encode_scored, render_chat
from ragray.generation.decoding import BatchDecoder
from ragray.generation.drafts import DraftSource
from ragray.generation.attention import CONTINUATION, GQA_ATTENTION, PACKED, register_gqa_attention
from ragray.generation.kv_prefix import (
    KVLayers,
    Piece,
    PrefillStep,
    cache_layers,
    make_cache,
    plan_prefills,
    stack_pieces,
    supports_prefix_reuse,
)
from ragray.generation.packaged import resolve_generator_model
from ragray.generation.packed import (
    Packed,
    Span,
    Step,
    pack_spans,
    plan_groups,
    truncate,
    wave_plan,
)
from ragray.generation.batched import BatchedPrefill
from ragray.generation.cpu import native_bf16
from ragray.generation.engine_counts import EngineCounts
from ragray.generation.kv_prefix import prefill_token_count
from ragray.generation.row_chunks import chunk_rows
from ragray.generation.static_decode import StaticDecoder
from ragray.generation.strategy import GPU_PLANNED_IN_FLIGHT, GpuSizes, gpu_sizes, resolve_strategy
from ragray.model_loads import MODEL_LOADS, check_materialized
from ragray.progress import calls_done

__all__ = ["TransformersGenerator"]

log = logging.getLogger(__name__)
#: what loads and from where, shown by default (the CLI and the Python API give it a handler)
loads = logging.getLogger("ragray.loads")


def _torch_dtype(torch: Any, name: str, device: str) -> Any:
    """``generation.dtype``; ``auto`` is bf16 on CUDA and on CPUs with native bf16, else fp32."""
    if name == "auto":
        return torch.bfloat16 if device.startswith("cuda") or (device == "cpu" and native_bf16()) else torch.float32
    return getattr(torch, name)


@GENERATORS.register("transformers")
class TransformersGenerator(Generator):
    """A causal LM loaded once with ``AutoModelForCausalLM`` (eval mode, no gradients)."""

    name = "transformers"
    reports_calls = True  # each prompt as it is scored or its decoding ends (ragray.progress)

    def __init__(
        self, model: Any, tokenizer: Any, config: GenerationConfig, *, path: str, device: str
    ) -> None:
        self._torch = require("torch", extra="generate", feature="the transformers generator")
        self._model = model
        self._tok = tokenizer
        self.config = config
        self.model_path = path
        self.device = device
        # caches of sliding-window / recurrent layers cannot be cut or re-stacked: one row at a time
        self._global_attention = supports_prefix_reuse(model.config)
        self.prefix_reuse = config.transformers.prefix_reuse and self._global_attention
        self.batch_size = config.transformers.batch_size if self._global_attention else 1
        if config.transformers.prefix_reuse and not self.prefix_reuse:
            log.warning("%s has non-global attention layers: prefix reuse and batching are off", path)
        self._eos = self._eos_ids()
        # guessed tokens are verified against greedy predictions, with a custom mask on stacked caches
        self._drafting = bool(config.transformers.draft_tokens and config.temperature == 0 and self._global_attention)
        # ragray's attention function reads the continuation hint and packed spans; no other would
        self._continuation = getattr(model.config, "_attn_implementation", None) == GQA_ATTENTION
        self._packing = self._continuation and self.prefix_reuse and config.transformers.packed_prefill
        params = inspect.signature(model.forward).parameters
        self._decoder = BatchDecoder(model, self._torch, device, self._eos, config.temperature)
        # decoding forward passes and the tokens they produced, over this generator's life
        self.decode_stats = self._decoder.stats
        self._keep_arg = next((a for a in ("logits_to_keep", "num_logits_to_keep") if a in params), None)
        limit = getattr(model.config.get_text_config(decoder=True), "max_position_embeddings", None)
        self.max_positions: int | None = int(limit) if limit else None
        #: forward passes, host waits, tokens computed / the exact-reuse minimum / padding (engine_counts)
        self.counts = EngineCounts()
        #: cpu | gpu (strategy): how this generator batches its work on its device
        self.strategy = resolve_strategy(config.transformers.strategy, device)
        self.sizes: GpuSizes | None = None
        self._batched: BatchedPrefill | None = None
        self._static: StaticDecoder | None = None
        if self.strategy == "gpu" and self._global_attention:
            self._use_gpu_strategy(config)

    def _use_gpu_strategy(self, config: GenerationConfig) -> None:
        """Padded passes (:mod:`~ragray.generation.batched`), one decoding batch per call, many
        questions in flight; sizes from free device memory unless set (:mod:`~ragray.generation.strategy`)."""
        explicit = config.transformers.model_fields_set
        self.sizes = gpu_sizes(self._model, self._torch, self.device,
                               tokens_per_pass=config.transformers.tokens_per_pass,
                               batch_size=config.transformers.batch_size if "batch_size" in explicit else None)
        self.batch_size = self.sizes.decode_rows
        self.default_questions_in_flight = self.sizes.questions_in_flight
        self._packing = False
        static = config.transformers.static_decode
        if static if static is not None else self.device.startswith("cuda"):
            self._static = StaticDecoder(self._decoder, graphs=True)
            self._drafting = False
        pad = getattr(self._tok, "pad_token_id", None)
        self._batched = BatchedPrefill(
            self._model, self._torch, self.device, keep_arg=self._keep_arg,
            tokens_per_pass=self.sizes.tokens_per_pass, plan_tokens=self.sizes.plan_tokens, counts=self.counts,
            pad_id=pad if isinstance(pad, int) else min(self._eos, default=0))

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
        """A generator on a model already built: moved to ``device``, in eval mode, and set up for
        its strategy (the cpu strategy swaps in ragray's attention and row-blocked layers)."""
        model.to(device).eval()
        strategy = resolve_strategy(config.transformers.strategy, device)
        cpu_strategy = device == "cpu" and strategy == "cpu"
        # CPU: every masked call; CUDA (gpu strategy): decoding steps read the KV once (attention)
        ours = cpu_strategy or (device.startswith("cuda") and strategy == "gpu")
        if ours and getattr(model.config, "_attn_implementation", None) == "sdpa":
            try:  # same numbers, no per-step copy of the cache in batched decoding (kv_prefix)
                model.set_attn_implementation(register_gqa_attention())
            except (ImportError, AttributeError, ValueError) as exc:
                log.info("keeping sdpa attention: %s", exc)
        if cpu_strategy:  # norms and MLPs on cache-sized row blocks (row_chunks)
            chunk_rows(model)
        return cls(model, tokenizer, config, path=path, device=device)

    @property
    def precision(self) -> str:
        return str(self._model.dtype).removeprefix("torch.")

    def resolved_settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"device": self.device, "dtype": self.precision, "strategy": self.strategy}
        if self.device == "cpu":
            out["threads"] = self._torch.get_num_threads()
        if self._batched is not None:  # the pass size now (an out-of-memory retry shrinks it)
            out.update(tokens_per_pass=self._batched.tokens_per_pass, decode_rows=self.sizes.decode_rows,
                       questions_in_flight=self.sizes.questions_in_flight)
        return out

    def engine_counts(self) -> dict[str, float]:
        """Running totals of the proxies (:mod:`~ragray.generation.engine_counts`), decoding included."""
        out = self.counts.snapshot()
        out["forward_passes"] += self.decode_stats["passes"]
        out["host_syncs"] += self.decode_stats["syncs"]
        return out

    def _count_minimum(self, seqs: dict[int, list[int]], caps: dict[int, int]) -> None:
        """Add the tokens exact prefix reuse of ``seqs`` would compute (the trie's nodes)."""
        keys = list(seqs)
        ids = [seqs[k] for k in keys]
        self.counts.add(tokens_minimum=prefill_token_count(ids, plan_prefills(ids, max_reuse=[caps[k] for k in keys])))

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

    def with_config(self, config: GenerationConfig) -> TransformersGenerator:
        """Another generator on the same loaded model with other decoding options (temperature,
        seed, max_tokens, ``transformers``); ``model``, ``dtype`` and ``device`` are not re-read."""
        self._check_open()
        return type(self)(self._model, self._tok, config, path=self.model_path, device=self.device)

    # -- tokenization ---------------------------------------------------------------------------

    def _eos_ids(self) -> frozenset[int]:
        ids: set[int] = set()
        for source in (getattr(self._model, "generation_config", None), self._model.config, self._tok):
            value = getattr(source, "eos_token_id", None)
            ids.update([value] if isinstance(value, int) else value or [])
        return frozenset(ids)

    def prompt_token_ids(self, prompts: Sequence[ChatPrompt]) -> list[list[int]]:
        """The token ids each prompt is run with: its messages rendered by the model's chat
        template (generation prompt added), encoded without a second BOS (:mod:`chat_tokens`)."""
        return encode_many(self._tok, [render_chat(self._tok, p) for p in prompts])

    # -- model calls ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._model is None:
            raise BackendError("the transformers generator is closed")

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        # with the config, sliding-window models get their own layer types
        return DynamicCache(config=self._model.config)

    def _prefill(self, ids: Sequence[int], source: Any, reuse: int, keep: int) -> tuple[Any, Any]:
        """Run ``ids[reuse:]`` after the first ``reuse`` positions of ``source`` (a layer list).

        Returns ``(cache, logits)``: the prompt's full cache and the logits of its last ``keep``
        positions (``[keep, vocab]``).
        """
        torch = self._torch
        cache = make_cache(source, reuse, len(ids)) if reuse else self._new_cache()
        positions = torch.arange(reuse, len(ids), device=self.device)
        kwargs = {self._keep_arg: keep} if self._keep_arg else {}
        self.counts.add(forward_passes=1, tokens_computed=len(ids) - reuse)
        if reuse and self._continuation:  # the attention may run this as a padded causal call
            kwargs[CONTINUATION] = True
        out = self._model(
            input_ids=torch.tensor([ids[reuse:]], device=self.device),
            position_ids=positions[None],
            cache_position=positions,
            past_key_values=cache,
            use_cache=True,
            **kwargs,
        )
        return out.past_key_values, out.logits[0, -keep:, :]

    def _prefill_packed(self, members: list[tuple[list[int], tuple[Piece, ...], int]]
                        ) -> tuple[KVLayers, list[Span], list[Any]]:
        """One forward over the new tokens of ``members`` (``(ids, prefix, keep)``: the ids after
        the positions the KV ``prefix`` pieces hold, logits of the last ``keep`` positions wanted).

        Returns the packed KV layers, each member's :class:`Span` in them and its logits.
        """
        torch = self._torch
        spans, ids, positions, keep = [], [], [], []
        for tokens, prefix, n_keep in members:
            span = Span(prefix, len(ids), len(tokens) - sum(end - begin for _, begin, end in prefix))
            spans.append(span)
            ids += tokens[span.reuse :]
            positions += range(span.reuse, len(tokens))
            keep += range(len(ids) - n_keep, len(ids))
        index = torch.tensor(keep, device=self.device)
        self.counts.add(forward_passes=1, tokens_computed=len(ids))
        kwargs: dict[str, Any] = {PACKED: Packed(tuple(spans))}
        if self._keep_arg:
            kwargs[self._keep_arg] = index
        out = self._model(
            input_ids=torch.tensor([ids], device=self.device),
            position_ids=torch.tensor([positions], device=self.device),
            attention_mask=torch.ones((1, 1, 1, 1), dtype=torch.bool, device=self.device),  # unused
            past_key_values=self._new_cache(),
            use_cache=True,
            **kwargs,
        )
        logits = out.logits[0] if self._keep_arg else out.logits[0, index]
        return cache_layers(out.past_key_values), spans, list(logits.split([m[2] for m in members]))

    def _waves(self, seqs: dict[int, list[int]], caps: dict[int, int] | None = None
               ) -> list[list[list[Step]]] | None:
        """:func:`~ragray.generation.packed.wave_plan` s over runs of the caller's prompts
        (:func:`~ragray.generation.packed.plan_groups`; steps keyed by their index), when
        packing is on."""
        if not (self._packing and len(seqs) >= 2):
            return None
        keys = list(seqs)
        plans = []
        for run in plan_groups([seqs[k] for k in keys]):
            limits = [len(seqs[keys[j]]) - 1 if caps is None else caps[keys[j]] for j in run]
            waves = wave_plan([seqs[keys[j]] for j in run], limits)
            plans.append([[Step(keys[run[s.index]], None if s.parent is None else keys[run[s.parent]], s.reuse)
                           for s in wave] for wave in waves])
        return plans

    def _prefill_waves(self, waves: list[list[Step]], seqs: dict[int, list[int]], keep: dict[int, int]
                       ) -> tuple[dict[int, tuple[Piece, ...]], dict[int, Any]]:
        """Run the waves, each in packed forwards of at most ``MAX_PACKED_TOKENS`` new tokens.
        Returns every prompt's KV as pieces and the logits of its last ``keep[i]`` positions."""
        kv: dict[int, tuple[Piece, ...]] = {}
        logits: dict[int, Any] = {}
        for wave in waves:
            prefixes = [() if s.parent is None else truncate(kv[s.parent], s.reuse) for s in wave]
            for chunk in pack_spans([len(seqs[s.index]) for s in wave], [s.reuse for s in wave]):
                members = [(seqs[wave[c].index], prefixes[c], keep[wave[c].index]) for c in chunk]
                layers, spans, rows = self._prefill_packed(members)
                for c, span, row in zip(chunk, spans, rows):
                    i = wave[c].index
                    kv[i] = (*span.prefix, (layers, span.start, span.start + span.length))
                    logits[i] = row
        return kv, logits

    # -- public API -----------------------------------------------------------------------------

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
                msg = too_long_message(len(ids), self.max_positions)
                results[i] = Generation("", len(ids), 0, 0.0, error=msg)
            budgets[i] = min(self.config.max_tokens, room)
        live = {i: ids for i, ids in enumerate(token_ids) if i not in results}
        calls_done(len(results))  # too long: answered with an error at once
        self._count_minimum(live, {i: len(ids) - 1 for i, ids in live.items()})
        with self._torch.inference_mode():
            if self._batched is not None:
                self._generate_batched(live, budgets, results)
                return [results[i] for i in range(len(prompts))]
            plans = self._waves(live)
            if plans is not None:
                for waves in plans:
                    self._generate_packed(waves, live, budgets, results)
                return [results[i] for i in range(len(prompts))]
            steps = self._plan(live)
            previous: Any = None  # layer list of the last prefilled prompt (the next one's source)
            for start in range(0, len(steps), self.batch_size):
                group = steps[start : start + self.batch_size]
                previous = self._run_group(group, token_ids, budgets, previous, results)
        return [results[i] for i in range(len(prompts))]

    def _generate_packed(self, waves: list[list[Step]], seqs: dict[int, list[int]],
                         budgets: dict[int, int], results: dict[int, Generation]) -> None:
        """Prefill the prompts wave by wave in packed forwards (:mod:`~ragray.generation.packed`),
        then decode them in groups of ``batch_size`` in wave order. The prefill time is charged to
        the first group."""
        began = time.perf_counter()
        kv, firsts = self._prefill_waves(waves, seqs, dict.fromkeys(seqs, 1))
        steps = [s for wave in waves for s in wave]
        for start in range(0, len(steps), self.batch_size):
            group = [s.index for s in steps[start : start + self.batch_size]]
            computed = sum(len(seqs[s.index]) - s.reuse for s in steps[start : start + self.batch_size])
            self._decode_group(group, [list(kv[i]) for i in group], [firsts[i] for i in group],
                               seqs, budgets, results, began, computed)
            began = time.perf_counter()

    def _generate_batched(self, seqs: dict[int, list[int]], budgets: dict[int, int],
                          results: dict[int, Generation]) -> None:
        """The gpu strategy: every prompt prefilled in padded passes, then decoded in groups of
        ``batch_size`` (sized from free memory: usually all of the call's prompts at once)."""
        began = time.perf_counter()
        firsts: dict[int, Any] = {}

        def consume(indices: list[int], logits: Any, _keep: list[int]) -> None:
            for b, i in enumerate(indices):
                firsts[i] = logits[b, -1:]

        caps = {i: len(ids) - 1 if self.prefix_reuse else 0 for i, ids in seqs.items()}
        kv = self._batched.run(seqs, caps, dict.fromkeys(seqs, 1), consume, hold=True)
        order = list(kv)
        for start in range(0, len(order), self.batch_size):
            group = order[start : start + self.batch_size]
            self._decode_group(group, [list(kv[i]) for i in group], [firsts[i] for i in group],
                               seqs, budgets, results, began, 0)
            began = time.perf_counter()

    def _run_group(self, group: list[PrefillStep], token_ids: list[list[int]], budgets: dict[int, int],
                   previous: Any, results: dict[int, Generation]) -> Any:
        """Prefill ``group`` (each step reusing the previous prompt's KV), decode it as one batch,
        store its :class:`Generation` s in ``results``; return the last prompt's KV layers."""
        began = time.perf_counter()
        caches, firsts = [], []
        for step in group:
            cache, logits = self._prefill(token_ids[step.index], previous, step.reuse_len, 1)
            previous = cache_layers(cache) if self.prefix_reuse else None
            caches.append(cache)
            firsts.append(logits)
        single = None if self._global_attention else caches[0]  # the model's own cache type
        rows = [] if single is not None else [
            [(cache_layers(c), 0, len(token_ids[s.index]))] for c, s in zip(caches, group)]
        del caches
        computed = sum(len(token_ids[s.index]) - s.reuse_len for s in group)
        self._decode_group([s.index for s in group], rows, firsts, token_ids, budgets, results, began,
                           computed, single=single)
        return previous

    def _decode_group(self, indices: list[int], rows: list[list[Piece]], firsts: list[Any],
                      token_ids: Any, budgets: dict[int, int], results: dict[int, Generation],
                      began: float, computed: int, single: Any = None) -> None:
        """Decode prefilled prompts ``indices`` (their KV as ``rows`` of pieces, the logits of their
        last positions) as one batch; store their :class:`Generation` s in ``results``."""
        prefilled = time.perf_counter()
        lengths = [len(token_ids[i]) for i in indices]
        room = [budgets[i] for i in indices]
        # a drafted step appends 1 + draft_tokens columns to every row, and there are at most
        # max(room) steps: cache room for all of them (growing would copy the whole cache)
        columns = max(room) * (1 + self.config.transformers.draft_tokens if self._drafting else 1)
        if self._static is not None and single is None:
            outputs = self._static.run(rows, lengths, self._torch.cat(firsts), room,
                                       [self._generator(i) for i in indices])
            self._finish(indices, lengths, outputs, results, began, prefilled, computed)
            return
        if single is not None:  # sliding-window / recurrent caches: one prompt, the model's own cache
            cache = single
            mask = self._torch.ones((1, lengths[0]), dtype=self._torch.long, device=self.device)
        else:
            cache, mask = stack_pieces(rows, columns)
        del rows
        first = self._torch.cat(firsts)
        if self._drafting:
            drafts = DraftSource([token_ids[i] for i in indices], self.config.transformers.draft_tokens)
            outputs = self._decoder.drafted(cache, mask, lengths, first, room, drafts)
        else:
            outputs = self._decoder.one_token(cache, mask, lengths, first, room,
                                              [self._generator(i) for i in indices])
        del cache
        self._finish(indices, lengths, outputs, results, began, prefilled, computed)

    def _finish(self, indices: list[int], lengths: list[int], outputs: list[list[int]],
                results: dict[int, Generation], began: float, prefilled: float, computed: int) -> None:
        """The decoded tokens as :class:`Generation` s in ``results``; the group's time shared out."""
        self.decode_stats["tokens"] += sum(map(len, outputs))
        done = time.perf_counter()
        log.debug(
            "%d prompts: prefilled %d of %d tokens in %.2fs, decoded %d tokens in %.2fs",
            len(indices), computed, sum(lengths), prefilled - began, sum(map(len, outputs)), done - prefilled,
        )
        share = (done - began) / len(indices)
        for i, n, out in zip(indices, lengths, outputs):
            text_ids = [t for t in out if t not in self._eos]
            text = self._tok.decode(text_ids, skip_special_tokens=True).strip()
            results[i] = Generation(text, n, len(out), share)
        calls_done(len(indices))

    def _plan(self, seqs: dict[int, list[int]], caps: dict[int, int] | None = None) -> list[PrefillStep]:
        """:func:`plan_prefills` over a subset of the caller's prompts, keyed by their index."""
        keys = list(seqs)
        steps = plan_prefills(
            [seqs[k] for k in keys],
            reuse=self.prefix_reuse,
            max_reuse=None if caps is None else [caps[k] for k in keys],
        )
        return [
            PrefillStep(keys[s.index], None if s.reuse_from is None else keys[s.reuse_from], s.reuse_len)
            for s in steps
        ]

    def _generator(self, index: int) -> Any:
        if self.config.temperature == 0:
            return None
        return self._torch.Generator().manual_seed(self.config.seed + index)

    def score(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        """Summed natural-log probability of each answer's tokens after its rendered prompt
        (the assistant turn, without an end-of-turn token); an empty answer scores 0.0."""
        scores = [0.0] * len(prompts)
        if self._batched is not None:  # sums on the device, one host wait per call
            self._answer_logprobs(prompts, answers, None, scores)
            return scores

        def store(i: int, logprobs: Any, target: Any) -> None:
            self.counts.add(host_syncs=1)
            scores[i] = float(logprobs.gather(1, target[:, None]).sum())

        self._answer_logprobs(prompts, answers, store)
        return scores

    def score_divergence(self, reference: ChatPrompt, prompts: Sequence[ChatPrompt], answer: str
                         ) -> list[tuple[float, float]]:
        """``(log p(answer | prompt), Σ JSD)`` per prompt over the full vocabulary (see
        :meth:`Generator.score_divergence`); the reference is scored in the same call, first, so
        the prompts reuse its prefix. An empty answer gives ``(0.0, 0.0)``."""
        if not answer:
            return [(0.0, 0.0)] * len(prompts)
        torch = self._torch
        logprobs: dict[int, Any] = {}
        totals: dict[int, float] = {}

        def store(i: int, lp: Any, target: Any) -> None:
            self.counts.add(host_syncs=1)
            totals[i] = float(lp.gather(1, target[:, None]).sum())
            logprobs[i] = lp

        # one call, reference first, so the prompts reuse its prefix
        self._answer_logprobs([reference, *prompts], [answer] * (len(prompts) + 1), store)
        ref = logprobs.pop(0)
        out = []
        for i in range(1, len(prompts) + 1):
            lp = logprobs.pop(i)
            # JSD(P, Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M), M = ½(P + Q), per position, in nats
            m = torch.logaddexp(ref, lp) - math.log(2.0)
            jsd = 0.5 * ((ref.exp() * (ref - m)).sum(-1) + (lp.exp() * (lp - m)).sum(-1))
            out.append((totals[i], float(jsd.clamp_min(0).sum())))
        self.counts.add(host_syncs=len(prompts))
        return out

    def divergence_problem(self) -> str | None:
        return None

    def answer_length(self, prompt: ChatPrompt, answer: str) -> int | None:
        if not answer:
            return 0
        text = render_chat(self._tok, prompt)
        return len(encode_scored(self._tok, [text], [answer])[0][1])

    def _answer_logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str], store: Any,
                         sums: list[float] | None = None) -> None:
        """Teacher-force each answer after its prompt; call ``store(i, logprobs, target)`` with the
        log-softmax over the vocabulary at each answer position (``[n, vocab]``, float32) and the
        answer's token ids (empty answers are skipped). With ``sums`` (the gpu strategy only) and
        no ``store``, write each answer's summed log-probability there instead, one host wait per call."""
        self._check_open()
        if len(prompts) != len(answers):
            raise ValueError(f"score: {len(prompts)} prompts but {len(answers)} answers")
        fulls: dict[int, list[int]] = {}
        prompt_lens: dict[int, int] = {}
        scored = [i for i, answer in enumerate(answers) if answer]  # no answer tokens: log-probability 0
        calls_done(len(answers) - len(scored))
        texts = [render_chat(self._tok, prompts[i]) for i in scored]
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
        if self._batched is not None:
            if not self.prefix_reuse:
                caps = dict.fromkeys(caps, 0)
            pending: list[tuple[list[int], Any]] = []
            with self._torch.inference_mode():
                self._batched.run(fulls, caps, keep, self._consumer(fulls, prompt_lens, store, pending))
            if pending:  # the sums of every pass, read in one host wait at the end of the call
                self.counts.add(host_syncs=1)
                values = self._torch.cat([total for _, total in pending]).tolist()
                for i, value in zip((i for indices, _ in pending for i in indices), values):
                    sums[i] = value
            return

        def consume(i: int, logits: Any) -> None:
            logprobs = self._torch.log_softmax(logits[:-1].float(), dim=-1)
            target = self._torch.tensor(fulls[i][prompt_lens[i]:], device=logprobs.device)
            store(i, logprobs, target)
            calls_done(1)

        with self._torch.inference_mode():
            plans = self._waves(fulls, caps)
            if plans is not None:
                for waves in plans:
                    for i, logits in sorted(self._prefill_waves(waves, fulls, keep)[1].items()):
                        consume(i, logits)
                return
            previous: Any = None
            for step in self._plan(fulls, caps):
                cache, logits = self._prefill(fulls[step.index], previous, step.reuse_len, keep[step.index])
                previous = cache_layers(cache) if self.prefix_reuse else None
                consume(step.index, logits)

    def _consumer(self, fulls: dict[int, list[int]], prompt_lens: dict[int, int], store: Any,
                  pending: list[tuple[list[int], Any]]) -> Any:
        """What a padded pass hands its logits to: per row ``store`` (full log-softmax rows), or
        the rows' summed answer log-probabilities gathered on the device and appended to ``pending``
        as ``(indices, sums)``: no host wait, so the host prepares the next pass while the device
        runs this one (the caller reads every pass's sums at once)."""
        torch = self._torch

        def consume(indices: list[int], logits: Any, keeps: list[int]) -> None:
            calls_done(len(indices))
            width = logits.shape[1]
            if store is not None:
                for b, i in enumerate(indices):
                    lp = torch.log_softmax(logits[b, width - keeps[b] : width - 1].float(), dim=-1)
                    store(i, lp, torch.tensor(fulls[i][prompt_lens[i]:], device=lp.device))
                return
            rows, cols, targets = [], [], []
            for b, i in enumerate(indices):
                answer = fulls[i][prompt_lens[i]:]
                rows += [b] * len(answer)
                cols += range(width - keeps[b], width - 1)
                targets += answer
            dev = logits.device
            index = torch.tensor([rows, cols, targets]).to(dev, non_blocking=True)
            picked = logits[index[0], index[1]].float()
            lp = torch.log_softmax(picked, dim=-1).gather(1, index[2][:, None])[:, 0]
            pending.append((list(indices), torch.zeros(len(indices), dtype=lp.dtype, device=dev).index_add_(
                0, index[0], lp)))

        return consume

    def close(self) -> None:
        """Release the weights and every cache that holds them or KV built from them (the gpu
        strategy's padded prefill and its carried KV, the fixed-shape decoder), then the CUDA cache."""
        if self._model is None:
            return
        cuda = self.device.startswith("cuda")
        self._model = self._decoder.model = None
        if self._batched is not None:
            self._batched.release()
        self._batched = self._static = None
        gc.collect()
        if cuda:
            self._torch.cuda.empty_cache()
