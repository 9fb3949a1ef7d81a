"""/openapi.json describes the influence, interpretation and audit responses field by field
(their models are the typed rows of ragray.rows) and the runs' summaries key by key."""

from __future__ import annotations

import dataclasses

import pytest
from fastapi.testclient import TestClient

from ragray.rows import ArmRow, AuditEntry, CallRow, FaithfulnessQuestionRow, PassageRow, QuestionRow, UnitRow
from ragray.rows.summaries import AuditSummary, FaithfulnessSummary, RunSummary, ScoreSummary
from ragray.adapters.serving.local import local_app
from ragray.config import load_config


@pytest.fixture(scope="module")
def schema(tmp_path_factory):
    """The served app's /openapi.json, built once for the module (the schema is the app's, not a
    request's: a fresh app per test was half a second each)."""
    home = tmp_path_factory.mktemp("openapi")
    config = load_config(None, ["generation.backend=scripted", "metrics.embedding=false",
                                f"serve.runs_dir={home / 'runs'}", f"history.url=sqlite:///{home / 'history.sqlite'}"])
    with TestClient(local_app(config)) as client:
        return client.get("/openapi.json").json()


def _props(schema: dict, name: str) -> dict:
    return schema["components"]["schemas"][name]["properties"]


@pytest.mark.parametrize(("response", "field", "row"), [
    ("InfluenceResponse", "question", QuestionRow), ("InfluenceResponse", "passages", PassageRow),
    ("InfluenceResponse", "calls", CallRow), ("InterpretationResponse", "question", FaithfulnessQuestionRow),
    ("InterpretationResponse", "importances", UnitRow), ("InterpretationResponse", "deletions", ArmRow),
    ("AuditResponse", "audit", AuditEntry),
])
def test_every_row_field_is_in_the_schema(schema, response, field, row):
    text = str(_props(schema, response)[field])
    assert row.__name__ in text  # the response field refers to the row's model ...
    props = _props(schema, row.__name__)
    assert set(props) == {f.name for f in dataclasses.fields(row)}  # ... which lists every column


def test_fields_carry_their_meaning(schema):
    q = _props(schema, "QuestionRow")
    assert "tie-robust misalignment" in q["misaligned"]["description"]
    assert "dtype" in q["dtype"]["description"]
    assert "NaN = that ablation call failed" in _props(schema, "PassageRow")["influence"]["description"]
    assert "sim_<measure>" in _props(schema, "ArmRow")["similarities"]["description"]


@pytest.mark.parametrize("summary", [RunSummary, FaithfulnessSummary, AuditSummary, ScoreSummary])
def test_run_status_summaries_are_typed(schema, summary):
    """GET /runs/{id}: the summary is one of the typed summaries, each listed key by key."""
    assert summary.__name__ in str(_props(schema, "RunStatus")["summary"])
    assert set(_props(schema, summary.__name__)) == set(summary.names())
