"""The dashboard's pages (server-rendered HTML, inline CSS/JS/SVG: works with no network)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from ragray.adapters.dashboard.catalog import Entry
from ragray.adapters.dashboard.upload import REQUIRED
from ragray.metrics.paired_change import paired_changes
from ragray.report import svg
from ragray.report.page import badge, card, cards, esc, fmt, page, table
from ragray.report.report import FILTER_SCRIPT, header, report_body
from ragray.report.rundata import RunData

__all__ = ["compare_page", "error_page", "index_page", "login_page", "question_page", "run_page"]

Url = Callable[..., str]


def _nav(url: Url) -> str:
    return (f'<div class=sub><a href="{url("index")}">all runs</a> · ragray dashboard</div>')


def _when(entry: Entry) -> str:
    return entry.started.strftime("%Y-%m-%d %H:%M") if entry.started else "–"


def index_page(entries: list[Entry], url: Url, message: str = "", upload_note: str = "") -> str:
    rows = []
    for e in entries:
        s = e.summary or {}
        name = f'<a href="{url("run", e.id)}">{esc(e.name)}</a>' if e.openable else esc(e.name)
        where = f'<div class="muted small">{esc(e.path.name)}</div>' if e.path else ""
        flags = sum((s.get("flag_counts") or {}).values()) if isinstance(s.get("flag_counts"), dict) else None
        sim = " " + badge("simulated", "simulated") if s.get("simulated") else ""
        up = " " + badge("uploaded", "ok") if s.get("uploaded") else ""
        rows.append(
            f'<tr data-run="{esc(e.id)}" data-kind="{esc(e.kind)}">'
            f"<td>{name}{sim}{up}{where}</td><td>{esc(e.kind)}</td><td>{badge(e.status, 'ok' if e.status == 'done' else e.status)}</td>"
            f"<td>{_when(e)}</td><td class=num>{fmt(s.get('n_questions') or s.get('n_queries'))}</td>"
            f"<td class=num>{fmt((s.get('alignment') or {}).get('misaligned_rate'))}</td>"
            f"<td class=num>{fmt(s.get('mean_spearman'))}</td><td class=num>{fmt(s.get('divergent_rate'))}</td>"
            f"<td class=num>{fmt(flags)}</td><td class=muted>{esc(e.source)}</td></tr>")
    # influence runs (ragray run, simulate, uploads, sweep trials) can be compared
    openable = [e for e in entries if e.openable and (e.kind in ("run", "trial")
                                                     or (e.summary or {}).get("mean_spearman") is not None)]

    def options(selected: int) -> str:
        return "".join(f'<option value="{esc(e.id)}"{" selected" if i == selected else ""}>{esc(e.name)} '
                       f'({esc(e.path.name if e.path else e.kind)})</option>' for i, e in enumerate(openable))

    compare = (f'<form method=get action="{url("compare")}" class=filters id=compare-form>compare '
               f'<select name=a id=compare-a>{options(0)}</select> with '
               f'<select name=b id=compare-b>{options(1)}</select>'
               '<button type=submit>compare</button></form>') if len(openable) >= 2 else ""
    upload = (f'<form method=post action="{url("upload")}" enctype="multipart/form-data" class=filters id=upload-form>'
              f'upload per-passage results (CSV with {", ".join(REQUIRED)}; optional question, answer, '
              f'retrieval_score, is_gold{"; " + esc(upload_note) if upload_note else ""}): '
              '<input type=file name=file accept=".csv,text/csv" id=upload-file> '
              '<button type=submit>upload</button></form>')
    note = f'<p class=error-message>{esc(message)}</p>' if message else ""
    body = (f"<h1>ragray runs</h1>{note}{compare}{upload}"
            + table(["run", "kind", "status", "started (UTC)", "questions", "misaligned", "mean ρ",
                     "divergent (seed)", "flags", "source"], rows, attrs=' id="runs"', numeric=(4, 5, 6, 7, 8)))
    return page("ragray dashboard", body)


def run_page(entry: Entry, data: RunData, url: Url, trial_ids: dict[str, str] | None = None) -> str:
    title = f"{data.kind}: {data.name}"
    link = (lambda qid: url("question", entry.id, qid)) if data.kind == "run" else None
    files = " · ".join(f'<a href="{url("file", entry.id, name)}">{esc(name)}</a>'
                       for name in ("report.html", "summary.json", "questions.csv", "passages.csv", "calls.csv")
                       if (data.path / name).is_file())
    body = _nav(url) + header(data, title) + f"<div class=sub>files: {files}</div>"
    if data.kind == "sweep":
        body += _sweep_body(data, url, trial_ids or {})
    else:
        body += report_body(data, link)
    return page(title, body, script=FILTER_SCRIPT)


def _sweep_body(data: RunData, url: Url, trial_ids: dict[str, str]) -> str:
    """The leaderboard; a trial's label links to its run page (``trial_ids``: trial id -> run id)."""
    def label(r: dict[str, Any]) -> str:
        run_id = trial_ids.get(str(r.get("trial_id")))
        return f'<a href="{url("run", run_id)}">{esc(r.get("label"))}</a>' if run_id else esc(r.get("label"))

    rows = [[fmt(r.get("rank")), label(r), fmt(r.get("score")), fmt(r.get("f1")), fmt(r.get("mrr")),
             fmt(r.get("mean_rho")), fmt(r.get("divergent_rate")), fmt(r.get("latency_s"), ".2f"),
             badge(r.get("status") or "–", "ok" if r.get("status") == "done" else "fail")]
            for r in data.table("leaderboard")]
    return ("<h2>Leaderboard</h2><p class=sub>open a trial, or compare two from the list of runs</p>"
            + table(["rank", "configuration", "score", "F1", "MRR", "ρ", "divergent", "s/question", "status"], rows,
                    numeric=(0, 2, 3, 4, 5, 6, 7)))


def question_page(entry: Entry, data: RunData, qid: str, url: Url, texts: dict[str, str]) -> str:
    q = next(q for q in data.table("questions") if q["question_id"] == qid)
    passages = sorted((p for p in data.table("passages") if p["question_id"] == qid), key=lambda p: p["retrieval_rank"])
    calls = [c for c in data.table("calls") if c["question_id"] == qid]
    drops = {tuple(c.get("removed_passage_ids") or ()): c for c in calls if c.get("arm") == "drop"}
    baseline = next((c for c in calls if c.get("arm") == "baseline"), None)
    head = cards([card("misaligned", q.get("misaligned"), key="misaligned",
                       note="not measured" if q.get("usage_ndcg") is None else "usage nDCG below the threshold"),
                  card("usage nDCG", q.get("usage_ndcg"), key="usage_ndcg"),
                  card("RBO", q.get("rbo_alignment"), key="rbo_alignment"),
                  card("top-1 used", q.get("top1_used"), key="top1_used"),
                  card("Spearman ρ (original rule)", q.get("spearman_rho"), key="spearman_rho",
                       note=f"ceiling {fmt(q.get('rho_ceiling'))}"),
                  card("position-driven", q.get("position_driven"), key="position_driven",
                       note=f"control: {q.get('position_control') or 'none'}; sensitivity "
                            f"{fmt(q.get('position_sensitivity'))}"),
                  card("dominance", q.get("dominance"), key="dominance"), card("state", q.get("state")),
                  card("passages", q.get("n_passages"), key="n_passages")])
    flags = "".join(badge(f) for f in q.get("flags") or []) or '<span class=muted>no flags</span>'
    rows = []
    for p in passages:
        call = drops.get((p["passage_id"],)) or {}
        rows.append(f'<tr data-passage="{esc(p["passage_id"])}">'
                    f'<td class=num>{p["retrieval_rank"]}</td><td>{esc(p.get("title") or p["passage_id"])}'
                    + (" " + badge("used", "context_ignored") if p.get("used") else "")
                    + (" " + badge("gold", "ok") if p.get("is_gold") else "") + "</td>"
                    f'<td class=passage>{esc(p.get("text") or texts.get(p["passage_id"], "–"))}</td>'
                    f'<td class=num data-key="influence" data-value="{esc(p.get("influence"))}">{fmt(p.get("influence"))}</td>'
                    f'<td class=num>{fmt(p.get("influence_rank"), "g")}</td>'
                    f'<td class=num data-key="influence_control" data-value="{esc(p.get("influence_control"))}">'
                    f'{fmt(p.get("influence_control"))}</td><td class=num>{fmt(p.get("content_influence"))}</td>'
                    f'<td class=num>{fmt(p.get("answer_similarity"))}</td>'
                    f'<td><div class=answer>{esc(call.get("answer", "–"))}</div></td><td class=num>{fmt(call.get("similarity"))}</td></tr>')
    ranks = [p["retrieval_rank"] for p in passages]
    series = [svg.Series("influence", ranks, [p.get("influence") for p in passages])]
    if any(p.get("influence_control") is not None for p in passages):
        series.append(svg.Series(f"influence, {q.get('position_control')} order", ranks,
                                 [p.get("influence_control") for p in passages]))
    chart = svg.bars([str(r) for r in ranks], series, title="Influence by retrieval rank", xlabel="retrieval rank",
                     ylabel="influence")
    body = (_nav(url) + f'<div class=sub><a href="{url("run", entry.id)}">{esc(data.name)}</a></div>'
            f'<h1 data-question="{esc(qid)}">{esc(qid)}: {esc(q.get("question"))}</h1>'
            f"<div>{flags}</div>{head}"
            f'<p><b>gold</b>: {esc(", ".join(q.get("gold_answers") or []) or "–")}<br>'
            f'<b>baseline answer</b>: <span id=baseline>{esc(q.get("baseline_answer") or (baseline or {}).get("answer"))}</span>'
            f'{_correct_mark(q.get("answer_correct"), q.get("answerable") is False)}</p>'
            f'<div class=charts>{chart}</div><h2>Passages and ablations</h2>'
            + table(["retrieval rank", "passage", "text", "influence", "influence rank", "influence (control order)",
                     "content influence", "answer–passage cosine", "answer without it", "similarity"], rows,
                    attrs=' id="passages"'))
    return page(f"{qid} · {data.name}", body)


def _correct_mark(correct: bool | None, unanswerable: bool = False) -> str:
    """✓ / ✗ after an answer: does it contain a gold answer, or on an unanswerable question did the
    model decline (nothing without gold answers)."""
    if correct is None:
        return ""
    if unanswerable:
        return " " + (badge("✓ declined", "pass") if correct else badge("✗ answered anyway", "fail"))
    return " " + (badge("✓ correct", "pass") if correct else badge("✗ wrong", "fail"))


def _metrics(s: dict[str, Any]) -> list[tuple[str, str, Any]]:
    quality = s.get("quality") or {}
    flags = s.get("flag_counts") or {}
    align = s.get("alignment") or {}
    rows = [("questions", "n_questions", s.get("n_questions")), ("measured", "n_measured", s.get("n_measured")),
            ("misaligned rate", "alignment.misaligned_rate", align.get("misaligned_rate")),
            ("mean usage nDCG", "alignment.usage_ndcg.mean", (align.get("usage_ndcg") or {}).get("mean")),
            ("mean RBO", "alignment.rbo_alignment.mean", (align.get("rbo_alignment") or {}).get("mean")),
            ("top-1 used", "alignment.top1_used_rate", align.get("top1_used_rate")),
            ("mean Spearman ρ", "mean_spearman", s.get("mean_spearman")),
            ("median ρ", "median_spearman", s.get("median_spearman")),
            ("divergent rate", "divergent_rate", s.get("divergent_rate")),
            ("mean dominance", "mean_dominance", s.get("mean_dominance")),
            ("exact match", "baseline_exact_match", s.get("baseline_exact_match")),
            ("F1", "quality.f1", quality.get("f1")), ("errors", "errors", s.get("errors"))]
    rows += [(f.replace("_", " "), f"flag_counts.{f}", n) for f, n in flags.items()]
    return rows


def _paired_section(da: RunData, db: RunData) -> str:
    """Did the verdicts change, question by question, beyond noise (:mod:`ragray.metrics.paired_change`)?"""
    changes = paired_changes(da.table("questions"), db.table("questions"))
    rows = [f'<tr data-paired="{esc(c.column)}" data-state="{esc(c.state)}"><td>{esc(c.metric)}</td>'
            f"<td class=num>{c.n}</td><td class=num>{fmt(c.a)}</td><td class=num>{fmt(c.b)}</td>"
            f'<td class=num>{fmt(c.delta, "+.3f") if c.delta is not None else "–"}</td>'
            f"<td class=num>{fmt(c.p_value, '.3g')}</td><td>{esc(c.test)}</td>"
            f"<td>{badge(c.state, c.state.replace(' ', '-'))}</td></tr>"
            for c in changes]
    return ("<h2>Did it change beyond noise?</h2><p class=sub>question by question, on the questions both runs "
            "measured; p two-sided, Holm-corrected over these metrics; undecided below the 6 questions an exact "
            "paired test needs</p>"
            + table(["per question", "questions", "A", "B", "B − A", "p", "test", "verdict"], rows,
                    attrs=' id="paired"', numeric=(1, 2, 3, 4, 5)))


def compare_page(a: tuple[Entry, RunData], b: tuple[Entry, RunData], url: Url) -> str:
    (ea, da), (eb, db) = a, b
    ma, mb = _metrics(da.summary), {k: v for _, k, v in _metrics(db.summary)}
    rows = []
    for label, key, va in ma:
        vb = mb.get(key)
        delta = vb - va if isinstance(va, (int, float)) and isinstance(vb, (int, float)) else None
        rows.append(f'<tr data-metric="{esc(key)}"><td>{esc(label)}</td>'
                    f'<td class=num data-side=a data-value="{esc(va)}">{fmt(va)}</td>'
                    f'<td class=num data-side=b data-value="{esc(vb)}">{fmt(vb)}</td>'
                    f'<td class=num>{fmt(delta, "+.3f") if isinstance(delta, float) else fmt(delta)}</td></tr>')
    qa = {q["question_id"]: q for q in da.table("questions")}
    qb = {q["question_id"]: q for q in db.table("questions")}
    both = [qid for qid in qa if qid in qb]
    qrows, changed = [], Counter()
    for qid in both:
        fa, fb = set(qa[qid].get("flags") or []), set(qb[qid].get("flags") or [])
        for f in fa ^ fb:
            changed[f] += 1
        qrows.append(f'<tr data-qid="{esc(qid)}"><td><a href="{url("question", ea.id, qid)}">{esc(qid)}</a></td>'
                     f'<td class=num>{fmt(qa[qid].get("spearman_rho"))}</td><td class=num>{fmt(qb[qid].get("spearman_rho"))}</td>'
                     f'<td>{"".join(badge(f) for f in sorted(fa))}</td><td>{"".join(badge(f) for f in sorted(fb))}</td></tr>')
    def rho(d: RunData) -> list[float]:
        return [q["spearman_rho"] for q in d.table("questions")
                if q.get("state") == "measured" and q.get("spearman_rho") is not None]

    charts = [svg.histogram(rho(da), title=f"ρ: {da.name}", xlabel="ρ", lo=-1, hi=1),
              svg.histogram(rho(db), title=f"ρ: {db.name}", xlabel="ρ", lo=-1, hi=1)]
    body = (_nav(url) + f'<h1>Compare</h1><div class=sub>A: <a href="{url("run", ea.id)}">{esc(da.name)}</a> '
            f'({esc(da.kind)}) · B: <a href="{url("run", eb.id)}">{esc(db.name)}</a> ({esc(db.kind)})</div>'
            + _paired_section(da, db)
            + "<h2>Summaries</h2>" + table(["metric", "A", "B", "B − A"], rows, attrs=' id="compare"')
            + f'<div class=charts>{"".join(charts)}</div>'
            + f"<h2>Questions in both ({len(both)})</h2>"
            + (f'<p class=sub>flags that differ: {esc(", ".join(f"{f} {n}" for f, n in changed.items()) or "none")}</p>')
            + table(["question", "ρ A", "ρ B", "flags A", "flags B"], qrows, attrs=' id="compare-questions"',
                    numeric=(1, 2)))
    return page(f"compare {da.name} / {db.name}", body)


def error_page(message: str, url: Url, status: int) -> str:
    return page(f"ragray dashboard: {status}", _nav(url) + f'<h1>{status}</h1><p class=error-message>{esc(message)}</p>')


def login_page(message: str, next_path: str) -> str:
    """The 401 page: ``message`` and a form that sends the API key once (``POST /login``), then
    opens ``next_path``. The key is never written into a page."""
    form = ('<form method=post action="/login" class=filters id=login-form>'
            '<label>API key <input type=password name=key autocomplete=current-password id=login-key></label>'
            f'<input type=hidden name=next value="{esc(next_path)}"><button type=submit>log in</button></form>')
    return page("ragray dashboard: 401", f'<h1>401</h1><p class=error-message>{esc(message)}</p>{form}'
                '<p class="sub muted">scripts: send the header <code>Authorization: Bearer &lt;key&gt;</code></p>')
