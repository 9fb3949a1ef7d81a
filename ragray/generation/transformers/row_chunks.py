"""Row-wise layers run over cache-sized blocks of rows.

An RMSNorm over a packed prefill's ~8k rows is six elementwise passes (upcast, square, mean,
scale, downcast, weight) over tensors of 10-20 MB each, and on a 2-core CPU each pass goes to
memory: ~22 ms per norm for 8000 x 576 bf16, two norms per layer. The norm is row-wise, so running
it on blocks of 256 rows keeps every pass in L2 and gives the same bits (~8 ms). The MLP
(gate/up GEMMs, SiLU, product, down GEMM) is row-wise too: on blocks of 2048 rows its 1536-wide
intermediates stay in cache while the GEMMs still have rows enough for full speed (SmolLM2 bf16,
8000 rows: ~105 -> ~70 ms per layer). :func:`chunk_rows` wraps a model's RMSNorm and MLP modules
that way; inputs of few rows (decoding) take the original path unchanged.

Norms give the same bits. An MLP block gives the same bits in float32; in bfloat16 the GEMM
library may block the reduction differently for another row count, as it does for any other
batch shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["MLP_BLOCK_ROWS", "NORM_BLOCK_ROWS", "chunk_rows", "row_chunked"]

NORM_BLOCK_ROWS = 256
MLP_BLOCK_ROWS = 2048


def row_chunked(forward: Callable[[Any], Any], rows: int = NORM_BLOCK_ROWS) -> Callable[..., Any]:
    """``forward`` (a function of one tensor, independent per row of its last dimension) applied
    to blocks of ``rows`` rows of its input, written into one output."""

    def run(x: Any, *args: Any, **kwargs: Any) -> Any:
        n = x.numel() // x.shape[-1] if x.dim() else 0
        if args or kwargs or n <= 2 * rows:
            return forward(x, *args, **kwargs)
        flat = x.reshape(n, x.shape[-1])
        first = forward(flat[:rows])
        out = first.new_empty((n, first.shape[-1]))
        out[:rows] = first
        for start in range(rows, n, rows):
            out[start : start + rows] = forward(flat[start : start + rows])
        return out.view(*x.shape[:-1], first.shape[-1])

    return run


def chunk_rows(model: Any, norm_rows: int = NORM_BLOCK_ROWS, mlp_rows: int = MLP_BLOCK_ROWS) -> int:
    """Wrap the forward of every ``*RMSNorm`` and ``*MLP`` module of ``model`` with
    :func:`row_chunked` (once); returns how many were wrapped."""
    count = 0
    for module in model.modules():
        name = type(module).__name__
        rows = norm_rows if name.endswith("RMSNorm") else mlp_rows if name.endswith("MLP") else None
        if rows and not getattr(module, "_ragray_row_chunked", False):
            module.forward = row_chunked(module.forward, rows)
            module._ragray_row_chunked = True
            count += 1
    return count
