"""A served corpus whose answers the scripted generator takes from known passages."""

import json

import pytest

from ragray.config import load_config

DOCS = [
    ("ferry", "The night ferry to Corran leaves from pier nine. ANSWER=tern"),
    ("lighthouse", "The lighthouse on Skerry Rock was built of granite in 1871."),
    ("market", "The fish market opens at dawn on weekdays and closes at noon."),
    ("school", "The island school teaches twelve pupils in a single classroom."),
    ("harbour", "Harbour dues are paid at the office beside the ferry slipway."),
    ("birds", "Arctic terns nest on the northern cliffs every summer."),
]


@pytest.fixture()
def served_config(tmp_path, monkeypatch):
    """A config serving a six-document corpus with BM25 and the scripted generator."""
    rows = [{"id": "q1", "question": "Which ferry goes to Corran?", "answers": ["tern"],
             "passages": [{"id": pid, "text": text} for pid, text in DOCS]}]
    data = tmp_path / "island.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "small.yaml").write_text(f"name: small\ndata:\n  path: {data}\ngeneration:\n  backend: scripted\n"
                                        "metrics:\n  embedding: false\n")
    (presets / "broken.yaml").write_text("retrieval:\n  top_k: 0\n")
    monkeypatch.delenv("RAGRAY_API_KEY", raising=False)
    return load_config(None, [
        f"data.path={data}", "generation.backend=scripted", "metrics.embedding=false", "retrieval.top_k=4",
        "faithfulness.similarity=rouge_l", "faithfulness.measures=[rouge_l,exact_match]",
        "faithfulness.random_repeats=4", "faithfulness.k_values=[top-1]",
        f"serve.runs_dir={tmp_path / 'runs'}", f"serve.presets_dir={presets}", "serve.max_top_k=6",
        f"history.url=sqlite:///{tmp_path / 'history.sqlite'}",
        "serve.max_request_bytes=4096",
    ])


@pytest.fixture()
def client(served_config):
    """The API of ``served_config`` in this process (no Ray), over an in-process transport."""
    from fastapi.testclient import TestClient

    from ragray.adapters.serving.local import local_app

    with TestClient(local_app(served_config), raise_server_exceptions=False) as c:
        yield c
