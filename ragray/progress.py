"""Model calls as they happen, for a bar that moves inside a question.

A question's ablations go to the backend in a few large calls (a whole design scored at once), so
a bar that counts questions can stand still for minutes on a busy CPU. While a command drains its
questions it opens a :func:`calls_bar`: each question adds the calls it plans
(:func:`calls_planned`), and the backend reports each prompt as it finishes (:func:`calls_done`:
the transformers backend per prompt it scores or generates; other backends, and the call cache's
hits, when their call returns). One bar per process (Ray actors report through Ray Data's own
progress); with no bar open the reports cost nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["calls_bar", "calls_done", "calls_planned"]

_LOCK = threading.Lock()
_BAR: list[Any] = []  # the open bar, if any


def calls_planned(n: int) -> None:
    """``n`` more model calls are planned (negative: fewer than planned were needed)."""
    with _LOCK:
        if _BAR and n:
            bar = _BAR[-1]
            bar.total = max(bar.n, (bar.total or 0) + n)
            bar.refresh()


def calls_done(n: int = 1) -> None:
    """``n`` model calls finished."""
    with _LOCK:
        if _BAR and n:
            bar = _BAR[-1]
            if bar.total is not None and bar.n + n > bar.total:
                bar.total = bar.n + n
            bar.update(n)


@contextmanager
def calls_bar(enabled: bool, desc: str = "model calls") -> Iterator[None]:
    """A bar of model calls (done of planned, with the rate) while the block runs."""
    if not enabled:
        yield
        return
    from ragray.console import progress_bar

    # disable=False said, not left to tqdm's default: tqdm reads TQDM_DISABLE once, when first imported,
    # so an earlier --no-progress command of the same process would hide this bar for good
    # smoothing 0: the rate is the average since the bar opened, not the last few calls — a generated
    # answer takes many times a scored context, so a moving rate swings by an order of magnitude
    bar = progress_bar(total=0, desc=desc, unit="call", position=1, leave=False, dynamic_ncols=True, disable=False,
                       smoothing=0)
    with _LOCK:
        _BAR.append(bar)
    try:
        yield
    finally:
        with _LOCK:
            _BAR.remove(bar)
        bar.close()
