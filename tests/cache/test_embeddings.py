"""Answer-metric embeddings (issue 28): each distinct text encoded once, batched across the
questions in flight, off their turn, and read back bit for bit by a rerun."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from ragray.cache.calls import CallStore
from ragray.cache.embeddings import TextEmbeddings


class Counting:
    """A deterministic fake encoder: a text's vector depends on the text only; calls are logged."""

    model_path = None

    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[list[str]] = []
        self.delay = delay
        self.lock = threading.Lock()

    def encode(self, texts, batch_size=64, normalize=True, cache=False):
        with self.lock:
            self.calls.append(list(texts))
        time.sleep(self.delay)
        rows = [np.array([len(t), sum(map(ord, t)) % 97, 1.0], dtype=np.float32) for t in texts]
        out = np.stack(rows) if rows else np.zeros((0, 3), dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True) if normalize and rows else out


def test_each_distinct_text_is_encoded_once():
    enc = Counting()
    memo = TextEmbeddings(enc)
    a = memo.encode(["answer", "p1", "p2", "p1"])
    b = memo.encode(["question", "p1", "p2"])
    assert enc.calls == [["answer", "p1", "p2"], ["question"]]
    assert np.array_equal(a[1], b[1]) and np.array_equal(a[1], a[3])
    assert np.array_equal(a, enc.encode(["answer", "p1", "p2", "p1"]))
    assert memo.computed == 4 and memo.loaded == 0


def test_a_rerun_reads_the_file_bit_for_bit_and_loads_no_model(tmp_path):
    first = TextEmbeddings(Counting(), CallStore(tmp_path / "e.sqlite", label="embedding cache"))
    want = first.encode(["a", "bb", "ccc"])
    enc = Counting()
    again = TextEmbeddings(enc, CallStore(tmp_path / "e.sqlite", label="embedding cache"))
    got = again.encode(["ccc", "a", "bb"])
    assert enc.calls == [] and again.loaded == 3 and again.computed == 0
    assert np.array_equal(got, want[[2, 0, 1]])
    # normalize is part of the key
    again.encode(["a"], normalize=False)
    assert enc.calls == [["a"]]


def test_questions_in_flight_share_one_encoder_call():
    """Eight questions ask at once while the encoder is busy: their texts go out in far fewer
    calls than questions (one for all that queued meanwhile), each question gets its own rows."""
    enc = Counting(delay=0.2)
    memo = TextEmbeddings(enc)
    results: dict[int, np.ndarray] = {}
    go = threading.Barrier(8)

    def question(i):
        go.wait()
        results[i] = memo.encode([f"answer {i}", "shared passage", f"passage {i}"])

    threads = [threading.Thread(target=question, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(enc.calls) <= 3  # the first asker's call, then one for everyone queued meanwhile
    assert sum(len(c) for c in enc.calls) == 8 * 2 + 1  # every distinct text once
    for i, rows in results.items():
        assert np.array_equal(rows, Counting().encode([f"answer {i}", "shared passage", f"passage {i}"]))


def test_encoding_gives_the_turn_up():
    """With questions in flight the encoder runs without the turn: another question can take it
    (and send its calls) while one question's texts are being encoded."""
    from ragray.generation.scripted import ScriptedGenerator
    from ragray.pipeline.in_flight import InFlight

    flight = InFlight(type("Endpoint", (ScriptedGenerator,), {"concurrent_calls": True})(), 2)
    encoding, other_ran = threading.Event(), threading.Event()

    class Slow(Counting):
        def encode(self, texts, batch_size=64, normalize=True, cache=False):
            encoding.set()
            assert other_ran.wait(5), "the other question never got the turn"
            return super().encode(texts, batch_size, normalize, cache)

    memo = TextEmbeddings(Slow(), offload=flight.backend.aside)

    def process(i):
        if i == 0:
            return memo.encode(["needs encoding"]).shape
        encoding.wait(5)
        other_ran.set()  # this ran holding the turn
        return "ran"

    assert sorted(map(str, flight.run([0, 1], process))) == ["(1, 3)", "ran"]


@pytest.mark.slow
def test_minilm_rows_match_a_plain_encoder_call_within_a_float_tolerance(minilm):
    """Each text is encoded alone (its row is the text's, whoever else is in flight); against the
    old per-question batches the packaged MiniLM's cosines agree within 1e-6."""
    import json

    from ragray.data.loading import demo_path

    rows = [json.loads(x) for x in demo_path().read_text(encoding="utf-8").splitlines() if x.strip()][:6]
    memo = TextEmbeddings(minilm)
    worst = 0.0
    for r in rows:
        texts = [r["question"], *(p["text"] for p in r["passages"])]
        plain = minilm.encode(texts, normalize=True, cache=False)
        mine = memo.encode(texts)
        worst = max(worst, float(np.abs((plain[1:] @ plain[0]) - (mine[1:] @ mine[0])).max()))
        # each row is the text's own: what encoding it alone gives, to the bit
        assert all(np.array_equal(mine[i], minilm.encode([t], normalize=True, cache=False)[0])
                   for i, t in enumerate(texts))
    assert worst < 1e-6


@pytest.mark.slow
def test_a_rerun_with_answer_metrics_encodes_nothing_and_gives_the_same_tables(tmp_path, monkeypatch):
    """Questions in flight against an endpoint with the MiniLM answer metrics on: the run equals
    one at a time; a rerun on the same cache folder encodes no text (the model is never asked) and
    gives the same tables, embedding columns to the bit."""
    pytest.importorskip("uvicorn")
    from ragray.encoders import SentenceEncoder
    from ragray.loopback import LoopbackServer
    from ragray.pipeline import run_influence
    from tests.pipeline.test_in_flight import config, tables

    encoded: list[int] = []
    compute = SentenceEncoder._compute
    monkeypatch.setattr(SentenceEncoder, "_compute",
                        lambda self, texts, *a, **k: encoded.append(len(texts)) or compute(self, texts, *a, **k))
    with LoopbackServer(latency=0.01, limit=32) as server:
        on = ("metrics.embedding=true", "execution.max_questions_in_flight=4")
        first = run_influence(config(server, tmp_path, *on), tmp_path / "first", progress=False)
        paid, calls_first = sum(encoded), len([n for n in encoded if n])
        again = run_influence(config(server, tmp_path, *on), tmp_path / "again", progress=False)
        assert sum(encoded) == paid  # the rerun encoded nothing
        one = run_influence(config(server, tmp_path, "metrics.embedding=true", "execution.max_questions_in_flight=1",
                                   f"cache.dir={tmp_path / 'other'}"), tmp_path / "one", progress=False)
    assert paid > 0 and sum(encoded) > paid  # the first run and the one-at-a-time run encoded
    assert calls_first < 6 * 3  # fewer encoder calls than the old three per question
    assert tables(first.out) == tables(again.out) == tables(one.out)
    assert first.summary.errors == 0
    assert any(r["answer_similarity"] is not None for r in tables(first.out)["passages"])
