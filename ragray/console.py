"""Console summaries as rich tables: readable at a glance in a terminal, plain text in logs.

Colour and box lines only when stdout is a terminal; piped or captured output gets the same
table as plain aligned columns, one line per row (never wrapped), trailing blanks stripped.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

__all__ = ["console", "print_line", "print_pairs", "print_table", "progress_bar", "show_loads"]


def show_loads() -> None:
    """Show what loads and from where (the ``ragray.loads`` logger) on stderr, once per process,
    unless the user configured that logger: a model load then says itself before its own bar."""
    logger = logging.getLogger("ragray.loads")
    if logger.handlers or logger.level not in (logging.NOTSET, logging.INFO):
        return
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("ragray: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes, not the stream of the first call:
    a notebook, a test's capture or a redirect set up later still gets the line (a bound stream
    that has since closed would print a logging error instead). A line of its own: tqdm clears the
    progress bars around it and redraws them after (a load starts while the calls bar is drawn)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _bar_class().write(self.format(record), file=sys.stderr)
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - logging's own rule: a failed log line never raises
            self.handleError(record)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def progress_bar(*args: Any, **kwargs: Any) -> Any:
    """A tqdm bar: the notebook widget where Jupyter's widgets are installed, else text (``tqdm.auto``
    would warn in a notebook without them, and fall back to text anyway)."""
    return _bar_class()(*args, **kwargs)


@functools.lru_cache(maxsize=1)
def _bar_class() -> Any:
    import importlib.util

    if importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm
    else:
        from tqdm.std import tqdm
    return tqdm


def print_line(line: str) -> None:
    """One line on stdout that a progress bar on stderr does not tear (tqdm clears and redraws its
    bars around it)."""
    _bar_class().write(line, file=sys.stdout)
    sys.stdout.flush()


def console() -> Console:
    """A console on the current ``sys.stdout`` (so test capture and redirection see the output)."""
    tty = sys.stdout.isatty()
    width = None if tty else 100_000  # logs and pipes: never wrap a row
    return Console(file=sys.stdout, width=width, highlight=False, soft_wrap=False, no_color=not tty,
                   emoji=False, legacy_windows=False)


def _table(title: str | None, headers: Sequence[str], numeric: Iterable[int] = (), show_header: bool = True) -> Table:
    tty = sys.stdout.isatty()
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD if tty else None,
              show_header=show_header, header_style="bold" if tty else "", pad_edge=False, expand=False)
    nums = set(numeric)
    for i, h in enumerate(headers):
        t.add_column(h, justify="right" if i in nums else "left", overflow="fold")
    return t


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, title: str | None = None,
                numeric: Iterable[int] = ()) -> None:
    """One table: a header row, then ``rows`` (cells printed with ``str``; ``None`` as "-")."""
    t = _table(title, headers, numeric)
    for row in rows:
        t.add_row(*("-" if c is None else str(c) for c in row))
    _emit(t)


def _emit(table: Table) -> None:
    """Print ``table`` with trailing blanks stripped from every line (column padding)."""
    c = console()
    with c.capture() as captured:
        c.print(table)
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def print_pairs(pairs: Iterable[tuple[str, object]], *, title: str | None = None) -> None:
    """A two-column "what: value" table (a run's summary)."""
    t = _table(title, ["", ""], show_header=False)
    for key, value in pairs:
        t.add_row(key, "-" if value is None else str(value))
    _emit(t)
