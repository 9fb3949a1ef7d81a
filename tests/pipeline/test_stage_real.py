"""Issue 66's done-when on the packaged SmolLM2 at defaults: the stage that failed, told apart.

ragray's own demo question "In what year was Skerrow Point Lighthouse first lit?" (gold: 1871, a
fictional lighthouse, so the model cannot know it without its passage), given three ways:

- the gold passage ranked #1, and a passage at the bottom made to carry a wrong year: the answer
  follows the bottom passage, so the gold sat above what the answer leaned on — a **generation**
  failure (the model or the prompt), not the retriever's;
- the gold passage not among the passages: a **retrieval** failure;
- the demo's own ten passages in the order ``ragray run``'s BM25 ranks them (the gold #1; the API
  keeps the rows' order): **right**.

(The gold at #1 beside four unrelated passages is not a "right" case for this model: it answers
"The year is not specified.", and ragray names that a generation failure, as it is.)
"""

from __future__ import annotations

import json

import pytest

import ragray
from ragray.data.loading import demo_path

pytestmark = [pytest.mark.slow]

QUESTION = "In what year was Skerrow Point Lighthouse first lit?"
#: a passage made to carry a wrong year, written as the gold is
WRONG = ("demo-wrong", "Skerrow Point Lighthouse: the records",
         "The lighthouse records of the Island Council say it plainly: Skerrow Point Lighthouse was first lit in "
         "1902. Skerrow Point Lighthouse was first lit in 1902, the year the keepers' cottages were finished.")


#: the demo question's passages as ``ragray run`` ranks them (BM25 over the row's own passages)
BM25_ORDER = ["demo-p001", "demo-p007", "demo-p004", "demo-p003", "demo-p002", "demo-p057", "demo-p045", "demo-p048",
              "demo-p032", "demo-p068"]


def _demo() -> dict[str, dict]:
    rows = [json.loads(line) for line in demo_path().read_text(encoding="utf-8").splitlines()]
    return {p["id"]: p for r in rows for p in r["passages"]}


def _row(qid: str, ids: list[str], extra: tuple[str, str, str] | None = None) -> dict:
    ps = _demo()
    passages = [{"id": i, "title": ps[i].get("title"), "text": ps[i]["text"]} for i in ids]
    if extra is not None:
        passages.append({"id": extra[0], "title": extra[1], "text": extra[2]})
    return {"id": qid, "question": QUESTION, "answers": ["1871", "14 October 1871"],
            "gold_passage_ids": ["demo-p001"], "passages": passages}


def test_the_stage_names_generation_retrieval_and_right_with_the_real_model():
    unrelated = ["demo-p057", "demo-p045", "demo-p048", "demo-p068"]
    rows = [_row("generation", ["demo-p001", *unrelated[:3]], WRONG),
            _row("retrieval", unrelated),
            _row("right", BM25_ORDER)]
    run = ragray.run(rows)
    q = {r["question_id"]: r for r in run.questions}
    used = {(p["question_id"], p["retrieval_rank"]) for p in run.passages if p["used"]}
    # the answer took the wrong year from the bottom passage, and ragray marks that passage used
    assert "1902" in q["generation"]["baseline_answer"] and q["generation"]["answer_correct"] is False
    assert ("generation", 5) in used
    assert q["generation"]["stage"] == "generation", q["generation"]
    assert q["generation"]["stage_why"].startswith("gold ranked #1, above #5"), q["generation"]["stage_why"]
    assert q["retrieval"]["answer_correct"] is False and q["retrieval"]["stage"] == "retrieval"
    assert q["right"]["answer_correct"] is True and q["right"]["stage"] == "right", q["right"]
