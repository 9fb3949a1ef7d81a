"""What the CPU can do fast: ``generation.dtype: auto`` picks bfloat16 only where it is faster.

Measured on 2-core cloud VMs of three kinds (SmolLM2-135M, ragray's default run):

- an Intel Xeon with AMX (``amx_bf16``) ran it 2.6x faster in bf16 than in fp32;
- an Intel Xeon with ``avx512_bf16`` but no AMX ran it 1.5x *slower* in bf16 (29.2 against 19.1 s a
  question, ``benchmarks/results/dtype_default.json``; a 1024 x 1024 matrix product 1.9x slower);
- an AMD EPYC with AVX2 only emulates bf16 and ran it 4–6x *slower*.

So AMX chooses bf16 at once; where the CPU has bf16 instructions without AMX (``avx512_bf16``), or
no flags to read (not Linux), a tiny timing decides: a 256 x 256 matrix product in each dtype, bf16
only if it is at least :data:`TIMING_MARGIN` times faster (well under a second, once per process);
anything else is fp32, which is also the dtype whose numbers equal the reference implementation's.
``RAGRAY_CPU_BF16=1`` / ``0`` overrides the detection (the test suite pins ``0``: its
reference-equality tests compare fp32 numbers).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["AMX_FLAGS", "BF16_FLAGS", "TIMING_MARGIN", "bf16_faster_by_timing", "cpu_flags", "native_bf16"]

#: /proc/cpuinfo flags of bf16 matrix units: bf16 without timing
AMX_FLAGS = ("amx_bf16",)
#: flags of bf16 instructions that may or may not beat fp32 (slower on an AVX-512 Xeon without AMX): timed
BF16_FLAGS = ("avx512_bf16",)
#: without flags, bf16 must be this much faster than fp32 in the timing to be chosen
TIMING_MARGIN = 1.3


@functools.lru_cache(maxsize=1)
def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags (empty where there is no ``/proc/cpuinfo``: not Linux)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def _matmul_seconds(dtype_name: str, size: int = 256, repeats: int = 3) -> float:
    """Best of ``repeats`` timings of one ``size`` x ``size`` matrix product in ``dtype_name``."""
    import torch

    a = torch.randn(size, size).to(getattr(torch, dtype_name))
    a @ a  # warm-up: kernels chosen, memory touched
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - start)
    return best


@functools.lru_cache(maxsize=1)
def bf16_faster_by_timing(seconds: Callable[[str], float] = _matmul_seconds) -> bool:
    """True when a bf16 matrix product beats fp32 by :data:`TIMING_MARGIN` on this CPU."""
    return seconds("float32") >= TIMING_MARGIN * seconds("bfloat16")


def native_bf16() -> bool:
    """True when bf16 is faster than fp32 on this CPU (or ``RAGRAY_CPU_BF16`` says so): AMX by its
    flag; bf16 instructions without AMX, or no flags to read, by a tiny timing; else False."""
    forced = os.environ.get("RAGRAY_CPU_BF16", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    flags = cpu_flags()
    if any(flag in flags for flag in AMX_FLAGS):
        return True
    if not flags or any(flag in flags for flag in BF16_FLAGS):
        return bf16_faster_by_timing()
    return False
