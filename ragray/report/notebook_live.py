"""In a notebook, ``ragray.run`` shows its question table growing as questions finish: one output
cell, updated in place (the console's :class:`~ragray.report.run_console.LiveTable` cells as HTML).
"""

from __future__ import annotations

import sys
from typing import Any

from ragray.report.page import esc
from ragray.report.run_console import QUESTION_COLUMNS, LiveTable

__all__ = ["NotebookLive", "in_notebook"]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (not a plain IPython terminal, not a script)."""
    if "ipykernel" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


class NotebookLive:
    """The run line and the question table in one notebook output, updated as each question finishes."""

    def __init__(self) -> None:
        self.table: LiveTable | None = None
        self.title = ""
        self.rows: list[tuple[str, ...]] = []
        self.handle: Any = None

    def _html(self) -> Any:
        from IPython.display import HTML

        head = "".join(f"<th>{esc(h)}</th>" for h in QUESTION_COLUMNS)
        body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in self.rows)
        return HTML(f"<div><b>{esc(self.title)}</b><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
                    f"</table></div>")

    def start(self, info: Any) -> None:
        from IPython.display import display

        self.table = LiveTable(info.question_ids)
        self.title = (f"ragray {info.command}: {info.n_questions} question{'s' * (info.n_questions != 1)} "
                      f"({info.n_resumed} resumed), {info.model} "
                      f"via {info.backend}, {info.passages_from}")
        self.handle = display(self._html(), display_id=True)

    def question(self, rows: dict[str, Any]) -> None:
        if self.table is None or "passages" not in rows:  # interpret runs have no passages table
            return
        self.rows.append(self.table.cells(rows["question"], rows["passages"]))
        if self.handle is not None:
            self.handle.update(self._html())
