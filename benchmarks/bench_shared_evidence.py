"""Known-truth sets of shared evidence and noise: does ``used`` see substitutes, complements
and jitter? (issues 43 and 65)

    python benchmarks/shared_evidence_collect.py --split tune|test ...   # the model: per-item records
    python benchmarks/shared_evidence_report.py tune                     # the bar's grid on tune
    python benchmarks/shared_evidence_report.py test --publish           # the one test read; docs/trust.md
    python benchmarks/verify.py --only shared_evidence                   # recompute every figure

This module builds the sets from ``../shared/data`` at run time (their text never reaches the
repo). Per set, source questions are taken in a seeded shuffled order; each item's passages are
shuffled (seed 43) so slots carry no signal:

- ``dup_exact_*`` (a): the gold passage, distractors, and an exact copy of the gold passage (new id);
- ``dup_reordered_squad`` (b): the copy has its sentences in reverse order (a substitute that is
  not byte-identical);
- ``bridge_hotpot`` (c): HotpotQA bridge questions: both supporting paragraphs (complements) and
  three distractors;
- ``offtopic_*`` (d): the gold passage(s), distractors, and two paragraphs of other articles.

Distractors: SQuAD, three other paragraphs of the same article; HotpotQA, two of the question's
own distractor paragraphs. HotpotQA's "gold" for (a) is the supporting paragraph that contains the
answer (items where neither or both do are skipped). PubMedQA is not used: one abstract per
question and yes/no answers, so a right answer is no evidence that a passage was read.

The split, the pre-registration and the test reads: :mod:`benchmarks.protocol`.
"""

from __future__ import annotations

import json
import random
import string
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import SHARED_DATA

SETS = ("dup_exact_squad", "dup_reordered_squad", "dup_exact_hotpot", "bridge_hotpot", "offtopic_squad",
        "offtopic_hotpot")
SEED = 43


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _reverse_sentences(text: str) -> str:
    parts = [p.strip() for p in text.replace("? ", "?| ").replace("! ", "!| ").replace(". ", ".| ").split("| ")]
    return " ".join(reversed([p for p in parts if p]))


def _item(qid: str, row: dict[str, Any], passages: list[dict[str, Any]], roles: dict[str, str]) -> dict[str, Any]:
    rng = random.Random(f"{SEED}:{qid}")
    passages = passages[:]
    rng.shuffle(passages)
    return {"id": qid, "question": row["question"], "answers": row["answers"],
            "passages": [{"id": p["id"], "title": p.get("title") or "", "text": p["text"]} for p in passages],
            "gold_passage_ids": [pid for pid, r in roles.items() if r in ("gold", "copy", "support")],
            "meta": {"roles": roles}}


def _squad() -> Iterator[tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]]:
    """(row, gold passage, 3 same-article distractors, 2 other-article paragraphs) per SQuAD question."""
    corpus = _jsonl(SHARED_DATA / "squad_v11_dev.corpus.jsonl")
    by_article: dict[str, list[dict[str, Any]]] = {}
    for p in corpus:
        by_article.setdefault(p["id"].split("#")[0], []).append(p)
    rows = _jsonl(SHARED_DATA / "squad_v11_dev.jsonl")
    random.Random(SEED).shuffle(rows)
    for row in rows:
        gold_id = row["gold_passage_ids"][0]
        article = gold_id.split("#")[0]
        gold = next(p for p in by_article[article] if p["id"] == gold_id)
        same = [p for p in by_article[article] if p["id"] != gold_id and p["text"] != gold["text"]]
        if len(same) < 3:
            continue
        rng = random.Random(f"{SEED}:{row['id']}:d")
        others = [a for a in by_article if a != article]
        far = [rng.choice(by_article[a]) for a in rng.sample(others, 2)]
        yield row, gold, rng.sample(same, 3), far


def _hotpot(bridge: bool = False) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]]:
    """(row, its two supporting paragraphs, its distractor paragraphs) per HotpotQA question."""
    rows = _jsonl(SHARED_DATA / "hotpotqa_distractor_dev.jsonl")
    random.Random(SEED).shuffle(rows)
    for row in rows:
        if bridge and row["meta"].get("type") != "bridge":
            continue
        gold = set(row["gold_passage_ids"])
        support = [p for p in row["passages"] if p["id"] in gold]
        if len(support) == 2:
            yield row, support, [p for p in row["passages"] if p["id"] not in gold]


def build(name: str, n: int) -> list[dict[str, Any]]:
    """The first ``n`` items of set ``name``."""
    items: list[dict[str, Any]] = []
    if name.endswith("_squad"):
        for row, gold, same, far in _squad():
            copy = dict(gold, id=gold["id"] + "#copy")
            roles = {gold["id"]: "gold", **{p["id"]: "distractor" for p in same}}
            passages = [gold, *same]
            if name == "dup_exact_squad":
                passages.append(copy)
                roles[copy["id"]] = "copy"
            elif name == "dup_reordered_squad":
                if _reverse_sentences(gold["text"]) == gold["text"]:
                    continue  # one sentence: reordering makes no new text
                passages.append(dict(copy, text=_reverse_sentences(gold["text"])))
                roles[copy["id"]] = "copy"
            else:
                passages += far
                roles |= {p["id"]: "offtopic" for p in far}
            items.append(_item(f"{name}:{row['id']}", row, passages, roles))
            if len(items) == n:
                break
        return items
    all_rows = list(_hotpot())
    for row, support, distractors in _hotpot(bridge=name == "bridge_hotpot"):
        if len(distractors) < 3:
            continue
        rng = random.Random(f"{SEED}:{row['id']}:d")
        answer = (row["answers"] or [""])[0].lower()
        if name == "dup_exact_hotpot":
            carrying = [p for p in support if answer and answer in p["text"].lower()]
            if answer in ("yes", "no") or len(carrying) != 1:
                continue
            gold = carrying[0]
            other = next(p for p in support if p is not gold)
            copy = dict(gold, id=gold["id"] + "#copy")
            passages = [gold, other, copy, *rng.sample(distractors, 2)]
            roles = {gold["id"]: "gold", other["id"]: "support", copy["id"]: "copy"}
        elif name == "bridge_hotpot":
            passages = [*support, *rng.sample(distractors, 3)]
            roles = {p["id"]: "support" for p in support}
        else:
            far_rows = [r for r, _, _ in all_rows if r["id"] != row["id"]]
            far = [dict(p, id=f"far:{p['id']}") for p in (rng.choice(r["passages"]) for r in rng.sample(far_rows, 2))]
            passages = [*support, *rng.sample(distractors, 2), *far]
            roles = {**{p["id"]: "support" for p in support}, **{p["id"]: "offtopic" for p in far}}
        roles |= {p["id"]: "distractor" for p in passages if p["id"] not in roles}
        items.append(_item(f"{name}:{row['id']}", row, passages, roles))
        if len(items) == n:
            break
    return items


def _norm(text: str) -> str:
    """SQuAD-style normalisation: lower case, no punctuation or articles, single spaces."""
    text = "".join(c for c in text.lower() if c not in string.punctuation)
    return " ".join(w for w in text.split() if w not in ("a", "an", "the"))


def _answer_elsewhere(item: dict[str, Any]) -> bool:
    """Whether a passage that is not the gold, its copy or a supporting paragraph contains a gold
    answer: there the known truth is ambiguous (the model may rightly answer from that passage)."""
    answers = [a for a in (_norm(x) for x in item["answers"]) if a]
    roles = item["meta"]["roles"]
    return any(any(a in _norm(f"{p['title']} {p['text']}") for a in answers)
               for p in item["passages"] if roles.get(p["id"]) not in ("gold", "copy", "support"))
