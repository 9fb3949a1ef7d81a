"""``report.html``: the self-contained report every run directory gets (opens offline from disk).

- ``run`` / ``simulate`` (:func:`run_report`): a one-line header and the misaligned rate with its
  interval, then the questions as cards (passages in retrieval order with title, text, influence
  bar, used and gold marks; a filter by verdict), the plots ragray recommends (usage nDCG per
  question, mean influence by retrieval rank), the validity panel (``summary.json`` ``panel``, or
  the older validity sections), the alignment cards, the Spearman-based summary and flags, and
  last the ρ plots as details.
- The dashboard's run page (:func:`report_body`) keeps the table layout: alignment and validity
  first, summary cards, plots, then the per-question table with flag filters and drill-downs.
- ``interpret``: case shares per K with Wilson intervals, controls, deletion curves
  (most-first vs least-first), and the per-question cases.
- ``audit``: pass rate, scores and coverage, score histogram against the pass mark, per-query table.

Numbers shown are also in ``data-key``/``data-value`` attributes, so tests check the page
against ``summary.json``.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragray.audit.why import fail_words
from ragray.report import svg
from ragray.report.interpret_console import LEGEND, verdict_label
from ragray.report.interpret_console import headline as headline_words
from ragray.report.lead import LEAD_CSS, headline, run_header
from ragray.report.page import badge, card, cards, esc, fmt, page, table
from ragray.report.run_console import partial_line
from ragray.report.panel import PANEL_CSS, panel_section
from ragray.report.plots import detail_plots, recommended_plots
from ragray.report.questions import QUESTIONS_CSS, VERDICT_SCRIPT, question_cards
from ragray.report.rundata import RunData, read_run
from ragray.report.trust import alignment_section, evidence_section, validity_section
from ragray.rows.audit import AuditEntry
from ragray.store.rundir import RunDir

__all__ = ["FILTER_SCRIPT", "header", "question_detail", "render_report", "report_body", "run_report",
           "write_report"]

log = logging.getLogger(__name__)

FILTER_SCRIPT = """
document.querySelectorAll('[data-filter-for]').forEach(function (box) {
  var target = document.getElementById(box.getAttribute('data-filter-for'));
  function apply() {
    var on = Array.from(box.querySelectorAll('input:checked')).map(function (i) { return i.value; });
    var shown = 0;
    target.querySelectorAll('tbody > tr[data-flags]').forEach(function (tr) {
      var flags = tr.getAttribute('data-flags').split(' ');
      var ok = on.every(function (f) { return flags.indexOf(f) >= 0; });
      tr.style.display = ok ? '' : 'none';
      if (ok) shown++;
    });
    var count = box.querySelector('.shown'); if (count) count.textContent = shown;
  }
  box.addEventListener('change', apply); apply();
});
"""


def _mean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def header(data: RunData, title: str) -> str:
    cfg = data.config
    gen, ret = cfg.get("generation") or {}, cfg.get("retrieval") or {}
    sim = badge("simulated", "simulated") if data.simulated else ""
    s = data.summary or {}
    retrieved = s.get("passages_from") or f"{ret.get('retriever', '–')} top-{ret.get('top_k', '–')}"
    model = f"model {gen.get('model', '–')} via {gen.get('backend', '–')}"
    if data.kind == "audit":  # documents, not passages; a model only for the optional LLM steps
        retrieved = f"{s.get('retriever') or ret.get('retriever', '–')} top-{s.get('k', '–')} documents"
        model = model + " (aspects and explanations)" if (cfg.get("audit") or {}).get("llm") else "no model"
    if data.uploaded_file is not None:  # another tool's results: no model or retriever of ragray's ran
        model, retrieved = "results uploaded from another tool", f"{fmt((s.get('uploaded') or {}).get('rows'))} rows"
    bits = [f"{data.kind}", model, retrieved, f"dataset {data.dataset}"]
    return (f"<h1>{esc(title)} {sim}</h1><div class=sub>{esc(' · '.join(bits))}</div>"
            f"<div class=\"sub muted\">{esc(str(data.path or 'in memory'))}</div>")


# -- run (influence) ---------------------------------------------------------------------------


def _influence_summary(s: dict[str, Any]) -> str:
    ci = s.get("mean_spearman_ci95") or [None, None]
    flags = s.get("flag_counts") or {}
    quality = s.get("quality") or {}
    items = [
        card("questions", s.get("n_questions"), key="n_questions"),
        card("measured", s.get("n_measured"), key="n_measured", note=", ".join(f"{k} {v}" for k, v in
                                                                              (s.get("states") or {}).items())),
        card("mean Spearman ρ", s.get("mean_spearman"), key="mean_spearman",
             note=f"95% CI {fmt(ci[0])} .. {fmt(ci[1])}"),
        card("median ρ", s.get("median_spearman"), key="median_spearman"),
        card("divergent rate (ρ rule)", s.get("divergent_rate"), key="divergent_rate",
             note=f"ρ < {fmt(s.get('divergence_threshold'), 'g')}"),
        card("mean dominance", s.get("mean_dominance"), key="mean_dominance"),
        card("exact match", s.get("baseline_exact_match"), key="baseline_exact_match"),
        card("F1", quality.get("f1"), key="quality.f1"),
        card("errors", s.get("errors"), key="errors", note=f"{s.get('n_failed_calls', 0)} failed calls"),
        card("calls", s.get("n_calls"), key="n_calls", note=f"{fmt(s.get('calls_per_second'), '.2f')} / s"),
    ]
    flag_cards = [card(f.replace("_", " "), n, key=f"flag_counts.{f}") for f, n in flags.items()]
    return ("<h2>Summary (Spearman ρ measures)</h2>" + cards(items) + "<h3>Flags</h3>" + cards(flag_cards))


def _influence_charts(data: RunData) -> str:
    s = data.summary
    qs, ps = data.table("questions"), data.table("passages")
    rhos = [q["spearman_rho"] for q in qs if q.get("state") == "measured" and q.get("spearman_rho") is not None]
    doms = [q["dominance"] for q in qs if q.get("state") == "measured" and q.get("dominance") is not None]
    measured = {q["question_id"] for q in qs if q.get("state") == "measured"}
    k = max((p["retrieval_rank"] for p in ps), default=0)
    pairs: Counter[tuple[float, float]] = Counter()
    by_rank: dict[int, list[float]] = defaultdict(list)
    top_at: Counter[int] = Counter()
    per_q: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in ps:
        if p["question_id"] in measured and p.get("influence_rank") is not None:
            pairs[(p["retrieval_rank"], round(p["influence_rank"] * 2) / 2)] += 1
            by_rank[p["retrieval_rank"]].append(p["influence"])
            per_q[p["question_id"]].append(p)
    for rows in per_q.values():
        best = max(rows, key=lambda p: (p["influence"], -p["retrieval_rank"]))
        top_at[best["retrieval_rank"]] += 1
    ranks = list(range(1, k + 1))
    n_meas = max(1, len(per_q))
    charts = [
        svg.histogram(rhos, title="Spearman ρ per question", xlabel="ρ (retrieval rank vs influence rank)",
                      lo=-1, hi=1, bins=10, marker=s.get("divergence_threshold"), marker_label="divergent below"),
        svg.bubbles(pairs, k, title="Retrieval rank vs influence rank", xlabel="retrieval rank",
                    ylabel="influence rank") if k else "",
        svg.bars([str(r) for r in ranks], [
            svg.Series("mean influence", ranks, [_mean(by_rank[r]) for r in ranks]),
            svg.Series("most influential here", ranks, [top_at[r] / n_meas for r in ranks]),
        ], title="Influence by retrieval rank", xlabel="retrieval rank", ylabel="mean influence / share"),
        svg.histogram(doms, title="Dominance per question", xlabel="max influence / total influence",
                      lo=0, hi=1, bins=10),
    ]
    return "<h2>Plots</h2><div class=charts>" + "".join(charts) + "</div>"


def _flag_filter(table_id: str, flags: Sequence[str], n: int) -> str:
    boxes = "".join(f'<label><input type=checkbox value="{esc(f)}"> {esc(f)}</label>' for f in flags)
    return (f'<div class=filters data-filter-for="{table_id}">show only questions flagged: {boxes}'
            f' <span class=muted>(<span class=shown>{n}</span> of {n} shown)</span></div>')


def question_detail(q: dict[str, Any], passages: list[dict[str, Any]], calls: list[dict[str, Any]]) -> str:
    drops = {tuple(c.get("removed_passage_ids") or ()): c for c in calls if c.get("arm") == "drop"}
    rows = []
    control = any(p.get("influence_control") is not None for p in passages)
    for p in sorted(passages, key=lambda p: p["retrieval_rank"]):
        call = drops.get((p["passage_id"],)) or {}
        extra = ([fmt(p.get("control_slot")), fmt(p.get("influence_control")), fmt(p.get("content_influence"))]
                 if control else [])
        rows.append([
            fmt(p["retrieval_rank"]), esc(p["passage_id"]) + (" " + badge("gold", "ok") if p.get("is_gold") else ""),
            f'<span data-key="influence" data-value="{esc(p.get("influence"))}">{fmt(p.get("influence"))}</span>',
            fmt(p.get("influence_rank"), "g"), *extra, fmt(p.get("answer_similarity")),
            f'<div class=answer>{esc(call.get("answer"))}</div>', fmt(call.get("similarity")),
        ])
    heads = ["retrieval rank", "passage", "influence", "influence rank",
             *(["control slot", "influence (control order)", "content influence"] if control else []),
             "answer–passage cosine", "answer without it", "similarity"]
    passages_table = table(heads, rows, numeric=tuple(i for i, h in enumerate(heads)
                                                       if h not in ("passage", "answer without it")))
    return (f'<details data-question="{esc(q["question_id"])}"><summary>passages and ablations</summary>'
            f'<div class=sub>gold: {esc(", ".join(q.get("gold_answers") or []))}</div>{passages_table}</details>')


def _influence_questions(data: RunData, link: Callable[[str], str] | None = None) -> str:
    qs, ps, calls = data.table("questions"), data.table("passages"), data.table("calls")
    by_q: dict[str, list] = defaultdict(list)
    calls_by_q: dict[str, list] = defaultdict(list)
    for p in ps:
        by_q[p["question_id"]].append(p)
    for c in calls:
        calls_by_q[c["question_id"]].append(c)
    flags = sorted({f for q in qs for f in q.get("flags") or []})
    rows = []
    for q in qs:
        fl = q.get("flags") or []
        qid = esc(q["question_id"])
        cells = "".join(f"<td{' class=num' if i in (2, 3, 4) else ''}>{c}</td>" for i, c in enumerate([
            f'<a href="{esc(link(q["question_id"]))}">{qid}</a>' if link else qid,
            f'<div class=passage>{esc(q.get("question"))}</div>' + question_detail(q, by_q[q["question_id"]],
                                                                                 calls_by_q[q["question_id"]]),
            fmt(q.get("usage_ndcg")), fmt(q.get("spearman_rho")) + f' <span class=muted>/ {fmt(q.get("rho_ceiling"))}</span>',
            fmt(q.get("dominance")),
            esc(q.get("state")), "".join(badge(f) for f in fl) + (badge("error") if q.get("error") else ""),
            f'<div class=answer>{esc(q.get("baseline_answer"))}</div>',
        ]))
        rows.append(f'<tr data-qid="{esc(q["question_id"])}" data-flags="{esc(" ".join(fl))}">{cells}</tr>')
    return ("<h2>Questions</h2>" + _flag_filter("questions", flags, len(qs))
            + table(["id", "question", "usage nDCG", "ρ / ceiling", "dominance", "state", "flags", "baseline answer"],
                    rows, attrs=' id="questions"', numeric=(2, 3, 4)))


# -- interpret ---------------------------------------------------------------------------------


def _interpret_sections(data: RunData) -> str:
    s = data.summary
    per_k = s.get("per_k") or {}
    labels = list(per_k)
    series, errors = [], []
    for case in ("A", "B", "C", "inconclusive"):
        vals = [(per_k[k]["cases"].get(case) or {}) for k in labels]
        series.append(svg.Series(case, list(range(len(labels))), [v.get("share") for v in vals]))
        errors.append([(v["low"], v["high"]) if v.get("low") is not None else None for v in vals])
    rows = []
    for k in labels:
        c = per_k[k]["cases"]
        rows.append([esc(k)] + [f'<span data-key="per_k.{esc(k)}.cases.{case}.share" data-value="{esc(c[case]["share"])}">'
                                f'{c[case]["count"]} ({fmt(c[case]["share"], ".0%")})</span>'
                                for case in ("A", "B", "C", "inconclusive")]
                    + [fmt(per_k[k].get("sim_most_mean")), fmt((per_k[k].get("random_mean") or {}).get("mean")),
                       fmt(per_k[k].get("sim_least_mean")), esc(verdict_label(per_k[k].get("verdict")))])
    curves = data.table("curves")
    lines = []
    for order in sorted({c["order"] for c in curves}):
        pts: dict[float, list[float]] = defaultdict(list)
        for c in curves:
            if c["order"] == order and c.get("similarity") is not None:
                pts[c["fraction"]].append(c["similarity"])
        xs = sorted(pts)
        lines.append(svg.Series(f"{order} first", xs, [_mean(pts[x]) for x in xs]))
    head = cards([card("questions", s.get("n_questions"), key="n_questions"),
                  card("failed", s.get("n_failed"), key="n_failed"),
                  card("explainer", s.get("explainer")), card("level", s.get("level")),
                  card("similarity", s.get("similarity")), card("T (unchanged)", s.get("threshold_t"), key="threshold_t")])
    charts = [svg.bars(labels, series, title="Case shares per K (95% Wilson)", xlabel="K", ylabel="share",
                       ymax=1.0, errors=errors),
              svg.lines(lines, title="Deletion curves (mean over questions)", xlabel="fraction of units removed",
                        ylabel="similarity to the baseline answer", xlim=(0, 1))]
    qrows = []
    by_q: dict[str, dict[str, str]] = defaultdict(dict)
    for c in data.table("cases"):
        by_q[c["question_id"]][c["k_label"]] = c["case"]
    for q in data.table("questions"):
        got = by_q.get(q["question_id"], {})
        qrows.append([esc(q["question_id"]), f'<div class=passage>{esc(q.get("question"))}</div>',
                      " ".join(badge(f"{k}: {v}", f"case-{v}") for k, v in got.items()),
                      fmt(q.get("parametric")), fmt(q.get("position_sensitive")), fmt(q.get("auc_most")),
                      fmt(q.get("auc_least")), f'<div class=answer>{esc(q.get("baseline_answer"))}</div>'])
    lead = headline_words(per_k)
    return ((f'<div class=headline><p>{esc(lead)}</p></div>' if lead else "")
            + "<h2>Summary</h2>" + head
            + table(["K", "A", "B", "C", "inconclusive", "sim most", "random mean", "sim least", "verdict"], rows,
                    numeric=(5, 6, 7))
            + f"<p>{esc(LEGEND.strip())}</p>"
            + "<h2>Plots</h2><div class=charts>" + "".join(charts) + "</div>"
            + "<h2>Questions</h2>" + table(["id", "question", "cases", "parametric", "position sensitive",
                                             "AUC most", "AUC least", "baseline answer"], qrows, numeric=(5, 6)))


# -- audit -------------------------------------------------------------------------------------


def _audit_sections(data: RunData) -> str:
    s = data.summary
    entries = data.table("audit")
    head = cards([
        card("queries", s.get("n_queries"), key="n_queries"), card("pass rate", s.get("pass_rate"), key="pass_rate",
                                                                    note=f"score ≥ {s.get('pass_score')}"),
        card("passed", s.get("n_pass"), key="n_pass"), card("failed", s.get("n_fail"), key="n_fail"),
        card("failed: missed gold", s.get("n_fail_missed"), key="n_fail_missed"),
        card(f"cannot pass at top-{s.get('k')}", len(s.get("cannot_pass") or ()),
             note=f"fewer gold documents than {s.get('k')}: the formula's best is below {s.get('pass_score')}"),
        card("mean score", s.get("mean_score"), key="mean_score", spec=".1f"),
        card("mean coverage %", s.get("mean_coverage"), key="mean_coverage", spec=".1f"),
        card("hit@k", s.get("hit_at_k"), key="hit_at_k"), card("MRR", s.get("mrr"), key="mrr"),
    ])
    scores = [e["score"] for e in entries if e.get("score") is not None]
    # the formula's range: -30 (nothing relevant retrieved) to 70 (everything, no noise)
    chart = svg.histogram(scores, title="Audit score per query", xlabel="score", lo=-30, hi=70, bins=10,
                          marker=s.get("pass_score"), marker_label="pass")
    rows = [[esc(e["query_id"]), f'<div class=passage>{esc(e.get("query"))}</div>',
             badge(str(e.get("status")).lower(), str(e.get("status")).lower()), fmt(e.get("score"), ".0f"),
             fmt(e.get("coverage"), ".1f"), fmt(e.get("precision")), fmt(e.get("recall")),
             esc(fail_words(AuditEntry.from_dict(e), s.get("k") or 0, s.get("pass_score") or 0) or "")]
            for e in entries]
    return ("<h2>Summary</h2>" + head + "<h2>Plots</h2><div class=charts>" + chart + "</div><h2>Queries</h2>"
            + table(["id", "query", "status", "score", "coverage %", "precision", "recall", "why it fails"], rows,
                    numeric=(3, 4, 5, 6)))


def report_body(data: RunData, link: Callable[[str], str] | None = None) -> str:
    """The report's sections for a loaded run (``link``: a question id's drill-down URL); a run that
    stopped early says so first."""
    partial = partial_line(data.summary)
    lead = f'<p class=partial data-key="partial">{esc(partial)}</p>' if partial else ""
    return lead + _sections(data, link)


def _sections(data: RunData, link: Callable[[str], str] | None) -> str:
    if data.kind == "run":
        s = data.summary
        return (alignment_section(s) + validity_section(s) + evidence_section(s) + _influence_summary(s)
                + _influence_charts(data)
                + _influence_questions(data, link))
    if data.kind == "interpret":
        return _interpret_sections(data)
    if data.kind == "audit":
        return _audit_sections(data)
    return "<p>No report layout for this kind of run.</p>"


def run_report(data: RunData) -> str:
    """The body of a ``run`` report: the questions lead, the aggregate panels follow."""
    s = data.summary
    validity = panel_section(s["panel"]) if s.get("panel") else validity_section(s) + evidence_section(s)
    return (run_header(data) + headline(s, data.table("questions"))
            + question_cards(data.table("questions"), data.table("passages"), data.table("calls"))
            + recommended_plots(data) + validity + alignment_section(s) + _influence_summary(s) + detail_plots(data))


def render_report(data: RunData) -> str:
    """The report page of a loaded run."""
    title = f"ragray {data.kind} report: {data.name}"
    if data.kind == "run":
        return page(title, run_report(data), script=VERDICT_SCRIPT, style=LEAD_CSS + QUESTIONS_CSS + PANEL_CSS)
    return page(title, header(data, title) + report_body(data), script=FILTER_SCRIPT, style=LEAD_CSS)


def write_report(run: RunDir | str | Path) -> Path | None:
    """Write ``report.html`` into the run (a :class:`~ragray.store.rundir.RunDir`, on disk or in
    memory, or a run directory's path); never fatal: a failure is logged, the results stand."""
    if not isinstance(run, RunDir) and not Path(run).is_dir():
        log.warning("could not write report.html: run directory not found: %s", run)
        return None
    target = run if isinstance(run, RunDir) else RunDir(run)
    try:
        html = render_report(read_run(target.read, target.path, built=target.tables))
        return target.put("report.html", html.encode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - the report is a view of results already written
        log.warning("could not write report.html in %s: %s", target.path or "the run in memory", exc)
        return None
