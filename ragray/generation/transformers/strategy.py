"""How the transformers backend batches its work on a device: chosen here, in one place.

Two strategies share the backend's planning (the prefix trie of a call's prompts) and its decoders:

- ``cpu``: packed prefill with per-prompt attention (:mod:`ragray.generation.transformers.packed`), cache-sized
  row blocks, decoding groups of 16 — tuned on 2-core CPUs, where each extra row of a small
  matrix costs and a forward pass launches nothing;
- ``gpu``: padded passes of many prompts per wave (:mod:`ragray.generation.transformers.batched`), logits only
  at the wanted positions, one host wait per scoring call (the device runs a pass while the host
  prepares the next), decoding every prompt of a call in one batch (fixed shapes, CUDA graphs),
  and many questions in flight so their calls merge into one engine call — the shape a GPU wants.

``generation.transformers.strategy: auto`` picks ``gpu`` on CUDA and ``cpu`` elsewhere. The sizes
of the ``gpu`` strategy come from the memory free on the device at each engine call
(:func:`gpu_sizes`): one budget that the weights, the KV carried between calls, the KV a plan holds,
a pass and the decoding rows all count against (what this process has allocated is not free); the
settings that name a size win over them. Questions in flight are sized once, when the model opens.
A pass also counts the prefix KV it stacks (each row gets the pass's longest reused prefix: a wave
of hundreds of short rests after long prefixes would otherwise stack tens of GB at an 8B shape),
within its share and the decoding rows' (a pass and decoding are never live at once).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = ["GPU_PLANNED_IN_FLIGHT", "STRATEGIES", "GpuSizes", "gpu_sizes", "kv_bytes_per_token", "resolve_strategy",
           "sizes_from_free"]

STRATEGIES = ("auto", "cpu", "gpu")

# shares of the free memory the gpu strategy plans with: a pass's activations, the KV a plan
# holds between waves, the decoding cache of a call's prompts (the rest is headroom)
_PASS_SHARE, _PLAN_SHARE, _DECODE_SHARE = 0.15, 0.3, 0.3
#: questions in flight of the gpu strategy where the model is not loaded yet (a Ray Data batch)
GPU_PLANNED_IN_FLIGHT = 32
# tokens a prompt and its answer are planned at when sizing the decode batch and questions in flight
_PLANNED_PROMPT_TOKENS = 2048


def resolve_strategy(setting: str, device: str) -> str:
    """``cpu`` or ``gpu``: the setting, or for ``auto`` the device's kind."""
    if setting not in STRATEGIES:
        raise ValueError(f"generation.transformers.strategy: {setting!r} is not one of {', '.join(STRATEGIES)}")
    if setting != "auto":
        return setting
    return "gpu" if device.startswith("cuda") else "cpu"


@dataclass(frozen=True)
class GpuSizes:
    """An engine's sizes: tokens per padded pass, prompt tokens per wave plan (their KV is held
    between waves), prompts decoded together, questions in flight; and the memory a pass may hold,
    in tokens (``memory_tokens``, None where memory does not bound it), which its tokens and the
    prefix KV it stacks count against, a prefix column weighing ``prefix_weight`` tokens; and the
    byte budgets the KV actually held is counted against."""

    tokens_per_pass: int
    plan_tokens: int
    decode_rows: int
    questions_in_flight: int
    free_bytes: int | None
    memory_tokens: int | None = None
    prefix_weight: float = 0.0
    #: bytes: the KV a plan holds between waves may take (beyond it, held KV comes off a pass's
    #: memory), and a decoding group's stacked cache; one token's KV and one token's activations in
    #: a pass (None: memory does not bound them, a CPU)
    plan_bytes: int | None = None
    decode_bytes: int | None = None
    kv_token_bytes: int | None = None
    activation_token_bytes: int | None = None


def kv_bytes_per_token(model: Any) -> int:
    """Bytes of KV cache one token takes in ``model`` (all layers, keys and values)."""
    cfg = model.config.get_text_config(decoder=True)
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return int(cfg.num_hidden_layers * 2 * heads * dim * model.dtype.itemsize)


def _activation_bytes_per_token(model: Any) -> int:
    """Rough peak activations of one token in a forward pass (the widest layer's tensors)."""
    cfg = model.config.get_text_config(decoder=True)
    wide = getattr(cfg, "intermediate_size", 4 * cfg.hidden_size)
    return int((8 * cfg.hidden_size + 3 * wide) * model.dtype.itemsize)


def _free_bytes(torch: Any, device: str) -> int | None:
    """The device memory this process may plan with now: what the device has free plus the blocks
    PyTorch's allocator holds unused (they are this process's to reuse, yet the device counts them as
    taken), and on a GPU shared through Ray (a fractional ``num_gpus``) no more than its share of the
    whole device less what this process has allocated (weights, KV carried between calls)."""
    if device.startswith("cuda"):
        dev = torch.device(device)
        free, total = torch.cuda.mem_get_info(dev)
        allocated = torch.cuda.memory_allocated(dev)
        free += max(0, torch.cuda.memory_reserved(dev) - allocated)
        from ragray.worker import gpu_share

        share = gpu_share()
        return int(max(0, min(free, share * total - allocated)) if share else free)
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _clamp(value: float, low: int, high: int) -> int:
    return int(max(low, min(high, value)))


def gpu_sizes(model: Any, torch: Any, device: str, *, tokens_per_pass: int | None = None,
              batch_size: int | None = None) -> GpuSizes:
    """Sizes from the memory free on the device now (the model loaded); given values are kept.

    On CPU (the strategy run there for tests) the sizes are small fixed ones: RAM is not what
    limits a CPU, its cores are."""
    free = _free_bytes(torch, device)
    if not device.startswith("cuda") or free is None:
        per_pass = tokens_per_pass or 4096
        return GpuSizes(per_pass, 8 * per_pass, batch_size or 64, 8, free)
    return sizes_from_free(model, free, tokens_per_pass=tokens_per_pass, batch_size=batch_size)


def sizes_from_free(model: Any, free: int, *, tokens_per_pass: int | None = None,
                    batch_size: int | None = None) -> GpuSizes:
    """The gpu strategy's sizes for ``free`` bytes of device memory; given values are kept."""
    kv, activations = kv_bytes_per_token(model), _activation_bytes_per_token(model)
    per_prompt = kv * _PLANNED_PROMPT_TOKENS
    per_pass = tokens_per_pass or _clamp(_PASS_SHARE * free / activations, 1024, 32768)
    return GpuSizes(
        tokens_per_pass=per_pass,
        plan_tokens=_clamp(_PLAN_SHARE * free / kv, 8192, 1 << 20),
        decode_rows=batch_size or _clamp(_DECODE_SHARE * free / per_prompt, 1, 256),
        questions_in_flight=_clamp(_DECODE_SHARE * free / per_prompt, 4, 64),
        free_bytes=free,
        # what a pass may hold: its share and the decoding rows' (a pass and decoding are never live
        # at once), unclamped (the 32,768-token cap is for speed, not memory), never below the pass size
        memory_tokens=max(per_pass, int((_PASS_SHARE + _DECODE_SHARE) * free / activations)),
        prefix_weight=kv / activations,
        plan_bytes=int(_PLAN_SHARE * free),
        decode_bytes=int(_DECODE_SHARE * free),
        kv_token_bytes=kv,
        activation_token_bytes=activations,
    )
