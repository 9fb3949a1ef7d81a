"""A run's tables in the Python API: rows in memory as Arrow, a DataFrame only when asked for.

``run.passages`` is a :class:`Table`: its rows (``list(t)``, ``t[0]``, ``t.to_pylist()``), a
column (``t["influence"]``), its size (``len(t)``, ``t.columns``) and a page of it in a notebook
need nothing beyond ragray's own dependencies, so ``ragray.run`` and ``ragray.attribute`` work in
a ``ragray[generate]`` install; ``t.to_pandas()`` builds the DataFrame (``ragray[notebook]``), as
Ray Data, Hugging Face datasets and Polars hand theirs. An in-memory run's tables are the Arrow
tables the pipeline built; a run directory's are read from its Parquet files when first asked for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

__all__ = ["Table", "Tables"]

#: rows a notebook shows of a table (``to_pandas()`` has them all)
SHOWN_ROWS = 10
#: characters of a cell a notebook shows
SHOWN_CHARS = 80


def _cell(value: Any) -> str:
    text = "" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


class Table:
    """One table of a run (``run.passages`` …): rows of plain values, in the run's order."""

    def __init__(self, name: str, arrow: pa.Table) -> None:
        self.name = name
        self._arrow = arrow
        self._rows: list[dict[str, Any]] | None = None

    @property
    def columns(self) -> list[str]:
        return list(self._arrow.column_names)

    def to_arrow(self) -> pa.Table:
        return self._arrow

    def to_pylist(self) -> list[dict[str, Any]]:
        """Every row as a dict (missing values as None, lists as lists): a copy the caller may change."""
        return [dict(r) for r in self._pylist()]

    def _pylist(self) -> list[dict[str, Any]]:
        if self._rows is None:
            self._rows = self._arrow.to_pylist()
        return self._rows

    def to_pandas(self) -> Any:
        """The table as a pandas DataFrame (needs pandas: ``pip install 'ragray[notebook]'``)."""
        from ragray._imports import require

        require("pandas", extra="notebook", feature="a run's tables as DataFrames")
        return self._arrow.to_pandas()

    def __len__(self) -> int:
        return self._arrow.num_rows

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.to_pylist())

    def __getitem__(self, key: int | str) -> Any:
        """``t[i]``: row ``i`` as a dict; ``t["column"]``: that column as a list."""
        if isinstance(key, str):
            if key not in self._arrow.column_names:
                raise KeyError(f"{self.name} has no column {key!r} (columns: {', '.join(self.columns)})")
            return self._arrow.column(key).to_pylist()
        return dict(self._pylist()[key])

    def __repr__(self) -> str:
        return (f"<ragray table {self.name!r}: {len(self)} rows x {len(self.columns)} columns "
                f"({', '.join(self.columns[:8])}{', …' if len(self.columns) > 8 else ''}); "
                ".to_pandas() for a DataFrame>")

    def _repr_html_(self) -> str:
        from ragray.report.page import esc

        head = "".join(f"<th>{esc(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{esc(_cell(r.get(c)))}</td>" for c in self.columns) + "</tr>"
                       for r in self._pylist()[:SHOWN_ROWS])
        more = f"; the first {SHOWN_ROWS} shown" if len(self) > SHOWN_ROWS else ""
        return (f"<div><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
                f"<small>{esc(self.name)}: {len(self)} rows{more}; <code>.to_pandas()</code> for a DataFrame"
                "</small></div>")


class Tables(Mapping[str, Table]):
    """A run's tables by name: Arrow tables already built (an in-memory run's), or Parquet files
    read when a table is first asked for (a run directory's)."""

    def __init__(self, built: Mapping[str, pa.Table], files: Mapping[str, bytes]) -> None:
        self._built = dict(built)
        self._files = {name[: -len(".parquet")]: data for name, data in files.items() if name.endswith(".parquet")}
        self._names = sorted({*self._built, *self._files})
        self._read: dict[str, Table] = {}

    def __getitem__(self, name: str) -> Table:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._read:
            arrow = self._built.get(name)
            if arrow is None:
                import pyarrow.parquet as pq

                arrow = pq.read_table(pa.BufferReader(self._files[name]))
            self._read[name] = Table(name, arrow)
        return self._read[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
