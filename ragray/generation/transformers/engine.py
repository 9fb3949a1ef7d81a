"""The engine of the transformers backend: a prefill and a decoder, composed; one plan, one budget.

A :class:`~ragray.generation.transformers.backend.TransformersGenerator` tokenizes and renders; its
engine runs the model. An engine is parts that combine freely:

- one planner (:func:`~ragray.generation.transformers.plan.keyed_waves`): runs of waves over the
  prompts' token trie;
- a prefill (:mod:`~ragray.generation.transformers.prefills`): ``packed`` (a wave in one row),
  ``padded`` (a wave in padded passes, :mod:`~ragray.generation.transformers.batched`) or ``single``
  (one prompt per pass): ``generation.transformers.prefill``;
- a decoder (:mod:`~ragray.generation.transformers.decoders`): ``eager``, ``drafted`` or ``static``
  (fixed shapes, CUDA graphs on CUDA): ``static_decode`` and ``draft_tokens``;
- sizes: fixed (:class:`~ragray.generation.transformers.cpu_engine.CpuEngine`) or read from the
  device memory free at each call, counted in bytes held
  (:class:`~ragray.generation.transformers.gpu_engine.GpuEngine`).

The two strategies are presets of these parts (:func:`~ragray.generation.transformers.backend.make_engine`
picks one, whichever way the generator is built): ``cpu`` packs waves and decodes in small groups,
right for a few cores; ``gpu`` pads waves into passes sized from free memory, decodes a call's
prompts together at fixed shapes and carries a generate call's KV into the calls that score it.

Every call goes the same way: the prompts in runs that bound the KV held, each run prefilled
(holding its KV for a generate call) and decoded in groups that fit the decoding budget; an
out-of-memory pass or group is halved and retried after its ``except`` block (the failed work's
frames freed first). One call runs on a model at a time (:attr:`Engine.lock`, one per model: the
engines of every generator built on it share it, the API's per-call generators on a kept model
and a model handed in twice included): questions in flight merge their calls before they reach it
(:mod:`ragray.pipeline.in_flight`), and a call that is not merged (a JSD question's, another
notebook thread's) waits for the one inside.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ragray.config import GenerationConfig
from ragray.generation.engine_counts import EngineCounts
from ragray.generation.transformers.attention import GQA_ATTENTION
from ragray.generation.transformers.batched import BatchedPrefill
from ragray.generation.transformers.decoders import DraftedDecoder, choose_decoder
from ragray.generation.transformers.decoding import BatchDecoder
from ragray.generation.transformers.kv import supports_prefix_reuse
from ragray.generation.transformers.plan import keyed_runs
from ragray.generation.transformers.prefills import PackedPrefill, Prefill, SinglePrefill
from ragray.generation.transformers.strategy import GpuSizes
from ragray.generation.transformers.transfer import to_device
from ragray.progress import calls_done

__all__ = ["Decoded", "Engine", "ScoreJob", "Store", "model_lock", "use_ragray_attention"]

log = logging.getLogger(__name__)

#: one prompt's answer: its tokens (end-of-sequence included) and its share of the call's seconds
Decoded = tuple[list[int], float]
#: what scoring hands on per prompt: its index, the log-softmax rows at the answer's positions
#: (``[n, vocab]``, float32) and the answer's token ids (a tensor on the same device)
Store = Callable[[int, Any, Any], None]

_MODEL_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_MODEL_LOCKS_GUARD = threading.Lock()


def model_lock(model: Any) -> threading.Lock:
    """The one lock of ``model``: every engine on it runs one call at a time, whichever generator
    it belongs to (one owner of the device memory the model's calls take); held only as long as
    the model lives."""
    with _MODEL_LOCKS_GUARD:
        try:
            return _MODEL_LOCKS.setdefault(model, threading.Lock())
        except TypeError:  # a model that takes no weak reference: a lock of this engine's own
            return threading.Lock()


@dataclass(frozen=True)
class ScoreJob:
    """Answers teacher-forced after their prompts, keyed by the caller's index: ``fulls[i]`` the
    prompt's ids and then the answer's, ``prompt_lens[i]`` where the answer starts, ``caps[i]`` how
    many positions may come from another prompt's KV, ``keep[i]`` the last positions whose logits
    are wanted (the answer's, and the prompt's last); ``first``: an index the engine scores before
    every other (a divergence call's reference: each prompt's vocabulary rows are folded into its
    divergence as they arrive, none waits for the reference)."""

    fulls: dict[int, list[int]]
    prompt_lens: dict[int, int]
    caps: dict[int, int]
    keep: dict[int, int]
    first: int | None = None

    def target(self, i: int) -> list[int]:
        return self.fulls[i][self.prompt_lens[i]:]


class Engine:
    """A prefill and a decoder on one model, with the sizes a strategy reads (see the module
    docstring). Presets (:class:`~ragray.generation.transformers.cpu_engine.CpuEngine`,
    :class:`~ragray.generation.transformers.gpu_engine.GpuEngine`) set the model's preparation, the
    default prefill and where the sizes come from; the settings may choose any prefill and decoder."""

    name = ""
    #: the prefill ``generation.transformers.prefill: auto`` runs
    default_prefill = "single"
    #: each scoring call's answer log-probabilities summed on the device and read in one host wait
    #: (else read per prompt)
    sums_on_device = False
    #: questions the pipeline keeps in flight with this engine, where it sizes that itself (GPU)
    questions_in_flight: int | None = None

    def __init__(self, model: Any, torch: Any, device: str, config: GenerationConfig, eos: frozenset[int],
                 counts: EngineCounts, *, pad_id: int | None = None) -> None:
        self.model, self.torch, self.device, self.config, self.eos = model, torch, device, config, eos
        self.counts = counts
        self.lock = model_lock(model)
        # caches of sliding-window / recurrent layers cannot be cut or re-stacked: one row at a time
        self.global_attention = supports_prefix_reuse(model.config)
        self.prefix_reuse = config.transformers.prefix_reuse and self.global_attention
        params = inspect.signature(model.forward).parameters
        self.keep_arg = next((a for a in ("logits_to_keep", "num_logits_to_keep") if a in params), None)
        #: the model's decoding step and its counts (every decoder runs it)
        self.decoder = BatchDecoder(model, torch, device, eos, config.temperature)
        self.sizes = self._read_sizes()
        #: prompts decoded together at most: halved by an out-of-memory decode, doubled back after
        self.batch_size = self.sizes.decode_rows if self.global_attention else 1
        self._decode_shrank = False
        self._out_of_memory = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
        self.prefill = self._make_prefill(pad_id)
        settings = config.transformers
        #: the decoder: guessed tokens are verified against greedy predictions on stacked caches
        self.decoding = choose_decoder(self.decoder, static=settings.static_decode, draft_tokens=settings.draft_tokens,
                                       temperature=config.temperature, stacks=self.global_attention)
        self.drafting = isinstance(self.decoding, DraftedDecoder)

    # -- the parts -------------------------------------------------------------------------------

    def _read_sizes(self) -> GpuSizes:
        """The sizes this engine plans with now (presets: fixed, or from free device memory)."""
        raise NotImplementedError

    def _make_prefill(self, pad_id: int | None) -> Prefill:
        """The prefill ``generation.transformers.prefill`` names (``auto``: the preset's); ``single``
        where the model's caches cannot be cut (sliding-window, recurrent layers), and where packing
        cannot apply (no prefix reuse, a model whose attention ragray's function cannot replace)."""
        settings = self.config.transformers
        kind = self.default_prefill if settings.prefill == "auto" else settings.prefill
        if kind == "packed" and self.prefix_reuse:
            use_ragray_attention(self.model)  # packed spans need ragray's attention (same numbers)
        continuation = getattr(self.model.config, "_attn_implementation", None) == GQA_ATTENTION
        if not self.global_attention or (kind == "packed" and not (continuation and self.prefix_reuse)):
            kind = "single"
        common = {"keep_arg": self.keep_arg, "counts": self.counts, "plan_tokens": self.sizes.plan_tokens}
        single = SinglePrefill(self.model, self.torch, self.device, continuation=continuation,
                               global_attention=self.global_attention, **common)
        if kind == "packed":
            return PackedPrefill(self.model, self.torch, self.device, single=single, **common)
        if kind == "padded":
            sizes = self.sizes
            return BatchedPrefill(
                self.model, self.torch, self.device, tokens_per_pass=sizes.tokens_per_pass,
                pad_id=pad_id if isinstance(pad_id, int) else min(self.eos, default=0),
                memory_tokens=sizes.memory_tokens, prefix_weight=sizes.prefix_weight, plan_bytes=sizes.plan_bytes,
                activation_bytes=sizes.activation_token_bytes, **common)
        return single

    def _plan_call(self) -> None:
        """Re-read the sizes at the start of each call: one budget, the memory free now, that the
        weights, the KV carried from the last generate call, a plan's held KV, a pass (with the prefix
        KV it stacks) and the decoding rows all count against (what this process holds is not free).
        A size an out-of-memory error shrank stays at most what it shrank to; clean calls double it
        back up to the new plan. Questions in flight stay as sized when the model opened (the
        pipeline keeps them)."""
        sizes = self._read_sizes()
        shrunk = self.batch_size < self.sizes.decode_rows
        self.sizes = replace(sizes, questions_in_flight=self.questions_in_flight)
        rows = sizes.decode_rows if self.global_attention else 1
        self.batch_size = min(self.batch_size, rows) if shrunk else rows
        self.prefill.plan(tokens_per_pass=sizes.tokens_per_pass, plan_tokens=sizes.plan_tokens,
                          memory_tokens=sizes.memory_tokens, plan_bytes=sizes.plan_bytes)

    def settings(self) -> dict[str, Any]:
        """What this engine resolved (recorded in the run's summary)."""
        return {"strategy": self.name, "prefill": self.prefill.name, "decoder": self.decoding.name}

    def close(self) -> None:
        """Drop the model and everything built from it."""
        self.model = self.decoder.model = None
        self.prefill.release()
        self.decoding = None

    # -- generate --------------------------------------------------------------------------------

    def generate(self, seqs: dict[int, list[int]], budgets: dict[int, int]) -> dict[int, Decoded]:
        """Decode every prompt of ``seqs`` (at most ``budgets[i]`` new tokens each). The prompts go in
        runs of at most ``plan_tokens`` prompt tokens (neighbours in the prefix trie together), each
        run prefilled and decoded before the next: the KV a call holds for decoding is bounded."""
        out: dict[int, Decoded] = {}
        self._decode_shrank = False
        self.prefill.drop_carried()  # this call's KV replaces it: not counted against the new plan
        self._plan_call()
        for run in keyed_runs(seqs, self.sizes.plan_tokens):
            self._generate_run({i: seqs[i] for i in run}, budgets, out)
        rows = self.sizes.decode_rows if self.global_attention else 1
        if not self._decode_shrank and self.batch_size < rows:  # memory came back
            self.batch_size = min(rows, 2 * self.batch_size)
        return out

    def _generate_run(self, seqs: dict[int, list[int]], budgets: dict[int, int], out: dict[int, Decoded]) -> None:
        """Prefill a run holding its KV, then decode it in groups; a group that runs out of device
        memory is halved (and later groups are smaller until calls run clean). The prefill's time is
        charged to the first group."""
        began = time.perf_counter()
        firsts: dict[int, Any] = {}

        def consume(indices: list[int], logits: Any, _keep: list[int]) -> None:
            for b, i in enumerate(indices):
                firsts[i] = logits[b, -1:]

        caps = {i: len(ids) - 1 if self.prefix_reuse else 0 for i, ids in seqs.items()}
        held = self.prefill.run(seqs, caps, dict.fromkeys(seqs, 1), consume, hold=True)
        groups = self._groups(list(held), seqs, budgets)
        while groups:
            group = groups.pop(0)
            try:
                self.decode_group(group, [held[i] for i in group], [firsts[i] for i in group], seqs, budgets,
                                  out, began)
            except self._out_of_memory:
                if len(group) == 1:
                    raise
            else:
                began = time.perf_counter()
                continue
            # like a prefill pass: half the rows each, and smaller groups until calls run clean; out
            # of the except block, so the failed group's frames (its decoding state) are freed first
            half = len(group) // 2
            self._decode_shrank = True
            self.batch_size = max(1, min(self.batch_size, half))
            groups[:0] = [group[:half], group[half:]]
            if self.device.startswith("cuda"):
                self.torch.cuda.empty_cache()

    def _groups(self, order: list[int], seqs: dict[int, list[int]], budgets: dict[int, int]) -> list[list[int]]:
        """``order`` cut into decoding groups of at most ``batch_size`` prompts and, where memory is
        bounded (``sizes.decode_bytes``), of a stacked cache within it: rows times (the longest prompt
        plus the room its decoding appends) times a token's KV bytes."""
        limit, per = self.sizes.decode_bytes, self.sizes.kv_token_bytes
        columns = self.decoding.columns_per_token
        groups: list[list[int]] = []
        group: list[int] = []
        width = room = 0
        for i in order:
            w, r = max(width, len(seqs[i])), max(room, budgets[i] * columns)
            over = limit is not None and per is not None and (len(group) + 1) * (w + r) * per > limit
            if group and (len(group) >= self.batch_size or over):
                groups.append(group)
                group, w, r = [], len(seqs[i]), budgets[i] * columns
            group.append(i)
            width, room = w, r
        return groups + ([group] if group else [])

    def decode_group(self, indices: list[int], rows: list[Any], firsts: list[Any], seqs: Any,
                     budgets: dict[int, int], out: dict[int, Decoded], began: float) -> None:
        """Decode prefilled prompts ``indices`` (their KV as the prefill held it, the logits of their
        last positions) as one batch into ``out``."""
        prefilled = time.perf_counter()
        prompts = [seqs[i] for i in indices]
        outputs = self.decoding.decode(rows, prompts, self.torch.cat(firsts), [budgets[i] for i in indices],
                                       self.samplers(indices))
        self.finish(indices, [len(p) for p in prompts], outputs, out, began, prefilled)

    def samplers(self, indices: list[int]) -> list[Any]:
        """Per prompt its own seeded generator above temperature 0 (a call is reproducible, and a
        prompt's sample does not depend on its batch), else None."""
        if self.config.temperature == 0:
            return [None] * len(indices)
        return [self.torch.Generator().manual_seed(self.config.seed + i) for i in indices]

    def finish(self, indices: list[int], lengths: list[int], outputs: list[list[int]], out: dict[int, Decoded],
               began: float, prefilled: float) -> None:
        """The decoded tokens into ``out``, the group's time shared out; reported as calls done."""
        self.decoder.stats["tokens"] += sum(map(len, outputs))
        done = time.perf_counter()
        log.debug("%d prompts of %d tokens: prefilled in %.2fs, decoded %d tokens in %.2fs", len(indices),
                  sum(lengths), prefilled - began, sum(map(len, outputs)), done - prefilled)
        share = (done - began) / len(indices)
        for i, tokens in zip(indices, outputs):
            out[i] = (tokens, share)
        calls_done(len(indices))

    # -- score -----------------------------------------------------------------------------------

    def score_rows(self, job: ScoreJob, store: Store) -> None:
        """Hand each answer's full log-softmax rows to ``store`` (divergences need the vocabulary),
        as each prefill pass's logits arrive (``job.first`` before any other)."""
        torch = self.torch
        self._plan_call()

        def consume(indices: list[int], logits: Any, keeps: list[int]) -> None:
            calls_done(len(indices))
            width = logits.shape[1]
            for b, i in enumerate(indices):
                lp = torch.log_softmax(logits[b, width - keeps[b] : width - 1].float(), dim=-1)
                store(i, lp, *to_device(torch, str(lp.device), torch.tensor(job.target(i))))

        self.prefill.run(job.fulls, self._caps(job), job.keep, consume, first=job.first)

    def score_sums(self, job: ScoreJob) -> dict[int, float]:
        """Each answer's summed log-probability: read per prompt, or (:attr:`sums_on_device`) gathered
        on the device after each pass with no host wait (the host prepares the next pass while the
        device runs this one) and read in one host wait at the end of the call."""
        if not self.sums_on_device:
            sums: dict[int, float] = {}

            def store(i: int, logprobs: Any, target: Any) -> None:
                self.counts.add(host_syncs=1)
                sums[i] = float(logprobs.gather(1, target[:, None]).sum())

            self.score_rows(job, store)
            return sums
        torch = self.torch
        self._plan_call()
        pending: list[tuple[list[int], Any]] = []

        def consume(indices: list[int], logits: Any, keeps: list[int]) -> None:
            calls_done(len(indices))
            width = logits.shape[1]
            rows, cols, targets = [], [], []
            for b, i in enumerate(indices):
                answer = job.target(i)
                rows += [b] * len(answer)
                cols += range(width - keeps[b], width - 1)
                targets += answer
            dev = logits.device
            (index,) = to_device(torch, str(dev), torch.tensor([rows, cols, targets]))
            picked = logits[index[0], index[1]].float()
            lp = torch.log_softmax(picked, dim=-1).gather(1, index[2][:, None])[:, 0]
            pending.append((list(indices), torch.zeros(len(indices), dtype=lp.dtype, device=dev).index_add_(
                0, index[0], lp)))

        self.prefill.run(job.fulls, self._caps(job), job.keep, consume)
        if not pending:
            return {}
        self.counts.add(host_syncs=1)
        values = torch.cat([total for _, total in pending]).tolist()
        return dict(zip((i for indices, _ in pending for i in indices), values))

    def _caps(self, job: ScoreJob) -> dict[int, int]:
        return job.caps if self.prefix_reuse else dict.fromkeys(job.caps, 0)


def use_ragray_attention(model: Any) -> None:
    """ragray's attention function in place of sdpa (same numbers; decoding steps read the KV once,
    no per-step copy of a stacked cache, and the CPU engine's packed spans); idempotent."""
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return
    from ragray.generation.transformers.attention import register_gqa_attention

    try:
        model.set_attn_implementation(register_gqa_attention())
    except (ImportError, AttributeError, ValueError) as exc:
        log.info("keeping sdpa attention: %s", exc)
