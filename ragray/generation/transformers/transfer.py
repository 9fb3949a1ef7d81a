"""Host tensors onto the device without a host wait.

A plain ``tensor.to("cuda")`` from ordinary (pageable) host memory waits until the device has run
everything queued before it: the GPU engine's passes would each begin with the device idle while
the host builds the pass (its ids, positions, mask and stacked prefix KV) and launches its first
kernels. Copied from pinned memory with ``non_blocking``, the copy is queued behind the device's
work instead, so the host prepares pass ``i + 1`` while the device runs pass ``i``; the only host
waits left are where the host needs a device value (a scoring call's sums, decoding's next tokens).
The numbers are the same: the same kernels run on the same inputs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["to_device"]


def to_device(torch: Any, device: str, *tensors: Any) -> list[Any]:
    """``tensors`` (on the host) on ``device``, queued without waiting for the device's work: through
    pinned memory on CUDA (PyTorch keeps a pinned block until its copy has run), as they are on CPU."""
    pin = device.startswith("cuda")
    return [(t.pin_memory() if pin else t).to(device, non_blocking=True) for t in tensors]
