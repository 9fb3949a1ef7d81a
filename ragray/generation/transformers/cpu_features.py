"""What the CPU can do fast, and why ``generation.dtype: auto`` is float32 on every CPU anyway.

Measured on 2-core cloud VMs of four kinds (SmolLM2-135M, ragray's default run):

- an Intel Xeon with AMX (``amx_bf16``) ran it 2.6x faster in bf16 than in fp32;
- an AMD EPYC with ``avx512_bf16`` ran it 1.6x faster in bf16 (17 against 28 s a question,
  ``benchmarks/results/dtype_default_epyc.json``);
- an Intel Xeon with ``avx512_bf16`` but no AMX ran it 1.5x *slower* in bf16 (29.2 against 19.1 s a
  question, ``benchmarks/results/dtype_default.json``; a 1024 x 1024 matrix product 1.9x slower);
- an AMD EPYC with AVX2 only emulates bf16 and ran it 4–6x *slower*.

Speed is not what decides the default: on the same 20 questions bf16 changed the state or verdict
of 4 (that Xeon) and 5 (that EPYC) against fp32, so a default that followed the CPU would give two
users of one command different verdicts. ``auto`` is therefore fp32 on a CPU, which is also the
dtype whose numbers equal the reference implementation's; ``generation.dtype: bfloat16`` (or
``RAGRAY_CPU_BF16=1``, which makes ``auto`` take bf16 on a CPU) trades that for speed, and the run
then says its verdicts can come from rounding. :func:`native_bf16` still tells whether bf16 is
faster here (``benchmarks/bench_dtype.py`` records it): AMX by its flag; bf16 instructions without
AMX, or no flags to read (not Linux), by a tiny timing, a 256 x 256 matrix product in each dtype,
bf16 only if it is at least :data:`TIMING_MARGIN` times faster (well under a second, once per
process).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["AMX_FLAGS", "BF16_FLAGS", "TIMING_MARGIN", "auto_bf16_on_cpu", "bf16_faster_by_timing", "cpu_flags",
           "native_bf16"]

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
    """True when bf16 is faster than fp32 on this CPU: AMX by its flag; bf16 instructions without
    AMX, or no flags to read, by a tiny timing; else False."""
    flags = cpu_flags()
    if any(flag in flags for flag in AMX_FLAGS):
        return True
    if not flags or any(flag in flags for flag in BF16_FLAGS):
        return bf16_faster_by_timing()
    return False


def auto_bf16_on_cpu() -> bool:
    """Whether ``generation.dtype: auto`` takes bf16 on a CPU: only where ``RAGRAY_CPU_BF16=1``
    asks for it (fp32 otherwise, whatever bf16 would gain here: the module's docstring says why)."""
    return os.environ.get("RAGRAY_CPU_BF16", "").strip() == "1"
