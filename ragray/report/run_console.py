"""What ``ragray run`` prints: the questions first (which passages each answer used, and whether
the retriever's order matches), then one headline, then the validity panel, then the details.

:func:`question_lines` picks and formats the per-question table (pure, tested); :func:`print_run`
prints a run's summary and records through :mod:`ragray.console`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragray.console import print_pairs, print_table
from ragray.metrics.panel import panel_lines
from ragray.rows.summaries import RunSummary

__all__ = ["CORRECT_LEGEND", "MAX_QUESTIONS", "QUESTION_COLUMNS", "correct_line", "correct_words", "QuestionLine", "group_words", "telling_words", "lead_lines", "LiveTable", "partial_line", "question_lines", "short_of_top_k_line",
           "sources_words", "stage_line", "unverdicted_words", "used_groups", "verdict_words", "print_run", "score_headline"]

#: questions shown in the console table (the rest are in questions.csv and report.html)
MAX_QUESTIONS = 20
#: passages named per question (the most influential used ones)
MAX_USED = 3
QUESTION_COLUMNS = ("#", "question", "correct", "passages the answer used (influence, retrieval rank)", "verdict")

#: a question's state in words, where it has no alignment verdict
STATE_WORDS = {
    "context_ignored": "not measured: the answer does not depend on the passages",
    "diffuse": "no single passage stands clear of the noise (the answer depends on the passages)",
    "constant_influence": "not measured: every passage has the same influence",
    "too_few_passages": "no verdict: fewer than 2 passages, no order to check",
    "error": "error",
}


#: a wrong answer's stage (``stage`` column, ragray.metrics.stages) as the verdict leads with it
FAILED_WORDS = {"retrieval": "RETRIEVAL failed", "ranking": "RANKING failed", "generation": "GENERATION failed",
                "memory": "answered from MEMORY"}
#: what each failed stage points at
FIX_WORDS = {"retrieval": "the retriever, top-k or the corpus", "ranking": "the reranker or the prompt's order",
             "generation": "the model or the prompt", "memory": "the prompt or the model: it answers without the passages"}


@dataclass(frozen=True)
class QuestionLine:
    """One row of the console's question table, with the ids of the passages it names."""

    question_id: str
    cells: tuple[str, ...]
    used_ids: tuple[str, ...]


def _cut(text: str | None, width: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def verdict_words(q: Mapping[str, Any]) -> str:
    """The tie-robust verdict of one question, or why it has none."""
    if q.get("error"):
        return "error: " + _cut(str(q["error"]), 40)
    if q.get("answerable") is False:
        if q.get("declined"):
            return "unanswerable, and the model declined (right)"
        return "unanswerable: the answer is made up (used = what it leaned on; no verdict)"
    stage = q.get("stage")
    if stage in FAILED_WORDS:  # a wrong answer: the stage that failed first, the alignment beside it
        align = {True: "; misaligned", False: "; aligned"}.get(q.get("misaligned"), "")
        return f"{FAILED_WORDS[stage]}: {q.get('stage_why')}{align}"
    if q.get("misaligned") is True:
        return "MISALIGNED: the retriever's order does not match use"
    if q.get("misaligned") is False:
        return "aligned"
    if q.get("context_dependent") is False:
        return "not measured: the model gives this answer without the passages"
    carriers = q.get("carried_by")
    if q.get("state") == "diffuse" and carriers is not None and len(carriers):
        ranks = " ".join(f"#{int(r)}" for r in carriers)
        return f"diffuse: no single passage stands clear of the noise; together {ranks} carry the answer"
    return STATE_WORDS.get(q.get("state") or "", f"not measured ({q.get('state')})")


#: what the console's ``correct`` column says, in one line under the table
CORRECT_LEGEND = ("correct: yes / no = the answer contains a gold answer (no, declined: the model said it cannot "
                  "answer); declined / answered anyway = an unanswerable question (no gold answer: declining is "
                  "right); - = no gold answer to judge by")


def correct_words(q: Mapping[str, Any]) -> str:
    """``yes`` / ``no`` against the gold answers; ``declined`` / ``answered anyway`` on an
    unanswerable question; ``-`` where there is nothing to judge by."""
    if q.get("answerable") is False:
        declined = q.get("declined")
        return "-" if declined is None else ("declined" if declined else "answered anyway")
    v = q.get("answer_correct")
    return "-" if v is None else ("yes" if v else "no, declined" if q.get("declined") else "no")


def _name(p: Mapping[str, Any], width: int = 32) -> str:
    return _cut(p.get("title") or p.get("passage_id"), width)


def used_groups(passages: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The used passages of one question, most influential first, a group of passages that
    substitute for or complement each other as one entry (its members in retrieval order)."""
    entries: dict[Any, list[Mapping[str, Any]]] = {}
    for p in sorted((p for p in passages if p.get("used")), key=lambda p: p.get("retrieval_rank") or 0):
        g = p.get("group")
        key = ("group", int(g)) if g is not None and g == g else ("passage", p.get("passage_id"))  # NaN: none
        entries.setdefault(key, []).append(p)
    return sorted(entries.values(), key=lambda ps: -sum(p.get("influence") or 0.0 for p in ps))


#: passages of a group named (and ranks shown) before the rest are counted
MAX_NAMED = 3


def _rank(p: Mapping[str, Any]) -> str:
    """``#3``, and ``#3 gold`` for a gold passage."""
    return f"#{p['retrieval_rank']}" + (" gold" if p.get("is_gold") else "")


def _words(text: str | None) -> list[str]:
    return " ".join((text or "").split()).split(" ") if text else []


def telling_words(p: Mapping[str, Any], others: Sequence[Mapping[str, Any]], n: int = 4) -> str:
    """A few words of ``p``'s text where it stops reading like ``others`` (passages of the same
    title): ``"the embargo was lifted…"`` — the words after the longest word prefix it shares
    with any of them."""
    words = _words(p.get("text"))
    common = 0
    for o in others:
        ow = _words(o.get("text"))
        k = 0
        while k < min(len(words), len(ow)) and words[k] == ow[k]:
            k += 1
        common = max(common, k)
    shown = words[common:common + n]
    if not shown:
        return ""
    return '"' + ("…" if common else "") + " ".join(shown) + ("…" if common + n < len(words) else "") + '"'


def group_words(members: Sequence[Mapping[str, Any]], width: int = 32,
                same_title: Sequence[Mapping[str, Any]] = ()) -> str:
    """``A (0.93, #1)``, or for a group ``A or B (either suffices; 0.93, #1 #3)`` (``A and B`` where
    they share evidence or are needed together; past :data:`MAX_NAMED`, ``A or B or 8 more``); a group of one
    passage repeated reads ``A or its copy``, of passages that only share a title (chunks of one
    document) ``2 passages of A``. A gold passage's rank reads ``#1 gold``; a passage named beside
    ``same_title`` (other named passages of its title) adds a few words that tell it apart."""
    influence = sum(p.get("influence") or 0.0 for p in members)
    ranks = " ".join(_rank(p) for p in members[:MAX_NAMED])
    ranks += " …" if len(members) > MAX_NAMED else ""
    if len(members) == 1:
        telling = telling_words(members[0], same_title) if same_title else ""
        return f"{_name(members[0], width)}{' ' + telling if telling else ''} ({influence:.2f}, {ranks})"
    relation = members[0].get("relation") or "either suffices"
    names = [_name(p, width) for p in members]
    texts = {" ".join((p.get("text") or "").split()) for p in members}
    if len(set(names)) == 1 and len(texts) == 1:  # the same passage again
        words = names[0] + (" or its copy" if len(names) == 2 else f" or its {len(names) - 1} copies")
    elif len(set(names)) == 1:  # passages of one document (a corpus's chunks share its title)
        words = f"{len(names)} passages of {names[0]}"
    else:
        joint = " or " if relation == "either suffices" else " and "
        if len(names) > MAX_NAMED:  # evidence a corpus repeats in many passages: name the best-ranked
            names = [*names[: MAX_NAMED - 1], f"{len(names) - MAX_NAMED + 1} more"]
        words = joint.join(names)
    return f"{words} ({relation}; {influence:.2f}, {ranks})"


def _used(passages: Sequence[Mapping[str, Any]]) -> tuple[str, tuple[str, ...]]:
    entries = used_groups(passages)
    if not entries:
        return "none", ()
    shown = entries[:MAX_USED]
    hidden_gold = next((e for e in entries[MAX_USED:] if any(p.get("is_gold") for p in e)), None)
    if hidden_gold is not None and not any(p.get("is_gold") for e in shown for p in e):
        shown = [*entries[: MAX_USED - 1], hidden_gold]  # a used gold passage is never hidden in "+N more"
    more = f" +{len(entries) - len(shown)} more" if len(entries) > len(shown) else ""

    def alike(e: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The other named single passages with ``e``'s title (told apart by a few words)."""
        if len(e) != 1:
            return []
        return [o[0] for o in shown if len(o) == 1 and o is not e and _name(o[0]) == _name(e[0])]

    return "; ".join(group_words(e, same_title=alike(e)) for e in shown) + more, tuple(
        p["passage_id"] for e in shown for p in e)


def _informative(q: Mapping[str, Any]) -> tuple:
    """Sort key: misaligned first (least aligned first), then measured, then the rest."""
    nd = q.get("usage_ndcg")
    return (0 if q.get("misaligned") else 1 if q.get("misaligned") is False else 2,
            nd if nd is not None else 2.0)


def question_lines(questions: Sequence[Mapping[str, Any]], passages: Sequence[Mapping[str, Any]],
                   limit: int = MAX_QUESTIONS) -> tuple[list[QuestionLine], str | None]:
    """The table's rows in dataset order (all questions up to ``limit``; beyond, the most
    informative ``limit``: misaligned first) and a note on what was left out."""
    by_q: dict[str, list[Mapping[str, Any]]] = {}
    for p in passages:
        by_q.setdefault(p["question_id"], []).append(p)
    order = {q["question_id"]: i for i, q in enumerate(questions)}
    chosen = list(questions)
    note = None
    if len(chosen) > limit:
        chosen = sorted(sorted(chosen, key=_informative)[:limit], key=lambda q: order[q["question_id"]])
        note = (f"showing {limit} of {len(questions)} questions, misaligned first; all of them are in "
                "questions.csv and report.html")
    lines = []
    for q in chosen:
        used, ids = _used(by_q.get(q["question_id"], ()))
        cells = (str(order[q["question_id"]] + 1), _cut(q.get("question"), 48), correct_words(q), used, verdict_words(q))
        lines.append(QuestionLine(q["question_id"], cells, ids))
    return lines, note


def sources_words(s: Any) -> str:
    """Where the passages came from (``bm25 top-10 of 2,067 corpus passages (squad.corpus.jsonl)``);
    a summary written before the field existed says retriever and k."""
    return getattr(s, "passages_from", None) or f"{getattr(s, 'retriever', '?')} top-{getattr(s, 'top_k', '?')}"


def short_of_top_k_line(s: Any, top_k: int) -> str | None:
    """``4 of 6 questions got fewer than 10 passages (1 passage: 1; 3 passages: 3)`` and what one
    passage means for the verdict; None when every question got ``top_k``, or when they searched
    their own passages (the run line says how many) and each got two or more."""
    short = getattr(s, "short_of_top_k", None)
    own = "own passages" in (getattr(s, "passages_from", None) or "")  # the run line gave the counts
    if not short or (own and not ({"0", "1"} & set(short))):
        return None
    n = sum(short.values())
    parts = "; ".join(f"{k} passage{'s' if k != '1' else ''}: {v}" for k, v in short.items())
    line = f"{n} of {s.n_questions} questions got fewer than {top_k} passages ({parts})"
    if "1" in short or "0" in short:
        line += "; with one passage there is no retrieval order to check, so no verdict"
    return line


def _fmt(value: object, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def headline(s: RunSummary) -> str:
    """The run's answer in one sentence: how often the retriever's order misses what was used."""
    a = s.alignment
    if not a or not a.n_scored:
        return "misaligned: not measured (no question's answer used any passage measurably)"
    k = round((a.misaligned_rate or 0.0) * a.n_scored)
    lo, hi = a.misaligned_ci95
    return (f"misaligned: {k} of {a.n_scored} questions ({_fmt(a.misaligned_rate, '.0%')}, 95% CI "
            f"{_fmt(lo, '.0%')}..{_fmt(hi, '.0%')}) — the answer leaned on passages the retriever ranked "
            f"lower than passages it did not use (usage nDCG < {a.misalignment_threshold:g})")


def correct_line(questions: Sequence[Mapping[str, Any]], s: RunSummary | None = None) -> str:
    """``answered correctly: 2 of 2 answerable (...); declined 1 of 4 unanswerable``, and the
    questions neither counts (no gold answer to judge by, or no answer)."""
    unanswerable = [q for q in questions if q.get("answerable") is False]
    judged = [q["answer_correct"] for q in questions if q.get("answerable") is not False and q.get("answer_correct") is not None]
    declined = [q["declined"] for q in unanswerable if q.get("declined") is not None]
    parts = []
    if judged:
        quality = (f"; exact match {_fmt(s.baseline_exact_match)}, token F1 {_fmt(s.quality.f1)}" if s is not None else "")
        refused = sum(bool(q.get("declined")) for q in questions if q.get("answerable") is not False
                      and q.get("answer_correct") is not None)
        parts.append(f"answered correctly: {sum(judged)} of {len(judged)} answerable (the answer contains a gold "
                     f"answer{quality}{f'; {refused} declined' if refused else ''})")
    if unanswerable:
        parts.append(f"declined {sum(declined)} of {len(unanswerable)} unanswerable (declining is right; "
                     f"{len(declined) - sum(declined)} answered anyway)")
    if not parts:
        return "answered correctly: no gold answers to judge by"
    rest = len(questions) - len(judged) - len(unanswerable)
    return "; ".join(parts) + (f"; {rest} not judged (no gold answer or no answer)" if rest else "")


def unverdicted_words(questions: Sequence[Mapping[str, Any]]) -> str | None:
    """Why the questions without an alignment verdict have none, counted by reason (the console
    and the report say the same): ``3 unanswerable, 1 answered without the passages, …``."""
    reasons: dict[str, int] = {}
    for q in questions:
        if q.get("misaligned") is not None:
            continue
        why = ("failed" if q.get("error") or q.get("state") == "error" else
               "unanswerable" if q.get("answerable") is False else
               "answered without the passages" if q.get("context_dependent") is False else
               "no single passage stands clear of the noise" if q.get("state") == "diffuse" else
               STATE_WORDS.get(q.get("state") or "", f"not measured ({q.get('state')})").split(": ")[-1])
        reasons[why] = reasons.get(why, 0) + 1
    return ", ".join(f"{n} {why}" for why, n in reasons.items()) or None


def partial_line(summary: Any) -> str | None:
    """``PARTIAL: 2 of 8 questions finished (interrupted) …`` for a run that stopped early (a summary
    object or its dict); None for a whole run."""
    p = summary.get("partial") if isinstance(summary, Mapping) else getattr(summary, "partial", None)
    if not p:
        return None
    why = {"interrupted": "interrupted", "stopped": "stopped before it could finish"}.get(p.get("why"), p.get("why"))
    return (f"PARTIAL: {p.get('questions_done')} of {p.get('questions')} questions finished ({why}); every figure "
            f"is over those {p.get('questions_done')}; `--resume` continues the run")


def stage_line(questions: Sequence[Mapping[str, Any]]) -> str | None:
    """``wrong answers by stage: 3 retrieval (…), 2 ranking (…), …`` — what to fix, counted; None
    where no wrong answer has a stage."""
    wrong = [q for q in questions if q.get("stage") in FAILED_WORDS]
    unknown = sum(q.get("answer_correct") is False and q.get("stage") == "not_judged" for q in questions)
    if not wrong and not unknown:
        return None
    counts = {st: sum(q["stage"] == st for q in wrong) for st in FAILED_WORDS}
    parts = [f"{n} {st} ({FIX_WORDS[st]})" for st, n in counts.items() if n]
    if unknown:
        parts.append(f"{unknown} not located (no gold passages to tell retrieval from generation)")
    return "wrong answers by stage: " + ", ".join(parts)


def score_headline(s: Any) -> str:
    """``ragray score``'s first line: how many answers are right, and for the wrong ones whether the
    contexts held a gold answer (the generator missed it) or not (retrieval did)."""
    in_ctx, not_in_ctx = s.n_wrong_gold_in_context or 0, s.n_wrong_gold_not_in_context or 0
    correct, wrong = s.n_correct or 0, in_ctx + not_in_ctx
    n = correct + wrong
    line = f"answered correctly: {correct} of {n} with gold answers (the answer contains a gold answer)"
    if wrong:
        line += (f"; of the {wrong} wrong, {in_ctx} had a gold answer in their contexts (the generator missed it) "
                 f"and {not_in_ctx} did not (retrieval missed it)")
    return line


def _plain_states(states: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in states.items()) or "none"


def _details(s: RunSummary, mode_text: str) -> list[tuple[str, str]]:
    a, pos = s.alignment, s.position
    lo, hi = s.mean_spearman_ci95
    rows = [("questions", f"{s.n_measured} of {s.n_questions} measured ({_plain_states(s.states)})"),
            ("influence measured by", mode_text)]
    if a:
        rows.append(("usage nDCG / RBO (p=%g)" % a.rbo_p,
                     f"{_fmt(a.usage_ndcg.mean)} (95% CI {_fmt(a.usage_ndcg.low)}..{_fmt(a.usage_ndcg.high)}) / "
                     f"{_fmt(a.rbo_alignment.mean)}"))
        rows.append(("top-1 passage used / answer relies on a lower rank",
                     f"{_fmt(a.top1_used_rate)} / {_fmt(a.relies_on_lower_rank_rate)}"))
    if pos is None or pos.control == "none":
        rows.append(("position control", "none: influence may follow the slot, not the passage "
                     "(--position-control reversed)"))
    else:
        rows.append((f"position-driven rate ({pos.control} order)",
                     f"{_fmt(pos.position_driven_rate)}, mean sensitivity {_fmt(pos.position_sensitivity.mean)}, "
                     f"{pos.control_calls} extra calls ({_fmt(pos.control_call_share, '.0%')})"))
    rule = f"Spearman rule (original, rho < {s.divergence_threshold:g})"
    cleared = f"; {a.divergent_not_misaligned} of them aligned by usage nDCG" if a and a.divergent_not_misaligned else ""
    rows += [
        (rule, f"divergent rate {_fmt(s.divergent_rate)}, mean rho {_fmt(s.mean_spearman)} "
               f"(95% CI {_fmt(lo)}..{_fmt(hi)}){cleared}; ties make rho unreliable, read usage nDCG"),
        ("mean dominance", _fmt(s.mean_dominance)),
        ("grounding / hallucination rate", f"{_fmt(s.quality.grounding)} / {_fmt(s.quality.hallucination_rate)}"),
        ("noise ratio: labels / causal", f"{_fmt(s.quality.label_noise_ratio)} / {_fmt(s.quality.causal_noise_ratio)}"),
        ("flags", ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in s.flag_counts.items() if v) or "none"),
        ("calls", _calls_line(s)),
        *([("engine (per question)", _engine_line(s.engine))] if s.engine else []),
        ("errors", str(s.errors)),
    ]
    return rows


def _engine_line(e: Mapping[str, Any]) -> str:
    """What the in-process engine did per question: the speed proxies that need no GPU to read."""
    over = e.get("computed_over_minimum")
    line = (f"{_fmt(e.get('forward_passes_per_question'), '.1f')} forward passes, "
            f"{_fmt(e.get('host_syncs_per_question'), '.1f')} host waits, "
            f"{_fmt(e.get('tokens_computed_per_question'), '.0f')} tokens computed")
    if over is not None:
        line += f" ({over:.2f}x the exact-reuse minimum, {100 * (e.get('padding_share') or 0):.0f}% padding)"
    return line


def _calls_line(s: RunSummary) -> str:
    hits = (s.cache or {}).get("calls_hit") or 0
    line = f"{s.n_calls} ({s.n_failed_calls} failed), {_fmt(s.calls_per_second, '.2f')} calls/s"
    return line + (f"; {hits} answered from the call cache (no model call, so not a speed)" if hits else "")


def lead_lines(s: RunSummary, questions: Sequence[Mapping[str, Any]]) -> list[str]:
    """The lines under the table: the headline, answered correctly, wrong answers by stage."""
    return [line for line in (partial_line(s), headline(s), correct_line(questions, s), stage_line(questions)) if line]


class LiveTable:
    """The question table as it fills: the header before the first question, then each question's
    line the moment it finishes (finishing order, numbered by its place in the data set), the same
    cells the end-of-run table has, as plain columns (a table cannot be sized before its rows)."""

    def __init__(self, question_ids: Sequence[str]) -> None:
        self.number = {qid: i + 1 for i, qid in enumerate(question_ids)}
        self.width = len(str(len(question_ids) or 1))
        self.shown = 0

    def _cells(self, cells: Sequence[str]) -> str:
        num, question, correct, used, verdict = cells
        return f"{num:>{self.width}}  {question:<48}  {correct:<8}  {used}  |  {verdict}".rstrip()

    def header(self) -> str:
        return self._cells(QUESTION_COLUMNS)

    def cells(self, question: Mapping[str, Any], passages: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """``question``'s cells (its row and its passages' rows), in :data:`QUESTION_COLUMNS` order."""
        used, _ = _used(passages)
        self.shown += 1
        return (str(self.number.get(question["question_id"], "?")), _cut(question.get("question"), 48),
                correct_words(question), used, verdict_words(question))

    def line(self, question: Mapping[str, Any], passages: Sequence[Mapping[str, Any]]) -> str:
        """``question``'s line."""
        return self._cells(self.cells(question, passages))


def print_run(s: RunSummary, questions: Sequence[Mapping[str, Any]], passages: Sequence[Mapping[str, Any]],
              mode_text: str, *, table: bool = True) -> None:
    """The questions (``table`` False: already printed as they finished, so only the legend of
    their marks), the headline, the validity panel, the details."""
    lines, note = question_lines(questions, passages, limit=len(questions) if not table else MAX_QUESTIONS)
    if lines and table:
        print_table(QUESTION_COLUMNS, [line.cells for line in lines], numeric=(0,))
    if any(line.cells[2] not in ("yes", "no") for line in lines):  # a mark beyond yes / no: say what it means
        print(f"({CORRECT_LEGEND})")
    if note and table:
        print(f"({note})")
    print()
    print("\n".join(lead_lines(s, questions)))
    verdict, panel = panel_lines(s.panel)
    print("\n".join(verdict))
    if panel:
        print_table(panel[0], panel[1:])
    print()
    print_pairs(_details(s, mode_text))
