"""Packed prefill's records: the prompts' spans in one packed forward (the CPU engine's way to run the
new tokens of many prompts that continue prefixes of other prompts in one forward pass per wave).

Ablations of one question share long prefixes: drop-one ablations share the baseline up to the
removed passage, random subsets share the passages before their first difference. Run one by one,
the unshared rests (a few hundred to ~1.3k tokens each) give the linear layers small matrices: on
a 2-core AMX Xeon bf16 GEMMs reach ~300 GFLOP/s at 150 rows and ~700 at 4000. Packed, every linear
layer, norm and activation runs once over many prompts' rests, and only attention is done per
prompt: :func:`~ragray.generation.transformers.attention.packed_attention` gives each prompt's
queries the cached keys of its shared prefix (pieces of earlier waves) plus its own new keys,
causally, exactly what a separate prefill sees. The waves come from
:func:`~ragray.generation.transformers.plan.wave_plan`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragray.generation.transformers.kv import Piece

__all__ = ["Packed", "Span"]


@dataclass(frozen=True)
class Span:
    """One prompt in a packed forward: rows ``[start, start + length)`` of the packed input are its
    positions ``[reuse, reuse + length)``; positions below ``reuse`` are the KV ``prefix`` pieces."""

    prefix: tuple[Piece, ...]
    start: int
    length: int

    @property
    def reuse(self) -> int:
        return sum(end - begin for _, begin, end in self.prefix)


@dataclass(frozen=True)
class Packed:
    """What :func:`packed_attention` needs besides q/k/v: the prompts' spans."""

    spans: tuple[Span, ...]
