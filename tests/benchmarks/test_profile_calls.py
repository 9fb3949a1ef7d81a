"""benchmarks/profile_calls.py (the per-call profile and fair A/B of two trees on a GPU): it forgets
the KV a generate call carried over in either tree's layout, and on CPU (tiny shape) it writes every
run and each model call's profile, so it does not rot between GPU sessions."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.profile_calls import counted_ops, drop_carried  # noqa: E402


def test_operators_are_counted_by_name():
    torch = pytest.importorskip("torch")
    with counted_ops(torch) as ops:
        (torch.ones(3) + 1).sum()
    assert ops["aten.ones"] == ops["aten.add"] == ops["aten.sum"] == 1


def test_carried_kv_is_dropped_in_both_trees_layouts():
    head = SimpleNamespace(_engine=SimpleNamespace(prefill=SimpleNamespace(_carried=[([1, 2], ())])))
    drop_carried(head)
    assert head._engine.prefill._carried == []
    base = SimpleNamespace(_batched=SimpleNamespace(_carried=[([1, 2], ())]))  # 75290db: on the generator
    drop_carried(base)
    assert base._batched._carried == []
    drop_carried(SimpleNamespace(_engine=SimpleNamespace(), _batched=None))  # the cpu engine: nothing carried


def test_a_real_gpu_engines_carried_kv_is_dropped():
    """On the gpu engine a generate-style prefill (hold) carries its KV; drop_carried forgets it."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests.generation.contract import tiny_gpu_generator

    gen = tiny_gpu_generator()
    seqs = {0: list(range(3, 40)), 1: list(range(3, 30)) + [99, 98]}
    with torch.inference_mode():
        gen.engine.prefill.run(seqs, {0: 0, 1: 26}, dict.fromkeys(seqs, 1), lambda *_: None, hold=True)
    assert len(gen.engine.prefill._carried) == 2
    drop_carried(gen)
    assert gen.engine.prefill._carried == []


@pytest.mark.slow
def test_tiny_shape_on_cpu_writes_every_run_and_call(tmp_path):
    pytest.importorskip("torch")
    from benchmarks.profile_calls import main

    out = tmp_path / "calls.json"
    main(["--shape", "tiny", "--questions", "2", "--repeats", "2", "--out", str(out)])
    result = json.loads(out.read_text())
    assert [r["run"] for r in result["runs"]] == ["warm-up", "measured 1", "measured 2", "profiled"]
    measured = result["runs"][1]
    assert measured["calls"] == 22 and measured["calls_per_s"] > 0
    assert set(measured["model_seconds"]) == {"generate", "logprobs"}
    calls = {c["call"] for c in result["calls"]}
    assert calls == {"generate", "logprobs"}  # only the profiled run's calls
    assert all(c["top_shapes"] and c["top_shapes"][0][0] == "aten::mm" for c in result["calls"])


@pytest.mark.slow
def test_a_counted_run_of_the_gpu_engine_on_cpu(tmp_path):
    """--count-ops --strategy gpu --layers 3: the gpu engine (at the 8B run's pass size) with each
    model call's operators counted, per operator."""
    pytest.importorskip("torch")
    from benchmarks.profile_calls import main

    out = tmp_path / "ops.json"
    main(["--shape", "tiny", "--questions", "2", "--repeats", "0", "--no-profile", "--count-ops",
          "--strategy", "gpu", "--layers", "3", "--out", str(out)])
    result = json.loads(out.read_text())
    assert [r["run"] for r in result["runs"]] == ["warm-up", "counted"]
    assert result["runs"][-1]["backend_settings"]["strategy"] == "gpu"
    assert result["calls"] == [] and {c["call"] for c in result["counted_calls"]} == {"generate", "logprobs"}
    assert all(c["ops"] == sum(c["by_op"].values()) > 0 for c in result["counted_calls"])
    assert all(c["by_op"]["aten.rsqrt"] % (2 * 3 + 1) == 0 for c in result["counted_calls"])  # 2 norms a layer + the last
