"""benchmarks/faiss_gpu_smoke.py, the faiss-gpu check of gpu_bench.sh: on this machine's faiss-cpu
it says so and exits 0; with a faiss that looks GPU-capable (its GPU copy is the CPU index itself:
the orchestration, not CUDA, is what runs here) it goes through ragray's dense index on ``cuda:0``
and compares the hits, and an index that stays on the CPU fails it."""

from __future__ import annotations

import json
import types

import pytest

faiss = pytest.importorskip("faiss")

from benchmarks import faiss_gpu_smoke  # noqa: E402


def test_faiss_cpu_is_reported_not_failed(tmp_path):
    out = tmp_path / "faiss.json"
    assert faiss_gpu_smoke.main(["--out", str(out), "--passages", "200", "--queries", "5"]) == 0
    got = json.loads(out.read_text())
    assert got["state"] == "faiss built without GPU support (faiss-cpu)" and "placed_on_gpu" not in got


def _gpu_looking_faiss() -> types.SimpleNamespace:
    """faiss-cpu dressed as a GPU build: one device, and its GPU copy of an index is the index."""
    fake = types.SimpleNamespace(**{name: getattr(faiss, name) for name in dir(faiss) if not name.startswith("__")})
    fake.__version__ = faiss.__version__
    fake.StandardGpuResources = lambda: object()
    fake.get_num_gpus = lambda: 1
    fake.index_cpu_to_gpu = lambda resources, gpu, index: index
    return fake


@pytest.mark.parametrize("moves", [True, False])
def test_a_gpu_faiss_is_compared_with_the_cpu_index_through_ragray(tmp_path, monkeypatch, moves):
    """``moves`` False: the smoke sees a GPU build but ragray's index stays on the CPU: it must fail."""
    import sys

    from ragray.retrieval import dense

    fake = _gpu_looking_faiss()
    monkeypatch.setitem(sys.modules, "faiss", fake)
    monkeypatch.setattr(dense, "_faiss", lambda: fake if moves else faiss)
    out = tmp_path / "faiss.json"
    code = faiss_gpu_smoke.main(["--out", str(out), "--passages", "300", "--queries", "8"])
    got = json.loads(out.read_text())
    assert got["state"] == "gpu"
    if moves:
        assert code == 0 and got["placed_on_gpu"] and got["queries_same_set"] == got["queries_same_hits"] == 8
        assert got["max_score_difference"] == 0.0
    else:
        assert code == 1 and got["placed_on_gpu"] is False
