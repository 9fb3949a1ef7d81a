import gzip
import json

import pytest

from ragray.types import Passage, Question


@pytest.fixture(scope="session")
def scifact(shared_data):
    """SciFact claims and its 5183-abstract corpus, read directly (no loader dependency)."""
    with gzip.open(shared_data / "scifact.corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        corpus = [Passage(r["id"], r["text"], r.get("title", "")) for r in map(json.loads, fh)]
    with open(shared_data / "scifact.jsonl", encoding="utf-8") as fh:
        questions = [
            Question(r["id"], r["question"], gold_passage_ids=tuple(r["gold_passage_ids"]))
            for r in map(json.loads, fh)
        ]
    return questions, corpus
