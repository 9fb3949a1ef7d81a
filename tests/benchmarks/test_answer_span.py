"""The default ``influence.answer_span`` is the span the committed known-truth measurement backs
(``benchmarks/bench_span.py`` → ``benchmarks/results/archive/answer_span.json``, archived: its
per-question tables were never committed): on the demo set and the
tracing tune split, no fewer top-credit hits than the whole answer, no more false MISALIGNED
verdicts on right answers, and at most 2 questions leaving the measured state."""

import json
from pathlib import Path

from ragray.config import load_config

RESULT = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "archive" / "answer_span.json"


def backed(result: dict, span: str, base: str = "full") -> bool:
    demo, tune = result["demo"], result["tracing"]["tune"]
    measured = lambda r: r["states"].get("measured", 0)  # noqa: E731
    return (demo[span]["top_credit_gold"] >= demo[base]["top_credit_gold"]
            and demo[span]["misaligned_of_those"] <= demo[base]["misaligned_of_those"]
            and tune[span]["top_credit_is_source"] >= tune[base]["top_credit_is_source"]
            and measured(demo[base]) - measured(demo[span]) <= 2 and measured(tune[base]) - measured(tune[span]) <= 2)


def test_the_default_span_is_backed_by_the_measurement_and_the_rejected_one_is_not():
    result = json.loads(RESULT.read_text(encoding="utf-8"))
    default = load_config(None, []).influence.answer_span
    assert default == "through_gold" and backed(result, default)
    assert not backed(result, "first_clause")  # it cut before the answer and left 5 tune questions unmeasured
    # the demo's false alarms are what the default removes
    assert result["demo"]["full"]["misaligned_of_those"] > result["demo"][default]["misaligned_of_those"] == 0
