"""benchmarks/bench_gpu.py on the tiny shape on CPU (the GPU run is one call of a lent machine: the
script must not rot between them): every phase writes its numbers, and the gpu strategy's forward
passes per question fall with questions in flight; the ragray phases measure the naive loops' work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

pytest.importorskip("torch")


def test_the_wrapper_parses():
    assert subprocess.run(["bash", "-n", str(REPO / "benchmarks" / "gpu_bench.sh")]).returncode == 0


@pytest.mark.slow
def test_tiny_shape_on_cpu_writes_every_phase(tmp_path):
    from benchmarks.bench_gpu import main

    out = tmp_path / "gpu_tiny.json"
    assert main(["--shape", "tiny", "--questions", "2", "--in-flight", "1,2", "--deadline", "300",
                 "--variants", "other_strategy,eager_decode", "--profile", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["device"] == "cpu" and result["machine"]["commit"]
    assert result["ragray"]["questions"] == 2 and result["ragray"]["calls"] == 22
    # the record's measure (log-prob: the naive loops' work); the default measure as its own phase,
    # counted in contexts (2(k + 1) a question: full, empty, each passage left out and kept alone)
    # (log-prob scores 12 contexts a question: full, each passage left out, and the empty one)
    assert result["ragray"]["influence_mode"] == "logprob_share" and result["ragray"]["contexts"] == 2 * 12
    default = result["ragray_default_measure"]
    assert default["influence_mode"] == "interactions" and default["contexts"] == 2 * 22
    assert default["calls"] == 22 and default["seconds_per_question"] > 0
    assert result["ragray"]["backend_settings"]["strategy"] == "cpu"  # auto on a CPU
    assert result["ragray_other_strategy"]["backend_settings"]["strategy"] == "gpu"
    assert result["ragray_eager_decode"]["settings"] == {"static_decode": False}
    assert result["ragray"]["model_seconds"]["logprobs"]["calls"] >= 1  # where the time went
    assert result["profile"]["calls"] == 22 and result["profile"]["top_host_ops"]
    for loop in ("naive_logprob", "naive_lean", "seed_loop"):
        assert result[loop]["calls_per_s"] > 0
    assert result["bound"]["prefill"]["tokens_per_s"] > 0 and result["x_naive_logprob"] > 0
    flight = result["in_flight"]
    assert flight["2"]["engine"]["forward_passes_per_question"] < flight["1"]["engine"]["forward_passes_per_question"]
