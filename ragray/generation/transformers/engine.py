"""The engine interface of the transformers backend: prefill and score, decode, close.

A :class:`~ragray.generation.transformers.backend.TransformersGenerator` tokenizes and renders; its
engine runs the model. Two engines, chosen once per generator (in
:func:`~ragray.generation.transformers.backend.make_engine`) whichever way
the generator is built (a config, ``from_model``, a model handed to the API):

- :class:`~ragray.generation.transformers.cpu_engine.CpuEngine`: prompts packed into one row per wave
  (or one at a time, each reusing its sorted predecessor's KV, where packing does not apply), decoded
  in small groups: right for a few cores;
- :class:`~ragray.generation.transformers.gpu_engine.GpuEngine`: waves in padded passes sized from
  device memory, decoding at fixed shapes (CUDA graphs), the KV of a generate call carried into the
  calls that score it.

Both plan with :mod:`~ragray.generation.transformers.plan` and share the decoding below. One call
runs on a model at a time (:attr:`Engine.lock`, one per model: the engines of every generator built
on it share it, the API's per-call generators on a kept model and a model handed in twice
included): questions in flight merge their calls before they reach it
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
from dataclasses import dataclass
from typing import Any

from ragray.config import GenerationConfig
from ragray.generation.engine_counts import EngineCounts
from ragray.generation.transformers.decoding import BatchDecoder
from ragray.generation.transformers.drafts import DraftSource
from ragray.generation.transformers.kv import Piece, stack_pieces, supports_prefix_reuse
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
    """What both engines share: the model call's arguments, the decoder, and decoding a group of
    prefilled prompts. Subclasses plan and prefill."""

    name = ""
    #: questions the pipeline keeps in flight with this engine, where it sizes that itself (GPU)
    questions_in_flight: int | None = None

    def __init__(self, model: Any, torch: Any, device: str, config: GenerationConfig, eos: frozenset[int],
                 counts: EngineCounts) -> None:
        self.model, self.torch, self.device, self.config, self.eos = model, torch, device, config, eos
        self.counts = counts
        self.lock = model_lock(model)
        # caches of sliding-window / recurrent layers cannot be cut or re-stacked: one row at a time
        self.global_attention = supports_prefix_reuse(model.config)
        self.prefix_reuse = config.transformers.prefix_reuse and self.global_attention
        self.batch_size = config.transformers.batch_size if self.global_attention else 1
        # guessed tokens are verified against greedy predictions, with a custom mask on stacked caches
        self.drafting = bool(config.transformers.draft_tokens and config.temperature == 0 and self.global_attention)
        params = inspect.signature(model.forward).parameters
        self.keep_arg = next((a for a in ("logits_to_keep", "num_logits_to_keep") if a in params), None)
        self.decoder = BatchDecoder(model, torch, device, eos, config.temperature)

    # -- what an engine does -----------------------------------------------------------------

    def generate(self, seqs: dict[int, list[int]], budgets: dict[int, int]) -> dict[int, Decoded]:
        """Decode every prompt of ``seqs`` (at most ``budgets[i]`` new tokens each)."""
        raise NotImplementedError

    def score_rows(self, job: ScoreJob, store: Store) -> None:
        """Hand each answer's full log-softmax rows to ``store`` (divergences need the vocabulary)."""
        raise NotImplementedError

    def score_sums(self, job: ScoreJob) -> dict[int, float]:
        """Each answer's summed log-probability: read per prompt here; the GPU engine sums on the device."""
        sums: dict[int, float] = {}

        def store(i: int, logprobs: Any, target: Any) -> None:
            self.counts.add(host_syncs=1)
            sums[i] = float(logprobs.gather(1, target[:, None]).sum())

        self.score_rows(job, store)
        return sums

    def settings(self) -> dict[str, Any]:
        """What this engine resolved (recorded in the run's summary)."""
        return {"strategy": self.name}

    def close(self) -> None:
        """Drop the model and everything built from it."""
        self.model = self.decoder.model = None

    # -- decoding, shared ----------------------------------------------------------------------

    def decode_group(self, indices: list[int], rows: list[list[Piece]], firsts: list[Any], seqs: Any,
                     budgets: dict[int, int], out: dict[int, Decoded], began: float, computed: int,
                     single: Any = None) -> None:
        """Decode prefilled prompts ``indices`` (their KV as ``rows`` of pieces, the logits of their
        last positions) as one batch into ``out``; ``single``: one prompt in the model's own cache
        (sliding-window / recurrent layers)."""
        prefilled = time.perf_counter()
        lengths = [len(seqs[i]) for i in indices]
        room = [budgets[i] for i in indices]
        if single is not None:
            cache = single
            mask = self.torch.ones((1, lengths[0]), dtype=self.torch.long, device=self.device)
        else:
            # a drafted step appends 1 + draft_tokens columns to every row, and there are at most
            # max(room) steps: cache room for all of them (growing would copy the whole cache)
            columns = max(room) * (1 + self.config.transformers.draft_tokens if self.drafting else 1)
            cache, mask = stack_pieces(rows, columns)
        del rows
        first = self.torch.cat(firsts)
        if self.drafting:
            drafts = DraftSource([seqs[i] for i in indices], self.config.transformers.draft_tokens)
            outputs = self.decoder.drafted(cache, mask, lengths, first, room, drafts)
        else:
            outputs = self.decoder.one_token(cache, mask, lengths, first, room, self.samplers(indices))
        del cache
        self.finish(indices, lengths, outputs, out, began, prefilled, computed)

    def samplers(self, indices: list[int]) -> list[Any]:
        """Per prompt its own seeded generator above temperature 0 (a call is reproducible, and a
        prompt's sample does not depend on its batch), else None."""
        if self.config.temperature == 0:
            return [None] * len(indices)
        return [self.torch.Generator().manual_seed(self.config.seed + i) for i in indices]

    def finish(self, indices: list[int], lengths: list[int], outputs: list[list[int]], out: dict[int, Decoded],
               began: float, prefilled: float, computed: int) -> None:
        """The decoded tokens into ``out``, the group's time shared out; reported as calls done."""
        self.decoder.stats["tokens"] += sum(map(len, outputs))
        done = time.perf_counter()
        log.debug(
            "%d prompts: prefilled %d of %d tokens in %.2fs, decoded %d tokens in %.2fs",
            len(indices), computed, sum(lengths), prefilled - began, sum(map(len, outputs)), done - prefilled,
        )
        share = (done - began) / len(indices)
        for i, tokens in zip(indices, outputs):
            out[i] = (tokens, share)
        calls_done(len(indices))


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
