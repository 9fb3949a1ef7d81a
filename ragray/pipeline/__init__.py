"""The pipeline: what every ragray command does, whoever calls it.

The CLI (``ragray.adapters.cli``), the Serve API (``ragray.adapters.serving``: ad-hoc questions and ``POST /runs``),
Tune trials (``ragray.adapters.sweep.trial``), simulation mode (``ragray.simulate``) and Ray Data actors
(``ragray.adapters.execution.ray_data``) call these and add no logic of their own::

    run_influence / run_interpret            (influence.py, interpret.py)
      └ QuestionCommand.__call__             executors.py: the whole resumable command
          ├ open_question_run                questions.py: run dir, resume check, dataset,
          │                                    RetrievalStage (retrieval/stage.py → retrieval/tail.py)
          ├ run_questions                    EXECUTORS["local" | "ray"]
          │   ├ open_generator                generators.py: the backend behind the call cache
          │   ├ InFlight                      in_flight.py: up to max_questions_in_flight at once
          │   └ influence_processor / faithfulness_processor   processors.py, one per process or actor
          │       ├ InfluenceLoop / FaithfulnessExperiment → InfluenceRecord / FaithfulnessRecord
          │       └ edit_test                 edit_test.py: influence.edit_test, after the attribution
          └ write_record_tables, summary.json, report.html
    run_audit                                audit.py: RetrievalStage → audit_entry per query
    run_score                                score.py: QualityScorer over a user's records
    run_retrieve                             retrieve.py: RetrievalStage → hits and their metrics

The Serve service answers one question with the same pieces: the retrieval tail
(:func:`ragray.retrieval.tail.finish_hits`), the influence and faithfulness loops, and
:func:`~ragray.pipeline.audit.audit_entry`.
"""

import json
from pathlib import Path

from ragray.pipeline.audit import AuditRun, audit_entry, run_audit
from ragray.pipeline.executors import EXECUTORS, Executor, QuestionCommand, run_questions
from ragray.pipeline.influence import run_influence
from ragray.pipeline.interpret import run_interpret
from ragray.pipeline.processors import faithfulness_processor, influence_processor
from ragray.pipeline.questions import QuestionRun, RunResult, open_question_run, write_record_tables
from ragray.pipeline.retrieve import RetrieveResult, run_retrieve
from ragray.pipeline.score import run_score

#: the resumable per-question commands by name (``POST /runs``' ``command``)
QUESTION_COMMANDS: dict[str, QuestionCommand] = {c.command: c for c in (run_influence, run_interpret)}


def open_stopped_run(folder: Path) -> bool:
    """A run directory left without a summary (its process was killed mid-run) made readable from
    its ``config.yaml`` and ``progress.jsonl`` (:meth:`QuestionCommand.write_partial`); False where
    the folder holds no finished question of a per-question command."""
    log = folder / "progress.jsonl"
    if not (folder / "config.yaml").is_file() or not log.is_file() or not log.stat().st_size:
        return False
    with log.open(encoding="utf-8") as f:
        first = json.loads(f.readline() or "{}")
    command = run_interpret if "arms" in first or "units" in first else run_influence
    command.write_partial(folder)
    return True

__all__ = [
    "EXECUTORS",
    "AuditRun",
    "Executor",
    "QUESTION_COMMANDS",
    "QuestionCommand",
    "QuestionRun",
    "RetrieveResult",
    "RunResult",
    "audit_entry",
    "faithfulness_processor",
    "influence_processor",
    "open_question_run",
    "open_stopped_run",
    "run_audit",
    "run_influence",
    "run_interpret",
    "run_questions",
    "run_retrieve",
    "run_score",
    "write_record_tables",
]
