"""The top of a run's ``report.html``: a one-line header and one headline.

The headline is the tie-robust misaligned rate (``summary.json`` ``alignment``) with its 95%
Wilson interval and one sentence saying what it means; runs written before that measure say so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragray.metrics.stats import share_ci
from ragray.report.page import badge, esc, fmt
from ragray.report.run_console import correct_line, partial_line, stage_line, unverdicted_words
from ragray.report.rundata import RunData

__all__ = ["LEAD_CSS", "headline", "run_header"]

LEAD_CSS = """
.runline { font-size: .9rem; color: #374151; margin: 4px 0 10px; }
.runline h1 { display: inline; font-size: 1rem; margin: 0 6px 0 0; }
.headline { border: 1px solid #e5e7eb; border-left: 4px solid #2563eb; border-radius: 6px; padding: 8px 12px;
  margin: 0 0 12px; background: #f8fafc; }
.headline .big { font-size: 1.25rem; font-weight: 600; } .headline p { margin: 4px 0 0; font-size: .88rem; }
"""


def run_header(data: RunData) -> str:
    """One line: the run, its model, its dataset and how many questions."""
    cfg, s = data.config, data.summary
    gen = cfg.get("generation") or {}
    model = s.get("model") or gen.get("model") or "–"
    backend = s.get("backend") or gen.get("backend")
    n = s.get("n_questions", len(data.table("questions")))
    made = ("results uploaded from another tool" if data.uploaded_file is not None
            else f"model {model}" + (f" via {backend}" if backend else ""))
    bits = [made, f"dataset {data.dataset}", f"{n} questions"]
    sim = " " + badge("simulated", "simulated") if data.simulated else ""
    return (f'<div class=runline title="{esc(data.path or "in memory")}"><h1>ragray run: {esc(data.name)}</h1>{sim}'
            f"{esc(' · '.join(bits))}</div>")


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _lines(questions: Sequence[Mapping[str, Any]]) -> str:
    """The console's lines under its headline: answered correctly / declined, and wrong answers by stage."""
    if not questions:
        return ""
    lines = [correct_line(questions), stage_line(questions)]
    return "".join(f'<p data-key="headline.line">{esc(line)}</p>' for line in lines if line)


def headline(summary: dict[str, Any], questions: Sequence[Mapping[str, Any]] = ()) -> str:
    """The misaligned rate with its interval, what it means, and the console's lines under it
    (``questions``: the run's question rows), in one box."""
    partial = partial_line(summary)
    if partial:  # the run stopped early: said before anything else
        return f'<p class=partial data-key="partial">{esc(partial)}</p>' + _headline(summary, questions)
    return _headline(summary, questions)


def _headline(summary: dict[str, Any], questions: Sequence[Mapping[str, Any]]) -> str:
    a = summary.get("alignment")
    n_all = summary.get("n_questions") or 0
    if not a:
        return ('<div class=headline data-key="headline.misaligned_rate" data-value="null"><div class=big>'
                "Misaligned rate: not measured</div><p>This run was written before the tie-robust measure; "
                "the older Spearman ρ measures are further down.</p></div>")
    n = a.get("n_scored") or 0
    rate = a.get("misaligned_rate")
    threshold = fmt(a.get("misalignment_threshold"), "g")
    unscored = max(0, n_all - n)
    why = unverdicted_words(questions) if questions else None
    rest = (f" {unscored} of {n_all} questions have no alignment verdict" + (f": {why}." if why else
            ": their answer did not depend on any single passage, or the question failed.") if unscored else "")
    if not n or rate is None:
        return ('<div class=headline data-key="headline.misaligned_rate" data-value="null"><div class=big>'
                "Misaligned rate: not measured</div><p>No question's answer depended on its passages, so there "
                f"is nothing to compare with the retrieval order.{esc(rest)}</p>{_lines(questions)}</div>")
    count = round(rate * n)
    ci = share_ci(count, n)
    return (f'<div class=headline data-key="headline.misaligned_rate" data-value="{esc(rate)}">'
            f"<div class=big>{_pct(rate)} of questions misaligned "
            f'<span class=muted>({count} of {n}; 95% CI {_pct(ci["low"])}–{_pct(ci["high"])})</span></div>'
            f"<p>A question is misaligned when the passages its answer relied on sit low in the retriever's "
            f"order (usage nDCG below {esc(threshold)}): the retriever put first what the model did not use. "
            f"Each question below shows its passages in retrieval order with how much "
            f"the answer changed without each one.{esc(rest)}</p>{_lines(questions)}</div>")
