"""The gpu preset: waves in padded passes (:mod:`~ragray.generation.transformers.batched`), every prompt
of a call decoded in one batch at fixed shapes (:mod:`~ragray.generation.transformers.static_decode`,
CUDA graphs), sizes from the device memory free at each call unless set
(:mod:`~ragray.generation.transformers.strategy`), memory counted in bytes held.

Scoring sums each answer's log-probability on the device and reads every pass's sums in one host
wait at the end of the call; the KV of a generate call is carried into the calls that score it.
"""

from __future__ import annotations

from typing import Any

from ragray.config import GenerationConfig
from ragray.generation.engine_counts import EngineCounts
from ragray.generation.transformers.engine import Engine, use_ragray_attention
from ragray.generation.transformers.strategy import GpuSizes, gpu_sizes

__all__ = ["GpuEngine"]


class GpuEngine(Engine):
    name = "gpu"
    default_prefill = "padded"
    sums_on_device = True

    def __init__(self, model: Any, torch: Any, device: str, config: GenerationConfig, eos: frozenset[int],
                 counts: EngineCounts, *, pad_id: int | None = None) -> None:
        if device.startswith("cuda"):  # decoding steps read the KV once
            use_ragray_attention(model)
        super().__init__(model, torch, device, config, eos, counts, pad_id=pad_id)
        self.questions_in_flight = self.sizes.questions_in_flight

    def _read_sizes(self) -> GpuSizes:
        """Sizes from the memory free on the device now; the sizes the settings name are kept."""
        settings = self.config.transformers
        return gpu_sizes(self.model, self.torch, self.device, tokens_per_pass=settings.tokens_per_pass,
                         batch_size=settings.batch_size if "batch_size" in settings.model_fields_set else None)

    def settings(self) -> dict[str, Any]:
        # the pass size now (an out-of-memory retry shrinks it, clean calls grow it back)
        return {**super().settings(), "tokens_per_pass": self.prefill.tokens_per_pass,
                "decode_rows": self.batch_size, "questions_in_flight": self.sizes.questions_in_flight}
