"""Simulation mode (SPEC §4): a run directory of known ground truth, without any model.

``ragray simulate --scenario S`` draws, per question, the drop-one influence of each of its ``k``
passages from a seeded scenario, writes a dataset and a design file, and runs the ordinary
influence loop (:func:`ragray.pipeline.influence.run_influence`) over them with the ``given`` retriever
(the dataset order is the retrieval ranking) and the ``simulated`` generator
(:mod:`ragray.generation.simulated`), whose answers make the measured influence equal the designed
one (to 1/``WIDTH``). The output therefore has exactly the schema of a real run — the same tables,
summary, report and history record — and reports, dashboards and failure-mode detectors can be
checked against what was designed. It is marked simulated: ``generation.backend: simulated`` in
``config.yaml``, ``"simulated"`` in ``summary.json`` (scenario, seed, questions per scenario), and
``simulation.json`` (the design: every question's scenario and designed influence).

Scenarios (influence by retrieval rank 1..k):

- ``aligned``: falling from 0.9 to 0.05 with a little noise — the model uses what ranks high
  (ρ ≈ 1; no flag);
- ``inverted``: the same, reversed — the model relies on the lowest-ranked passages (ρ ≈ −1:
  ``divergent``, ``inverted``, ``buried_evidence``);
- ``random``: independent uniform values — ranking and use unrelated (ρ ≈ 0, mostly ``divergent``);
- ``dominant``: one passage at a random rank carries 0.9, the others 0.02–0.05
  (``single_passage_dominance``; ``buried_evidence`` when it sits in the lower half);
- ``ignored``: nothing changes the answer (``context_ignored``, unmeasured);
- ``aligned_sparse``: only the retriever's #1 is used (0.9), the rest change nothing — aligned, yet
  the seed's ρ is capped at ≈ 0.52 by the ties (``divergent``, never ``misaligned``);
- ``buried_sparse``: one used passage (0.9) in the lower half of the ranking, the rest unused
  (``misaligned``, ``divergent``, ``buried_evidence``);
- ``positional``: the answer follows whatever stands in the last slots before the question, not
  any passage (a recency bias): dropping the passage in slot j from the end changes the words that
  slots j, j + 1, … supply (the last slot supplies half the answer, the next a quarter, the third
  0.15). In retrieval order that looks like reliance on the lowest-ranked passages; with
  ``influence.position_control`` it is ``position_driven``;
- ``mixed``: each question draws one of the first five.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragray.config import ExperimentConfig, apply_overrides, validate_config
from ragray.errors import InputError
from ragray.pipeline.influence import run_influence
from ragray.pipeline.questions import RunResult
from ragray.store.rundir import prepare_run_dir

__all__ = ["SCENARIOS", "WIDTH", "design", "simulate", "simulation_config"]

#: words of a simulated baseline answer: influence resolution 1/WIDTH
WIDTH = 40


def _aligned(rng: np.random.Generator, k: int) -> np.ndarray:
    return np.clip(np.linspace(0.9, 0.05, k) + rng.normal(0, 0.02, k), 0.02, 1.0)


def _inverted(rng: np.random.Generator, k: int) -> np.ndarray:
    return _aligned(rng, k)[::-1]


def _random(rng: np.random.Generator, k: int) -> np.ndarray:
    return rng.uniform(0.05, 0.9, k)


def _dominant(rng: np.random.Generator, k: int) -> np.ndarray:
    values = rng.uniform(0.02, 0.05, k)
    values[rng.integers(k)] = 0.9
    return values


def _ignored(rng: np.random.Generator, k: int) -> np.ndarray:
    return np.zeros(k)


def _aligned_sparse(rng: np.random.Generator, k: int) -> np.ndarray:
    values = np.zeros(k)
    values[0] = 0.9
    return values


def _buried_sparse(rng: np.random.Generator, k: int) -> np.ndarray:
    values = np.zeros(k)
    values[rng.integers(k // 2, k)] = 0.9  # retrieval rank in the lower half
    return values


#: positional scenario: share of the answer each slot supplies, counted from the question backwards
POSITION_WEIGHTS = (0.5, 0.25, 0.15)


def _positional(rng: np.random.Generator, k: int) -> np.ndarray:
    """Drop-one influence in retrieval order when slot j from the end supplies POSITION_WEIGHTS[j]:
    dropping the passage in that slot shifts every farther passage one slot closer."""
    w = np.zeros(k)
    w[: min(k, len(POSITION_WEIGHTS))] = POSITION_WEIGHTS[:k]
    from_end = np.cumsum(w[::-1])[::-1]  # from_end[j] = Σ weights of slots j, j + 1, ... from the end
    return from_end[::-1]  # retrieval rank r sits in slot k - r from the end


SCENARIOS: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "aligned": _aligned, "inverted": _inverted, "random": _random, "dominant": _dominant, "ignored": _ignored,
    "aligned_sparse": _aligned_sparse, "buried_sparse": _buried_sparse, "positional": _positional,
}
#: what ``mixed`` draws from (the seed's five)
MIXED = ("aligned", "inverted", "random", "dominant", "ignored")
CHOICES = (*SCENARIOS, "mixed")


def design(n_questions: int, k: int, scenario: str, seed: int) -> dict[str, Any]:
    """The design of a simulated run: per question its scenario, passages, influence and slots."""
    if scenario not in CHOICES:
        raise InputError(f"--scenario: unknown '{scenario}'; valid: {', '.join(CHOICES)}")
    if n_questions < 1 or k < 2:
        raise InputError(f"simulation needs --questions >= 1 and --k >= 2, got {n_questions} and {k}")
    rng = np.random.default_rng(seed)
    questions = {}
    for n in range(n_questions):
        name = scenario if scenario != "mixed" else str(rng.choice(list(MIXED)))
        qid = f"sim{n:04d}"
        if name == "positional":
            questions[qid] = _positional_question(rng, k)
            continue
        slots_per = np.rint(SCENARIOS[name](rng, k) * WIDTH).astype(int)
        questions[qid] = {
            "scenario": name,
            "passage_ids": [f"p{r}" for r in range(1, k + 1)],  # p1 is retrieval rank 1
            "influence": [int(m) / WIDTH for m in slots_per],
            "slots": [sorted(int(s) for s in rng.choice(WIDTH, size=int(m), replace=False)) for m in slots_per],
        }
    return {"scenario": scenario, "seed": seed, "k": k, "width": WIDTH, "questions": questions}


def _positional_question(rng: np.random.Generator, k: int) -> dict[str, Any]:
    """A positional question: answer words owned by prompt slots (from the end), not by passages."""
    sizes = [int(round(w * WIDTH)) for w in POSITION_WEIGHTS[:k]]
    words = [int(s) for s in rng.permutation(WIDTH)]
    owned, at = [], 0
    for m in sizes:
        owned.append(sorted(words[at : at + m]))
        at += m
    return {
        "scenario": "positional",
        "passage_ids": [f"p{r}" for r in range(1, k + 1)],
        "influence": [int(round(v * WIDTH)) / WIDTH for v in _positional(rng, k)],  # in retrieval order
        "slots": [[] for _ in range(k)],
        "position_slots": owned,  # position_slots[j]: words the passage j slots from the end supplies
    }


_FILLER = ("This simulated passage stands in for retrieved evidence; its influence on the answer "
           "was drawn from the {scenario} scenario.")


def _rows(plan: dict[str, Any]) -> list[dict[str, Any]]:
    baseline = " ".join(f"w{i}" for i in range(plan["width"]))
    rows = []
    for qid, q in plan["questions"].items():
        n = len(q["passage_ids"])
        rows.append({
            "id": qid,
            "question": f"Simulated question {qid}: which passages does the answer use?",
            "answers": [baseline],
            "passages": [{"id": f"{qid}-{pid}", "title": f"{qid} {pid}",
                          "text": f"Simulated passage {qid}/{pid}: " + _FILLER.format(scenario=q["scenario"]),
                          "score": round(1.0 - r / n, 6)}
                         for r, pid in enumerate(q["passage_ids"])],
        })
    return rows


def simulation_config(out: Path, base: ExperimentConfig | None = None) -> ExperimentConfig:
    """``base`` (defaults) pointed at the simulation's files, with the simulated backend."""
    raw = (base or ExperimentConfig()).model_dump(mode="json")
    values = {
        "data.path": str(out / "simulation.jsonl"), "data.format": "auto", "data.limit": None,
        "chunking.method": "none", "retrieval.retriever": "given", "retrieval.scope": "per_question",
        "retrieval.expand.window": 0, "rerank.strategy": "none",
        "generation.backend": "simulated", "generation.model": str(out / "simulation.json"),
        "influence.similarity": "rouge_l",
        "metrics.embedding": False, "execution.executor": "local", "cache.retrievals": False,
    }
    if raw["influence"]["mode"] in ("auto", "interactions"):  # the design is of drop-one influence
        values["influence.mode"] = "logprob_share"
    return validate_config(apply_overrides(raw, (), values))


def simulate(out: str | Path, *, n_questions: int = 50, k: int = 10, scenario: str = "mixed", seed: int = 0,
             base: ExperimentConfig | None = None, progress: bool = True) -> RunResult:
    """Write the design and dataset into ``out``, run the influence loop on them, mark the run."""

    plan = design(n_questions, k, scenario, seed)
    out = Path(out)
    if (out / "summary.json").exists() or (out / "progress.jsonl").exists():
        raise InputError(f"{out} already holds a run; choose a new --out")
    prepare_run_dir(out)
    (out / "simulation.json").write_text(json.dumps(plan, indent=1) + "\n", encoding="utf-8")
    with open(out / "simulation.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(row) + "\n" for row in _rows(plan))
    config = simulation_config(out.resolve(), base)
    config = config.model_copy(update={"name": f"simulated-{scenario}"})
    return run_influence(config, out, progress=progress)
