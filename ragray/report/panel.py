"""The validity panel of ``summary.json`` (key ``panel``) as one verdict, one sentence and a table.

Shape read here::

    {"available": bool, "reason": str | None, "verdict": "PASS" | "FAIL" | "UNDECIDED" | "NOT MEASURED",
     "sentence": str, "metric": str, "primary": subset key,
     "subsets": [{"key", "name", "definition", "n"}],
     "rows": [{"name", "control": bool, "values": {subset key: {"mean", "low", "high"} | None},
               "beats_every_control": bool | None}],
     "edit_test": {...}}   # only with influence.edit_test: ragray.metrics.edit_panel, shown as one line

Rows are measures, columns subsets (the primary one first); a control is marked "free control".
Runs without the key keep the older validity sections (:mod:`ragray.report.trust`).
"""

from __future__ import annotations

import json
from typing import Any

from ragray.metrics.edit_panel import edit_test_line
from ragray.report.page import esc, fmt, table

__all__ = ["PANEL_CSS", "panel_section"]

PANEL_CSS = """
.pverdict { font-weight: 700; border-radius: 6px; padding: 1px 8px; margin-right: 6px; }
.pverdict.PASS { background: #dcfce7; color: #166534; } .pverdict.FAIL { background: #fee2e2; color: #991b1b; }
.pverdict.UNDECIDED, .pverdict.NOT-MEASURED { background: #e5e7eb; color: #374151; }
th.primary, td.primary { background: #eff6ff; }
"""

_HEADING = "<h2>Does the attribution find what the model used?</h2>"


def _cell(v: dict[str, Any] | None) -> str:
    if not v or v.get("mean") is None:
        return "–"
    return f"{fmt(v['mean'], '.2f')} <span class=muted>[{fmt(v.get('low'), '.2f')}, {fmt(v.get('high'), '.2f')}]</span>"


def panel_section(panel: dict[str, Any]) -> str:
    """The panel: its verdict and sentence once, then measures × subsets with 95% intervals."""
    verdict = str(panel.get("verdict") or "NOT MEASURED")
    head = (f'<p data-key="panel.verdict" data-value="{esc(json.dumps(verdict))}">'
            f'<span class="pverdict {esc(verdict.replace(" ", "-"))}">{esc(verdict)}</span>'
            f'{esc(panel.get("sentence") or "")}</p>')
    edit = _edit_test(panel.get("edit_test"))
    if not panel.get("available"):
        return (_HEADING + head + f'<p class=muted data-key="panel.available" data-value="false">not measured: '
                f'{esc(panel.get("reason") or "no reason given")}</p>' + edit)
    primary = panel.get("primary")
    subsets = sorted(panel.get("subsets") or [], key=lambda s: s.get("key") != primary)
    headers = ["measure"] + [f'{s.get("name") or s.get("key")} ({s.get("n")})' for s in subsets] + ["beats every control"]
    rows = []
    for r in panel.get("rows") or []:
        name = esc(r.get("name")) + (' <span class="badge ok">free control</span>' if r.get("control") else "")
        cells = "".join(f'<td class="num{" primary" if s.get("key") == primary else ""}" '
                        f'data-subset="{esc(s.get("key"))}">{_cell((r.get("values") or {}).get(s.get("key")))}</td>'
                        for s in subsets)
        beats = "" if r.get("control") else fmt(r.get("beats_every_control"))
        rows.append(f'<tr data-row="{esc(r.get("name"))}"><td>{name}</td>{cells}<td>{esc(beats)}</td></tr>')
    defs = "".join(f"<li><b>{esc(s.get('name') or s.get('key'))}</b> ({s.get('n')} questions)"
                   f"{' — the one the verdict reads' if s.get('key') == primary else ''}: "
                   f"{esc(s.get('definition') or '')}</li>" for s in subsets)
    numeric = tuple(range(1, len(subsets) + 1))
    return (_HEADING + head + f"<p class=sub>{esc(panel.get('metric') or '')}: mean over questions "
            "[95% interval]; a free control costs no model call.</p>"
            + table(headers, rows, attrs=' id="panel"', numeric=numeric) + f"<ul class=small>{defs}</ul>" + edit)


def _edit_test(block: dict[str, Any] | None) -> str:
    """The edit test's one line (nothing when the run did not make it)."""
    line = edit_test_line(block)
    if line is None:
        return ""
    return (f'<p data-key="panel.edit_test.available" data-value="{esc(json.dumps(bool(block.get("available"))))}">'
            f"{esc(line)}</p>")
