"""README's `ragray run --executor ray` as a user types it: in-process Ray, the packaged models, no
resource setting (at `execution.num_cpus: null` this once died with a NameError: every other test
pinned a value)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)
def test_run_executor_ray_at_pure_defaults(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, "-m", "ragray.adapters.cli", "run", "--executor", "ray", "--limit", "1",
                           "--no-progress", "--out", str(tmp_path / "run")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=850, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_measured"] == 1 and "smollm2" in summary["model"].lower()
    # the actor ran the model: no answer came from a call cache another run filled (conftest's $RAGRAY_CACHE)
    assert summary["cache"]["calls_hit"] == 0 and summary["cache"]["calls_miss"] > 0, summary["cache"]
    # no GPUs here: one actor, no GPU, the machine's cores; it ran the model on the CPU
    assert summary["resources"]["count"] == 1 and summary["resources"]["gpus"] == 0.0
    assert summary["resources"]["cpus"] == len(os.sched_getaffinity(0))
    (actor,) = summary["placement"]
    assert actor["device"] == "cpu" and actor["gpu_ids"] == [] and actor["settings"]["device"] == "cpu"
    assert "Ray actors: 1," in done.stdout and "device cpu, 1 questions" in done.stdout
