"""Report sections on whether to trust a run: the tie-robust verdict and the validity panel.

Shared by ``report.html`` and the dashboard. Runs written before these measures existed have no
``alignment`` / ``validity`` blocks in ``summary.json``: the sections then say "not measured"
instead of showing numbers.
"""

from __future__ import annotations

from typing import Any

from ragray.metrics.summary import describe_mode
from ragray.rows.summaries import RunSummary
from ragray.report import svg
from ragray.report.page import card, cards, esc, fmt, table

__all__ = ["alignment_section", "evidence_section", "validity_section"]

_NOT_MEASURED = "not measured (run written before the tie-robust measures)"


def _divergence_note(s: dict[str, Any], a: dict[str, Any]) -> str:
    n = a.get("divergent_not_misaligned") or 0
    if not n:
        return ""
    return (f'<p class=note data-key="alignment.divergent_not_misaligned" data-value="{n}">'
            f"<b>{n} question{'s' if n != 1 else ''} flagged Divergent by the older rule "
            f"(Spearman ρ &lt; {fmt(s.get('divergence_threshold'), 'g')}) {'are' if n != 1 else 'is'} not misaligned.</b> "
            "ρ ranks every passage, including those the model did not use; when few passages matter, "
            "their ties and noise decide ρ. With one used passage and the rest tied at 0, a question whose used "
            "passage is the retriever's #1 cannot reach ρ above ≈ 0.52 (k = 10): mean ρ ceiling of these "
            f"questions {fmt(a.get('divergent_not_misaligned_mean_rho_ceiling'))}. usage nDCG weighs each passage "
            "by its influence, so unused passages cannot make an aligned question look divergent.</p>")


def _position_card(s: dict[str, Any]) -> str:
    pos = s.get("position") or {}
    if pos.get("control", "none") == "none":
        return card("position control", "none", key="position.control",
                    note="influence may follow the slot, not the passage: set influence.position_control")
    return card(f"position-driven ({pos['control']})", pos.get("position_driven_rate"), key="position.position_driven_rate",
                note=f"mean sensitivity {fmt((pos.get('position_sensitivity') or {}).get('mean'))}; "
                     f"{pos.get('control_calls')} extra calls ({fmt(pos.get('control_call_share'), '.0%')})")


def _mode_card(s: dict[str, Any]) -> str:
    label, note = describe_mode(RunSummary.from_dict(s))
    return card("influence measured by", label, key="influence_mode", data=s.get("influence_mode"), note=note or "")


def alignment_section(s: dict[str, Any]) -> str:
    """Cards of the tie-robust verdict, then the note on Divergent questions it clears."""
    a = s.get("alignment")
    if not a:
        return (f'<h2>Alignment</h2><p class=muted data-key="alignment" data-value="null">misaligned: {_NOT_MEASURED}'
                "; Spearman ρ and Divergent below.</p>")
    nd, rbo = a.get("usage_ndcg") or {}, a.get("rbo_alignment") or {}
    items = [
        card("misaligned rate", a.get("misaligned_rate"), key="alignment.misaligned_rate",
             note=f"usage nDCG < {fmt(a.get('misalignment_threshold'), 'g')}; {a.get('n_scored')} questions with use"),
        card("usage nDCG", nd.get("mean"), key="alignment.usage_ndcg.mean",
             note=f"95% CI {fmt(nd.get('low'))} .. {fmt(nd.get('high'))}"),
        card(f"RBO (p = {fmt(a.get('rbo_p'), 'g')})", rbo.get("mean"), key="alignment.rbo_alignment.mean",
             note="1 − RBO is comparable with RAG-E's WARG"),
        card("top-1 used", a.get("top1_used_rate"), key="alignment.top1_used_rate"),
        card("relies on lower rank", a.get("relies_on_lower_rank_rate"), key="alignment.relies_on_lower_rank_rate"),
        card("mean ρ ceiling", a.get("mean_rho_ceiling"), key="alignment.mean_rho_ceiling",
             note="highest ρ the tie pattern allows"),
        _position_card(s),
        _mode_card(s),
    ]
    return "<h2>Alignment</h2>" + cards(items) + _divergence_note(s, a)


def _interval(c: dict[str, Any], spec: str = ".2f") -> str:
    return f"{fmt(c.get('mean'), spec)} <span class=muted>[{fmt(c.get('low'), spec)}, {fmt(c.get('high'), spec)}]</span>"


def validity_section(s: dict[str, Any]) -> str:
    """The validity table (recovery@1 and AUC with CIs per measure and subset), a plot, the verdicts."""
    v = s.get("validity")
    if not v or not v.get("available"):
        reason = (v or {}).get("reason") or "run written before the validity panel"
        return ('<h2>Validity against gold passages</h2>'
                f'<p class=muted data-key="validity.available" data-value="false">not measured: {esc(reason)}</p>')
    rows, charts = [], []
    for name, sub in v["subsets"].items():
        ms = sub.get("measures") or {}
        for key, m in ms.items():
            cmp = (sub.get("vs_embedding") or {}).get(key) or {}
            rows.append(f'<tr data-subset="{esc(name)}" data-measure="{esc(key)}"><td>{esc(name)} ({sub["n"]})</td>'
                        f'<td>{esc(m["label"])}</td>'
                        f'<td class=num data-key="validity.subsets.{esc(name)}.measures.{esc(key)}.recovery_at_1.mean" '
                        f'data-value="{esc(m["recovery_at_1"]["mean"])}">{_interval(m["recovery_at_1"])}</td>'
                        f'<td class=num>{_interval(m["auc"])}</td><td>{esc(cmp.get("verdict", ""))}</td></tr>')
        if ms:
            labels = list(ms)
            idx = list(range(len(labels)))
            charts.append(svg.bars(
                [ms[k]["label"].replace(" (control)", "*").replace(" (control, expected)", "*") for k in labels],
                [svg.Series("recovery@1", idx, [ms[k]["recovery_at_1"]["mean"] for k in labels]),
                 svg.Series("AUC", idx, [ms[k]["auc"]["mean"] for k in labels])],
                title=f"Finding the gold passage: {name} ({sub['n']} questions)", xlabel="measure (* control)",
                ylabel="share / AUC", ymax=1.0,
                errors=[[(ms[k]["recovery_at_1"]["low"], ms[k]["recovery_at_1"]["high"]) for k in labels],
                        [(ms[k]["auc"]["low"], ms[k]["auc"]["high"]) for k in labels]]))
    verdicts = "".join(f"<li>{esc(line)}</li>" for line in v.get("verdicts") or [])
    return ("<h2>Validity against gold passages</h2>"
            f"<p class=sub>{v['n_questions_with_gold']} questions with gold and non-gold passages retrieved; "
            f"correct = baseline token F1 ≥ {fmt(v.get('correct_f1'), 'g')}; 95% bootstrap intervals "
            f"({v.get('n_bootstrap')} resamples).</p>"
            + table(["questions", "measure", "gold ranked first (recovery@1)", "AUC gold vs non-gold",
                     "vs embedding control"], rows, attrs=' id="validity"', numeric=(2, 3))
            + (f"<ul class=verdicts>{verdicts}</ul>" if verdicts else "")
            + f'<div class=charts>{"".join(charts)}</div>')


def evidence_section(s: dict[str, Any]) -> str:
    """Validity panel v2: per metric of the primary subset, each measure's mean with its interval,
    and the plain-words verdict lines (empty for runs without log-prob measurements)."""
    from ragray.metrics.evidence import PRIMARY, evidence_lines

    e = s.get("evidence")
    if not e:
        return ""
    name = PRIMARY if e["subsets"][PRIMARY]["n_questions"] else "all"
    rows = []
    for metric, t in e["subsets"][name]["metrics"].items():
        for key, m in t["measures"].items():
            beats = ""
            if not m["control"]:
                wins = [c for c, v in (t["vs_controls"].get(key) or {}).items() if v["beats"]]
                beats = f"beats {len(wins)} of {len(t['vs_controls'].get(key) or {})} controls"
            rows.append(f'<tr data-metric="{esc(metric)}" data-measure="{esc(key)}"><td>{esc(metric)} ({t["n"]})</td>'
                        f'<td>{esc(key)}{"*" if m["control"] else ""}</td>'
                        f'<td class=num data-key="evidence.subsets.{esc(name)}.metrics.{esc(metric)}.measures.'
                        f'{esc(key)}.mean" data-value="{esc(m["mean"])}">{_interval(m)}</td><td>{esc(beats)}</td></tr>')
    lines = "".join(f"<li>{esc(line)}</li>" for line in evidence_lines(e, [name]))
    return ("<h2>Does the attribution capture what the model used?</h2>"
            f"<p class=sub>Subset <b>{esc(name)}</b>; top-k drop in nats, LDS a Spearman correlation; "
            "* a control that costs no model call; paired bootstrap, Holm-corrected.</p>"
            + table(["metric (questions)", "measure", "mean [95% CI]", "vs controls"], rows,
                    attrs=' id="evidence"', numeric=(2,))
            + f"<ul class=verdicts>{lines}</ul>")
