"""The cpu preset: waves packed into one row each, decoded in small groups, fixed sizes.

On a few cores the linear layers want many rows at once, and padding costs as much as real tokens:
the new tokens of a wave's prompts run as ONE packed forward
(:class:`~ragray.generation.transformers.prefills.PackedPrefill`, ragray's attention giving each prompt
its own prefix pieces), then the prompts decode in groups of ``generation.transformers.batch_size``.
Where packing does not apply (a model without ragray's attention, sliding-window or recurrent
layers, ``packed_prefill: false``, a single prompt) the prompts run one per pass
(:class:`~ragray.generation.transformers.prefills.SinglePrefill`), each after the KV of the prompt
it branches off: the same tokens computed, the same numbers.
"""

from __future__ import annotations

import logging
from typing import Any

from ragray.config import GenerationConfig
from ragray.generation.engine_counts import EngineCounts
from ragray.generation.transformers.engine import Engine, use_ragray_attention
from ragray.generation.transformers.plan import MAX_PLAN_TOKENS
from ragray.generation.transformers.row_chunks import chunk_rows
from ragray.generation.transformers.strategy import GpuSizes

__all__ = ["CpuEngine"]

log = logging.getLogger(__name__)


class CpuEngine(Engine):
    name = "cpu"

    def __init__(self, model: Any, torch: Any, device: str, config: GenerationConfig, eos: frozenset[int],
                 counts: EngineCounts, *, pad_id: int | None = None) -> None:
        if device == "cpu":
            _prepare(model)
        self.default_prefill = "packed" if config.transformers.packed_prefill else "single"
        super().__init__(model, torch, device, config, eos, counts, pad_id=pad_id)
        if self.config.transformers.prefix_reuse and not self.prefix_reuse:
            log.warning("%s has non-global attention layers (sliding-window or recurrent): prefix reuse and "
                        "batching are off", getattr(model, "name_or_path", "") or "the model")

    def _read_sizes(self) -> GpuSizes:
        """Fixed: RAM is not what limits a CPU, its cores are (a padded prefill chosen here runs
        passes of ``tokens_per_pass`` or 4,096 tokens)."""
        settings = self.config.transformers
        return GpuSizes(tokens_per_pass=settings.tokens_per_pass or 4096, plan_tokens=MAX_PLAN_TOKENS,
                        decode_rows=settings.batch_size, questions_in_flight=0, free_bytes=None)


def _prepare(model: Any) -> None:
    """ragray's attention and norms and MLPs on cache-sized row blocks
    (:mod:`~ragray.generation.transformers.row_chunks`); both idempotent, so another generator on
    the same model changes nothing."""
    use_ragray_attention(model)
    chunk_rows(model)
