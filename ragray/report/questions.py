"""The questions of a run's report, one card each, with a filter by verdict.

A card holds the question, the answer (✓/✗ against the gold answers where there are any), the
verdict in words (misaligned / aligned by usage nDCG, or why it was not measured), and the
passages in retrieval order: title, the opening of the text (all of it on expand), an influence
bar, and "used" / "gold" marks. Runs written before titles, texts or marks existed show passage
ids and no marks. Past :data:`CARD_LIMIT` questions, the most informative come first (misaligned,
then aligned by ascending usage nDCG, then the rest) and a note says how many are left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, NamedTuple

from ragray.report.page import esc, fmt
from ragray.report.run_console import FAILED_WORDS

__all__ = ["CARD_LIMIT", "QUESTIONS_CSS", "VERDICT_SCRIPT", "Verdict", "question_card", "question_cards", "verdict"]

#: questions shown as cards; beyond, the most informative first
CARD_LIMIT = 200
#: characters of a passage shown before "more"
SNIPPET = 200

QUESTIONS_CSS = """
.vfilter { margin: 6px 0 10px; display: flex; gap: 14px; flex-wrap: wrap; font-size: .88rem; align-items: center; }
.qcard { border: 1px solid #e5e7eb; border-radius: 8px; padding: 8px 12px; margin: 0 0 12px; background: #fff; }
.qcard .qhead { display: flex; gap: 8px; align-items: baseline; flex-wrap: wrap; }
.qcard .qtext { font-weight: 600; font-size: 1rem; } .qcard .qid { color: #6b7280; font-size: .75rem; }
.qcard .qanswer { font-size: .9rem; margin: 3px 0 6px; }
.verdict { border-radius: 9px; padding: 0 8px; font-size: .78rem; font-weight: 600; white-space: nowrap; }
.verdict.misaligned { background: #fee2e2; color: #991b1b; } .verdict.aligned { background: #dcfce7; color: #166534; }
.verdict.stage { background: #ffedd5; color: #9a3412; margin-right: 6px; }
.verdict.unmeasured { background: #e5e7eb; color: #374151; }
.mark-ok { color: #166534; font-weight: 700; } .mark-no { color: #991b1b; font-weight: 700; }
ol.psgs { list-style: none; margin: 0; padding: 0; }
li.psg { display: grid; grid-template-columns: 2.4em 170px 7.5em 1fr; gap: 8px; align-items: start;
  padding: 4px 0; border-top: 1px solid #f3f4f6; font-size: .85rem; }
li.psg .rank { color: #6b7280; text-align: right; font-variant-numeric: tabular-nums; }
.ibar { display: inline-block; width: 120px; height: 10px; background: #f3f4f6; border-radius: 3px;
  vertical-align: middle; } .ibar > span { display: block; height: 100%; background: #2563eb; border-radius: 3px; }
li.psg.used .ibar > span { background: #1d4ed8; } .ival { font-variant-numeric: tabular-nums; margin-left: 4px; }
.mk { border-radius: 9px; padding: 0 6px; font-size: .72rem; margin-right: 3px; white-space: nowrap; }
.mk.used { background: #dbeafe; color: #1e3a8a; font-weight: 600; } .mk.group { background: #ede9fe; color: #5b21b6; } .mk.gold { background: #fef3c7; color: #92400e; }
.ptitle { font-weight: 600; } .pid { color: #9ca3af; font-size: .72rem; }
details.ptext > summary { list-style: none; } details.ptext > summary::-webkit-details-marker { display: none; }
details.ptext[open] .snip { display: none; } .more { color: #2563eb; font-size: .75rem; }
.without { color: #6b7280; font-size: .78rem; }
"""

VERDICT_SCRIPT = """
document.querySelectorAll('[data-verdict-filter]').forEach(function (box) {
  var list = document.getElementById(box.getAttribute('data-verdict-filter'));
  function apply() {
    var on = box.querySelector('input:checked'); var want = on ? on.value : 'all'; var shown = 0;
    list.querySelectorAll('.qcard').forEach(function (card) {
      var ok = want === 'all' || card.getAttribute('data-verdict') === want;
      card.style.display = ok ? '' : 'none';
      if (ok) shown++;
    });
    var count = box.querySelector('.shown'); if (count) count.textContent = shown;
  }
  box.addEventListener('change', apply); apply();
});
"""

#: a question's state in words, where the tie-robust verdict is missing
_STATES = {
    "context_ignored": "answer does not depend on the passages",
    "diffuse": "the answer depends on the passages, but no single passage stands clear of the noise",
    "too_few_passages": "fewer than two passages could be scored",
    "constant_influence": "every passage changed the answer equally",
    "measured": "not scored by usage nDCG (run written before it)",
}


class Verdict(NamedTuple):
    """``key``: misaligned | aligned | unmeasured (the filter's value); ``text``: in words."""

    key: str
    text: str


def verdict(q: dict[str, Any]) -> Verdict:
    """The tie-robust verdict of a question, else why it has none."""
    if q.get("misaligned") is not None:
        return Verdict("misaligned", "misaligned") if q["misaligned"] else Verdict("aligned", "aligned")
    state = q.get("state")
    if state == "error" or q.get("error"):
        return Verdict("unmeasured", f"error: {q.get('error') or 'the question failed'}")
    if q.get("answerable") is False:
        if q.get("declined"):
            return Verdict("unanswerable", "unanswerable, and the model declined (right)")
        return Verdict("unanswerable", "unanswerable: the answer is made up (the used passages are what it "
                                       "leaned on; no alignment verdict)")
    return Verdict("unmeasured", _STATES.get(state, f"not measured ({state})"))


def _order(questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Most informative first: misaligned, then aligned from the lowest usage nDCG, then the rest."""
    def key(q: dict[str, Any]) -> tuple[int, float]:
        v = verdict(q).key
        rank = {"misaligned": 0, "aligned": 1}.get(v, 2)
        return rank, q.get("usage_ndcg") if q.get("usage_ndcg") is not None else 2.0
    return sorted(questions, key=key)


def _answer(q: dict[str, Any]) -> str:
    correct = q.get("answer_correct")
    if q.get("answerable") is False:
        mark = ("" if correct is None else ' <span class=mark-ok title="unanswerable: the model declined">✓ declined</span>'
                if correct else ' <span class=mark-no title="unanswerable: the model answered anyway">✗ answered anyway</span>')
    else:
        mark = ("" if correct is None else ' <span class=mark-ok title="contains a gold answer">✓</span>' if correct
                else ' <span class=mark-no title="the model declined, though a gold answer exists">✗ declined</span>'
                if q.get("declined") else ' <span class=mark-no title="contains no gold answer">✗</span>')
    gold = q.get("gold_answers") or []
    gold_text = (f' <span class=muted>gold: {esc(" | ".join(gold))}</span>' if gold else
                 ' <span class=muted>unanswerable: no gold answer</span>' if q.get("answerable") is False else "")
    return (f'<div class=qanswer>answer: <b>{esc(q.get("baseline_answer") or "–")}</b>{mark}{gold_text}</div>')


def _text(p: dict[str, Any]) -> str:
    """Title, the opening of the text (all of it on expand) and the passage id, small."""
    title = p.get("title") or ""
    text = (p.get("text") or "").strip()
    head = f"<span class=ptitle>{esc(title)}</span> " if title else ""
    pid = f' <span class=pid>{esc(p["passage_id"])}</span>'
    if not text:
        return f"<div class=ptext>{head or esc(p['passage_id'])}{pid if head else ''}</div>"
    if len(text) <= SNIPPET:
        return f"<div class=ptext>{head}{esc(text)}{pid}</div>"
    cut = text[:SNIPPET].rsplit(" ", 1)[0] if " " in text[:SNIPPET] else text[:SNIPPET]
    return (f"<details class=ptext><summary>{head}<span class=snip>{esc(cut)}… <span class=more>more</span></span>"
            f"</summary>{esc(text)}{pid}</details>")


def _group_mark(p: dict[str, Any], passages: list[dict[str, Any]]) -> str:
    """A passage of a group (substitutes, shared evidence or complements): a mark naming the
    relation and the ranks of the group's other members."""
    g = p.get("group")
    if g is None or g != g:  # None, or NaN read back from a table
        return ""
    others = [f"#{q['retrieval_rank']}" for q in passages if q.get("group") == g and q is not p]
    relation = p.get("relation") or "either suffices"
    word = "or" if relation == "either suffices" else "with"
    return (f'<span class="mk group" data-group="{esc(g)}" title="group {esc(g)}: {esc(relation)}">'
            f'{esc(word)} {esc(" ".join(others))} ({esc(relation)})</span>')


#: what ``used`` means, per group kind (a passage alone: its credit stands clear of the question's noise)
USED_TITLES = {
    None: "the answer leaned on this passage: its credit stands clear of the question's noise",
    "either suffices": "the answer leaned on this passage or the others of its group: any one of them was enough, "
                       "so none was needed",
    "share evidence": "the answer leaned on this passage and the others of its group: they share evidence, and "
                      "one carries what the other cannot",
    "needed together": "the answer needed this passage together with the others of its group",
}


def _used_title(p: dict[str, Any]) -> str:
    g = p.get("group")
    relation = p.get("relation") if g is not None and g == g else None
    return USED_TITLES.get(relation, USED_TITLES[None])


def _passage(p: dict[str, Any], without: str | None, group: str = "") -> str:
    infl = p.get("influence")
    width = 0.0 if infl is None else min(1.0, max(0.0, float(infl)))
    bar = (f'<span class=ibar title="influence {fmt(infl)}"><span style="width:{width * 100:.1f}%"></span></span>'
           f'<span class=ival data-key="influence" data-value="{esc(infl)}">{fmt(infl, ".2f")}</span>')
    used, gold = p.get("used"), p.get("is_gold")
    marks = ((f'<span class="mk used" title="{esc(_used_title(p))}">used</span>' if used else "")
             + ('<span class="mk gold" title="a gold passage of the dataset">gold</span>' if gold else "") + group)
    cls = " ".join(c for c, on in (("used", used), ("gold", gold)) if on)
    extra = f'<div class=without>without it: {esc(without)}</div>' if without is not None else ""
    return (f'<li class="psg {cls}" data-passage="{esc(p["passage_id"])}"><span class=rank>#{fmt(p["retrieval_rank"])}'
            f"</span><span>{bar}</span><span class=marks>{marks}</span><div>{_text(p)}{extra}</div></li>")


def _card(q: dict[str, Any], passages: list[dict[str, Any]], drops: dict[str, str],
          link: Callable[[str], str] | None) -> str:
    v = verdict(q)
    used = [p["retrieval_rank"] for p in passages if p.get("used")]
    bits = [f"usage nDCG {fmt(q.get('usage_ndcg'), '.2f')}" if q.get("usage_ndcg") is not None else "",
            f"used: {', '.join(f'#{r}' for r in used)}" if used else "",
            (f'<span title="Spearman ρ of retrieval rank vs influence rank: an older measure that ties among '
             f'unused passages move">ρ {fmt(q.get("spearman_rho"), ".2f")}</span>')
            if q.get("spearman_rho") is not None else ""]
    qid = esc(q["question_id"])
    ident = f'<a class=qid href="{esc(link(q["question_id"]))}">{qid}</a>' if link else f"<span class=qid>{qid}</span>"
    rows = "".join(_passage(p, drops.get(p["passage_id"]), _group_mark(p, passages)) for p in passages)
    stage = (f'<span class="verdict stage">'
             f'{esc(FAILED_WORDS[q["stage"]])}: {esc(q.get("stage_why"))}</span>' if q.get("stage") in FAILED_WORDS else "")
    return (f'<article class=qcard data-qid="{qid}" data-verdict="{v.key}" data-stage="{esc(q.get("stage") or "")}" '
            f'data-flags="{esc(" ".join(q.get("flags") or []))}"><div class=qhead>{stage}'
            f'<span class="verdict {v.key}">{esc(v.text)}</span><span class=qtext>{esc(q.get("question"))}</span>'
            f'{ident}<span class="muted small">{" · ".join(b for b in bits if b)}</span></div>{_answer(q)}'
            f'<ol class=psgs>{rows}</ol></article>')


def _filter(counts: dict[str, int], n: int) -> str:
    options = [("all", "all", n), ("misaligned", "misaligned", counts.get("misaligned", 0)),
               ("aligned", "aligned", counts.get("aligned", 0)),
               ("unmeasured", "not measured", counts.get("unmeasured", 0))]
    if counts.get("unanswerable"):  # every card belongs to one filter
        options.append(("unanswerable", "unanswerable", counts["unanswerable"]))
    radios = "".join(f'<label><input type=radio name=verdict value="{key}"{" checked" if key == "all" else ""}> '
                     f"{label} ({count})</label>" for key, label, count in options)
    return (f'<div class=vfilter data-verdict-filter="qcards">show: {radios}'
            f'<span class=muted>(<span class=shown>{n}</span> shown)</span></div>')


def question_card(question: dict[str, Any], passages: list[dict[str, Any]], calls: list[dict[str, Any]]) -> str:
    """One question's card on its own, with its style (a notebook's view of one question)."""
    return (f"<div class=ragray-card><style>{QUESTIONS_CSS}</style>"
            + question_cards([question], passages, calls, section=False) + "</div>")


def question_cards(questions: list[dict[str, Any]], passages: list[dict[str, Any]], calls: list[dict[str, Any]],
                   link: Callable[[str], str] | None = None, limit: int = CARD_LIMIT, section: bool = True) -> str:
    """The "Questions" section: the verdict filter and one card per question (at most ``limit``);
    ``section=False``: the cards alone."""
    by_q: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in passages:
        by_q[p["question_id"]].append(p)
    baseline = {q["question_id"]: q.get("baseline_answer") for q in questions}
    drops: dict[str, dict[str, str]] = defaultdict(dict)  # changed answers without a passage (loo mode)
    for c in calls:
        removed = c.get("removed_passage_ids") or []
        if (c.get("arm") == "drop" and len(removed) == 1 and c.get("answer") is not None
                and c["answer"] != baseline.get(c["question_id"])):
            drops[c["question_id"]][removed[0]] = c["answer"]
    shown = questions if len(questions) <= limit else _order(questions)[:limit]
    note = ("" if len(shown) == len(questions) else
            f'<p class=muted data-key="questions.shown" data-value="{len(shown)}">{len(shown)} of {len(questions)} '
            "questions shown, the most informative first (misaligned, then aligned from the lowest usage nDCG); "
            "every question is in questions.csv and passages.csv.</p>")
    counts: dict[str, int] = defaultdict(int)
    for q in shown:
        counts[verdict(q).key] += 1
    cards = "".join(_card(q, sorted(by_q[q["question_id"]], key=lambda p: p["retrieval_rank"]),
                          drops[q["question_id"]], link) for q in shown)
    if not section:
        return cards
    return f'<h2>Questions</h2>{note}{_filter(counts, len(shown))}<div id=qcards>{cards}</div>'
