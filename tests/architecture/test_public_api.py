"""The public API, pinned: a change to these names or signatures must be deliberate (and noted)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import ragray
import ragray.pipeline as pipeline
import ragray.rows as rows

PUBLIC = [
    "__version__", "attribute", "run", "interpret", "score", "audit_retrieval", "run_retriever", "load_run",
    "clear_models", "Run", "Attribution", "Attributor", "ExperimentConfig", "load_config",
]

SIGNATURES = {
    "run_influence": "(config: 'ExperimentConfig', out: 'str | Path | None', *, resume: 'bool' = False, progress: 'bool' "
                     "= True, generator: 'ModelSource | None' = None, on_record: 'Callable[[QuestionRecord], None] "
                     "| None' = None, on_start: 'Callable[[RunStart], None] | None' = None, dataset: "
                     "'Dataset | None' = None) -> 'RunResult'",
    "run_interpret": "(config: 'ExperimentConfig', out: 'str | Path | None', *, resume: 'bool' = False, progress: 'bool' "
                     "= True, generator: 'ModelSource | None' = None, on_record: 'Callable[[QuestionRecord], None] "
                     "| None' = None, on_start: 'Callable[[RunStart], None] | None' = None, dataset: "
                     "'Dataset | None' = None) -> 'RunResult'",
    "run_audit": "(config: 'ExperimentConfig', out: 'str | Path | None', *, progress: 'bool' = True, generator: "
                 "'ModelSource | None' = None, dataset: 'Dataset | None' = None) -> 'AuditRun'",
    "run_score": "(config: 'ExperimentConfig', records: 'str | Path | Sequence[Mapping[str, Any]]', out: "
                 "'str | Path | None', *, scorer: 'QualityScorer | None' = None) -> 'RunResult'",
    "run_retrieve": "(config: 'ExperimentConfig', out: 'str | Path', progress: 'bool' = True) -> 'RetrieveResult'",
    "open_question_run": "(config: 'ExperimentConfig', out: 'str | Path | None', *, resume: 'bool', record_type: "
                         "'type[QuestionRecord]', dataset: 'Dataset | None' = None) -> 'QuestionRun'",
    "run_questions": "(qr: 'QuestionRun', config: 'ExperimentConfig', builder: 'Builder', desc: 'str', progress: "
                     "'bool', postfix: 'Callable[[QuestionRecord], dict[str, str]] | None', record_type: "
                     "'type[QuestionRecord]', generator: 'ModelSource | None' = None, on_record: "
                     "'Callable[[QuestionRecord], None] | None' = None) -> 'Executor'",
    "influence_processor": "(config: 'ExperimentConfig', generator: 'Generator | None' = None, *, substitutes: "
                           "'Sequence[str] | None' = None) -> 'Callable[[QuestionHits], InfluenceRecord]'",
    "faithfulness_processor": "(config: 'ExperimentConfig', generator: 'Generator | None' = None) -> "
                              "'Callable[[QuestionHits], FaithfulnessRecord]'",
    "audit_entry": "(qid: 'str', query: 'str', hits: 'Sequence[Hit]', relevant_ids: 'Sequence[str]', k: 'int', "
                   "pass_score: 'int') -> 'AuditEntry'",
}


def test_top_level_names_are_pinned_and_resolve() -> None:
    assert ragray.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(ragray, name) is not None, name
    # the layers' names the top level used to export: still there for a release, with a warning
    with pytest.warns(DeprecationWarning, match="from ragray.pipeline import run_influence"):
        assert ragray.run_influence is pipeline.run_influence


def test_import_ragray_does_no_work() -> None:
    code = "import sys, ragray; print(sorted(m for m in sys.modules if m.startswith('ragray')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    # ragray._moved: the adapters' old import paths (a finder on sys.meta_path, stdlib only)
    assert out.stdout.strip() == "['ragray', 'ragray._moved']", out.stdout + out.stderr


def test_pipeline_entry_points_are_pinned() -> None:
    assert sorted(pipeline.__all__) == sorted([
        "EXECUTORS", "AuditRun", "Executor", "QUESTION_COMMANDS", "QuestionCommand", "QuestionRun", "RetrieveResult",
        "RunResult", "audit_entry", "faithfulness_processor", "influence_processor", "open_question_run", "open_stopped_run", "run_audit",
        "run_influence", "run_interpret", "run_questions", "run_retrieve", "run_score", "write_record_tables",
    ])
    assert pipeline.QUESTION_COMMANDS == {"run": pipeline.run_influence, "interpret": pipeline.run_interpret}
    for name, signature in SIGNATURES.items():
        assert str(inspect.signature(getattr(pipeline, name))) == signature, name


def test_row_classes_are_exported() -> None:
    assert set(rows.__all__) == {
        "ArmRow", "AuditEntry", "CallRow", "CaseRow", "CurveRow", "FaithfulnessQuestionRow", "FaithfulnessRecord",
        "HitRow", "InfluenceRecord", "PassageRow", "QuestionRecord", "QuestionRow", "RetrievalQuestionRow", "Row",
        "ScoreRow", "UnitRow", "SubsetRow", "CheckRow", "Summary", "RunSummary", "FaithfulnessSummary", "AuditSummary", "ScoreSummary",
    }
