"""HTML building blocks shared by the run report and the dashboard: page shell, cards, tables.

Everything is inline (CSS, the few lines of JS, SVG charts): a page opens offline from disk. Every
number a test may check is written with ``data-key``/``data-value`` attributes next to its text.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["CSS", "badge", "card", "cards", "esc", "fmt", "page", "table"]

CSS = """
:root { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #111827; }
body { margin: 0 auto; max-width: 1180px; padding: 16px 24px 48px; }
h1 { font-size: 1.5rem; margin: 8px 0 2px; } h2 { font-size: 1.15rem; margin: 28px 0 8px;
  border-bottom: 1px solid #e5e7eb; padding-bottom: 4px; } h3 { font-size: 1rem; margin: 16px 0 6px; }
.sub { color: #4b5563; font-size: .9rem; } .muted { color: #6b7280; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 10px 0; }
.card { border: 1px solid #e5e7eb; border-radius: 8px; padding: 8px 12px; min-width: 128px; background: #fafafa; }
.card .label { font-size: .78rem; color: #6b7280; }
.card .value { font-size: 1.3rem; font-weight: 600; } .card .note { font-size: .75rem; color: #6b7280; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
.chart { border: 1px solid #e5e7eb; border-radius: 8px; background: white; font-size: 11px; }
.chart .chart-title { font-size: 12px; font-weight: 600; } .chart .axis { font-size: 11px; fill: #374151; }
.chart .tick { font-size: 10px; fill: #4b5563; }
table.data { border-collapse: collapse; width: 100%; font-size: .85rem; margin: 6px 0; }
table.data th, table.data td { border-bottom: 1px solid #e5e7eb; padding: 4px 6px; text-align: left;
  vertical-align: top; } table.data th { background: #f3f4f6; position: sticky; top: 0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; border-radius: 9px; padding: 0 7px; margin: 1px 2px 1px 0; font-size: .72rem;
  background: #e5e7eb; color: #111827; white-space: nowrap; }
.badge.divergent, .badge.inverted, .badge.fail, .badge.error { background: #fee2e2; color: #991b1b; }
.badge.single_passage_dominance, .badge.buried_evidence, .badge.top1_ignored { background: #fef3c7; color: #92400e; }
.badge.context_ignored { background: #e0e7ff; color: #3730a3; } .badge.pass, .badge.ok { background: #dcfce7; color: #166534; }
.badge.interrupted { background: #ffedd5; color: #9a3412; }
.badge.simulated { background: #f3e8ff; color: #6b21a8; font-size: .85rem; }
details > summary { cursor: pointer; } .passage { max-width: 520px; }
.answer { max-width: 360px; max-height: 4.6em; overflow: auto; }
.filters { margin: 8px 0; display: flex; gap: 8px; flex-wrap: wrap; align-items: center; }
.filters label { font-size: .85rem; } code { font-size: .85em; } .small { font-size: .75rem; }
.error-message { color: #991b1b; background: #fee2e2; padding: 6px 10px; border-radius: 6px; }
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def fmt(value: Any, spec: str = ".3f") -> str:
    """A number for display ("–" when missing)."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def _data(key: str | None, value: Any) -> str:
    if key is None:
        return ""
    return f' data-key="{esc(key)}" data-value="{esc(json.dumps(value))}"'


def card(label: str, value: Any, *, key: str | None = None, note: str = "", spec: str = ".3f",
         data: Any = None) -> str:
    """A labelled number; ``data-value`` carries ``data`` when given (the summary's own value
    behind a value shown in words), else ``value``."""
    return (f'<div class="card"{_data(key, value if data is None else data)}><div class="label">{esc(label)}</div>'
            f'<div class="value">{esc(fmt(value, spec))}</div>'
            + (f'<div class="note">{esc(note)}</div>' if note else "") + "</div>")


def cards(items: Iterable[str]) -> str:
    return '<div class="cards">' + "".join(items) + "</div>"


def badge(text: str, cls: str | None = None) -> str:
    return f'<span class="badge {esc(cls or text)}">{esc(text)}</span>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str] | str], *, cls: str = "data", attrs: str = "",
          numeric: Sequence[int] = ()) -> str:
    """``rows``: lists of cells already in HTML (escape text with :func:`esc`), or whole ``<tr>``
    strings; ``numeric`` columns align right."""
    head = "".join(f'<th{" class=num" if i in numeric else ""}>{esc(h)}</th>' for i, h in enumerate(headers))
    body = []
    for row in rows:
        if isinstance(row, str):  # a whole <tr> built by the caller (with its own attributes)
            body.append(row)
            continue
        cells = "".join(f'<td{" class=num" if i in numeric else ""}>{c}</td>' for i, c in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    return f'<table class="{cls}"{attrs}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def page(title: str, body: str, *, script: str = "", style: str = "") -> str:
    """A whole HTML page: ``style`` adds CSS after the shared rules, ``script`` runs at the end."""
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            f'<meta name=viewport content="width=device-width, initial-scale=1"><title>{esc(title)}</title>'
            f"<style>{CSS}{style}</style></head><body>{body}"
            + (f"<script>{script}</script>" if script else "") + "</body></html>")
