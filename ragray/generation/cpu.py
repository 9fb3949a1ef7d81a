"""What the CPU can do fast: ``generation.dtype: auto`` picks bfloat16 only where it is native.

Measured on machines of one kind (2-core cloud VMs): an Intel Xeon with AMX ran SmolLM2 2.6x
faster in bf16 than in fp32; an AMD EPYC with AVX2 only emulates bf16 and ran it 4–6x *slower*.
So bf16 is chosen on CPU only when the flags say the hardware has it (``amx_bf16`` or
``avx512_bf16`` in ``/proc/cpuinfo``). ``RAGRAY_CPU_BF16=1`` / ``0`` overrides the detection
(the test suite pins ``0``: its reference-equality tests compare fp32 numbers).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

__all__ = ["BF16_FLAGS", "cpu_flags", "native_bf16"]

#: /proc/cpuinfo flags of native bf16 matrix math
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


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


def native_bf16() -> bool:
    """True when bf16 is fast on this CPU (or ``RAGRAY_CPU_BF16`` says so)."""
    forced = os.environ.get("RAGRAY_CPU_BF16", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    return any(flag in cpu_flags() for flag in BF16_FLAGS)
