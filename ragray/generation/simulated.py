"""The generator of simulation mode (``generation.backend: simulated``): answers by design, no model.

``generation.model`` is the path of a design file written by :mod:`ragray.simulate`. For every
simulated question it holds the baseline answer's width W (words ``w0 … w{W-1}``) and, per
passage, the *slots* that passage supports. A prompt's answer is the baseline with every slot of
every passage **absent** from the prompt replaced (``x{slot}``): dropping a passage that owns
``m`` slots leaves ``W − m`` words of the baseline in order, so ROUGE-L F1 = (W − m)/W and the
measured drop-one influence is exactly ``m / W`` — the designed value. Removing several passages
removes the union of their slots, so deletion curves behave sensibly too.

A *positional* question (scenario ``positional``) owns its words by prompt slot instead: the words
of slot j (counted back from the question) name the passage that stands there, so dropping any
passage changes the words of its slot and of every farther slot (they shift one closer) — the
answer follows the slot, whatever the order of the passages.

Questions and passages are recognised in the prompt by their texts, which the simulation writes
as ``Simulated question <qid>: …`` and ``Simulated passage <qid>/<pid>: …``. :meth:`logprobs` (log-prob
mode) gives ``log((W − mismatches)/W)``, so that influence is the same ``m / W``.
"""

from __future__ import annotations

import json
from collections import Counter
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragray.config import GenerationConfig
from ragray.errors import ConfigError
from ragray.generation.base import GENERATORS, ChatPrompt, Generation, Generator

__all__ = ["PASSAGE_PATTERN", "QUESTION_PATTERN", "SimulatedGenerator"]

QUESTION_PATTERN = re.compile(r"Simulated question ([\w.-]+):")
PASSAGE_PATTERN = re.compile(r"Simulated passage ([\w.-]+)/([\w.-]+):")


@GENERATORS.register("simulated")
class SimulatedGenerator(Generator):
    name = "simulated"
    cacheable = False  # answers by rule: nothing to save
    simulated = True

    def __init__(self, design: dict[str, Any], source: str = "simulation") -> None:
        self.width = int(design["width"])
        self.questions: dict[str, dict[str, list[int]]] = {
            qid: dict(zip(q["passage_ids"], q["slots"])) for qid, q in design["questions"].items()
        }
        self.by_position: dict[str, list[list[int]]] = {
            qid: q["position_slots"] for qid, q in design["questions"].items() if q.get("position_slots")
        }
        self.source = source

    @classmethod
    def from_config(cls, config: GenerationConfig) -> SimulatedGenerator:
        path = Path(config.model).expanduser()
        try:
            design = json.loads(path.read_text(encoding="utf-8"))
            return cls(design, str(path))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"generation.model: the simulated backend needs the design file written by "
                f"`ragray simulate` (simulation.json); could not read {path}: {exc}"
            ) from None

    @classmethod
    def simulation_marker(cls, model: str) -> dict[str, Any] | bool:
        """What ``summary.json`` says of a run on the design file ``model``: its scenario, seed,
        k, width and questions per scenario (``True`` when the design is unreadable)."""
        try:
            plan = json.loads(Path(model).read_text(encoding="utf-8"))
            return {"scenario": plan["scenario"], "seed": plan["seed"], "k": plan["k"], "width": plan["width"],
                    "questions_per_scenario": dict(Counter(q["scenario"] for q in plan["questions"].values()))}
        except (OSError, ValueError, KeyError, TypeError):
            return True

    @property
    def model_id(self) -> str:
        return "simulated"

    def _words(self, prompt: ChatPrompt) -> list[str]:
        text = prompt[-1].content
        found = QUESTION_PATTERN.search(text)
        owned = self.questions.get(found.group(1)) if found else None
        if owned is None:
            return []
        shown = [pid for qid, pid in PASSAGE_PATTERN.findall(text) if qid == found.group(1)]  # prompt order
        words = [f"w{i}" for i in range(self.width)]
        for i in {slot for pid, slots in owned.items() if pid not in shown for slot in slots}:
            words[i] = f"x{i}"
        # positional questions: the words slot j (from the end) supplies name what stands there
        for j, slots in enumerate(self.by_position.get(found.group(1), ())):
            for i in slots:
                words[i] = f"{shown[-1 - j]}x{i}" if j < len(shown) else f"x{i}"
        return words

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        out = []
        for p in prompts:
            words = self._words(p)
            n_prompt = sum(len(m.content.split()) for m in p)
            if not words:
                out.append(Generation("", n_prompt, 0, 0.0, error="simulated: no simulated question in the prompt"))
            else:
                out.append(Generation(" ".join(words), n_prompt, len(words), 0.0))
        return out

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        scores = []
        for p, answer in zip(prompts, answers):
            words, given = self._words(p), answer.split()
            same = sum(1 for a, b in zip(words, given) if a == b) if len(words) == len(given) else 0
            scores.append(math.log(max(same, 1e-9) / self.width))
        return scores
