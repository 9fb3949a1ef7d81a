"""The GPU engine: waves in padded passes (:mod:`~ragray.generation.transformers.batched`), every prompt
of a call decoded in one batch at fixed shapes (:mod:`~ragray.generation.transformers.static_decode`,
CUDA graphs), sizes from the device memory free at each call unless set
(:mod:`~ragray.generation.transformers.strategy`).

Scoring sums each answer's log-probability on the device and reads every pass's sums in one host
wait at the end of the call; the KV of a generate call is carried into the calls that score it.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from ragray.config import GenerationConfig
from ragray.generation.engine_counts import EngineCounts
from ragray.generation.transformers.batched import BatchedPrefill
from ragray.generation.transformers.engine import Decoded, Engine, ScoreJob, Store, use_ragray_attention
from ragray.generation.transformers.kv import Piece
from ragray.generation.transformers.plan import keyed_runs
from ragray.generation.transformers.static_decode import StaticDecoder
from ragray.generation.transformers.strategy import GpuSizes, gpu_sizes
from ragray.generation.transformers.transfer import to_device
from ragray.progress import calls_done

__all__ = ["GpuEngine"]


class GpuEngine(Engine):
    name = "gpu"

    def __init__(self, model: Any, torch: Any, device: str, config: GenerationConfig, eos: frozenset[int],
                 counts: EngineCounts, *, pad_id: int | None = None) -> None:
        if device.startswith("cuda"):  # decoding steps read the KV once
            use_ragray_attention(model)
        super().__init__(model, torch, device, config, eos, counts)
        self.sizes = self._read_sizes()
        self.batch_size = self.sizes.decode_rows  # halved by an out-of-memory decode, doubled back after
        self._decode_shrank = False
        self._out_of_memory = getattr(self.torch, "OutOfMemoryError", None) or self.torch.cuda.OutOfMemoryError
        self.questions_in_flight = self.sizes.questions_in_flight
        static = self.config.transformers.static_decode
        self.static: StaticDecoder | None = None
        if static if static is not None else device.startswith("cuda"):
            self.static = StaticDecoder(self.decoder, graphs=True)
            self.drafting = False
        self.prefill = BatchedPrefill(
            model, self.torch, device, keep_arg=self.keep_arg, tokens_per_pass=self.sizes.tokens_per_pass,
            plan_tokens=self.sizes.plan_tokens, counts=self.counts,
            pad_id=pad_id if isinstance(pad_id, int) else min(self.eos, default=0),
            memory_tokens=self.sizes.memory_tokens, prefix_weight=self.sizes.prefix_weight)

    def _read_sizes(self) -> GpuSizes:
        """Sizes from the memory free on the device now; the sizes the settings name are kept."""
        settings = self.config.transformers
        return gpu_sizes(self.model, self.torch, self.device, tokens_per_pass=settings.tokens_per_pass,
                         batch_size=settings.batch_size if "batch_size" in settings.model_fields_set else None)

    def _plan_call(self) -> None:
        """Re-read the sizes at the start of each call: one budget, the memory free now, that the
        weights, the KV carried from the last generate call, a plan's held KV, a pass (with the prefix
        KV it stacks) and the decoding rows all count against (what this process holds is not free).
        A size an out-of-memory error shrank stays at most what it shrank to; clean calls double it
        back up to the new plan.
        Questions in flight stay as sized when the model opened (the pipeline keeps them)."""
        sizes = self._read_sizes()
        shrunk = self.batch_size < self.sizes.decode_rows
        self.sizes = replace(sizes, questions_in_flight=self.questions_in_flight)
        self.batch_size = min(self.batch_size, sizes.decode_rows) if shrunk else sizes.decode_rows
        self.prefill.plan(tokens_per_pass=sizes.tokens_per_pass, plan_tokens=sizes.plan_tokens,
                          memory_tokens=sizes.memory_tokens)

    def settings(self) -> dict[str, Any]:
        # the pass size now (an out-of-memory retry shrinks it, clean calls grow it back)
        return {**super().settings(), "tokens_per_pass": self.prefill.tokens_per_pass,
                "decode_rows": self.batch_size, "questions_in_flight": self.sizes.questions_in_flight}

    def generate(self, seqs: dict[int, list[int]], budgets: dict[int, int]) -> dict[int, Decoded]:
        """Every prompt prefilled in padded passes, then decoded in groups of ``batch_size`` (sized
        from free memory: usually all of the call's prompts at once). The KV a call holds for
        decoding is bounded: the prompts go in runs of at most ``plan_tokens`` prompt tokens
        (neighbours in the prefix trie together), each run prefilled and decoded before the next."""
        out: dict[int, Decoded] = {}
        self._decode_shrank = False
        self.prefill.drop_carried()  # this call's KV replaces it: not counted against the new plan
        self._plan_call()
        for run in keyed_runs(seqs, self.sizes.plan_tokens):
            self._generate_run({i: seqs[i] for i in run}, budgets, out)
        if not self._decode_shrank and self.batch_size < self.sizes.decode_rows:  # memory came back
            self.batch_size = min(self.sizes.decode_rows, 2 * self.batch_size)
        return out

    def _generate_run(self, seqs: dict[int, list[int]], budgets: dict[int, int], out: dict[int, Decoded]) -> None:
        began = time.perf_counter()
        firsts: dict[int, Any] = {}

        def consume(indices: list[int], logits: Any, _keep: list[int]) -> None:
            for b, i in enumerate(indices):
                firsts[i] = logits[b, -1:]

        caps = {i: len(ids) - 1 if self.prefix_reuse else 0 for i, ids in seqs.items()}
        kv = self.prefill.run(seqs, caps, dict.fromkeys(seqs, 1), consume, hold=True)
        order = list(kv)
        groups = [order[start : start + self.batch_size] for start in range(0, len(order), self.batch_size)]
        while groups:
            group = groups.pop(0)
            try:
                self.decode_group(group, [list(kv[i]) for i in group], [firsts[i] for i in group], seqs, budgets,
                                  out, began, 0)
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

    def decode_group(self, indices: list[int], rows: list[list[Piece]], firsts: list[Any], seqs: Any,
                     budgets: dict[int, int], out: dict[int, Decoded], began: float, computed: int,
                     single: Any = None) -> None:
        if self.static is None:
            super().decode_group(indices, rows, firsts, seqs, budgets, out, began, computed)
            return
        prefilled = time.perf_counter()
        lengths = [len(seqs[i]) for i in indices]
        outputs = self.static.run(rows, lengths, self.torch.cat(firsts), [budgets[i] for i in indices],
                                  self.samplers(indices))
        self.finish(indices, lengths, outputs, out, began, prefilled, computed)

    def score_rows(self, job: ScoreJob, store: Store) -> None:
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
        """The rows' summed answer log-probabilities gathered on the device after each pass, with no
        host wait (the host prepares the next pass while the device runs this one), read in one
        host wait at the end of the call."""
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

    def close(self) -> None:
        super().close()
        self.prefill.release()
        self.static = None
