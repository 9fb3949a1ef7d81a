"""Sweeps on real Ray Tune with the scripted generator: order, failures, resume, leaderboard files.

The dataset is built so BM25 ranks a distractor above the passage holding the answer: top_k=1
answers wrongly, top_k>=2 rightly, so the leaderboard's order is known in advance.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

ray = pytest.importorskip("ray")

from ragray.pipeline import run_influence  # noqa: E402
from ragray.config import load_config  # noqa: E402
from ragray.adapters.sweep.runner import run_sweep  # noqa: E402
from ragray.adapters.sweep.score import score_trial  # noqa: E402

pytestmark = pytest.mark.ray

BIRDS = ["tern", "puffin", "gannet"]
ROWS = [
    {"id": f"q{i}", "question": f"Which bird nests on the cliffs of Skerry {i}?", "answers": [bird],
     "gold_passage_ids": [f"q{i}-gold"],
     "passages": [
         {"id": f"q{i}-noise", "text": f"Which bird nests on the cliffs of Skerry {i}? The cliffs of Skerry {i} "
                                        "are high and many a bird nests there."},
         {"id": f"q{i}-gold", "text": f"The {bird} breeds near Skerry {i}. ANSWER={bird}"},
         {"id": f"q{i}-far", "text": "The harbour office opens at nine."},
     ]}
    for i, bird in enumerate(BIRDS)
]


@pytest.fixture(scope="module")
def ray_session(start_ray):
    start_ray("/tmp/rg-sweep")
    yield
    ray.shutdown()


@pytest.fixture()
def spec(tmp_path):
    data = tmp_path / "birds.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")

    def write(extra=""):
        path = tmp_path / "spec.yaml"
        path.write_text(f"""
name: birds
set: [data.path={data}, generation.backend=scripted, metrics.embedding=false]
retrieval:
  top_k: [1, 2, 3]
generation:
  template: [numbered, plain]
execution: {{cpus_per_trial: 0.5, concurrency: 2}}
{extra}""")
        return path
    return write


def tensorboard_tags(logdir, timeout=120.0, runs=6, series=None):
    """Start the installed ``tensorboard`` on ``logdir`` (a free loopback port), and return what
    its HTTP API lists: run -> scalar tags, once ``runs`` runs have some; with ``series`` (a tag),
    run -> that tag's points as (step, value) instead."""
    import shutil
    import socket
    import urllib.parse
    import urllib.request

    exe = shutil.which("tensorboard")
    assert exe, "tensorboard is not installed (it comes with ragray[ray])"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([exe, "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, tags = time.monotonic() + timeout, {}
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/scalars/tags", timeout=5) as r:
                    tags = json.loads(r.read())
                if len(tags) >= runs and all(tags.values()):
                    if series is None:
                        return tags
                    points = {}
                    for run in tags:
                        query = urllib.parse.urlencode({"run": run, "tag": series})
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?{query}",
                                                    timeout=5) as r:
                            points[run] = [(step, value) for _, step, value in json.loads(r.read())]
                    return points
            except OSError:
                pass
            time.sleep(1)
        return tags
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.timeout(600)
def test_leaderboard_follows_the_documented_score(ray_session, spec, tmp_path):
    result = run_sweep(spec(), tmp_path / "out", verbose=0)
    rows = result.rows
    assert len(rows) == 6 and {r["status"] for r in rows} == {"done"}
    # top_k=1 retrieves the distractor only: wrong answers, so those two trials rank last
    assert {r["label"].split()[0] for r in rows[-2:]} == {"retrieval.top_k=1"}
    assert all(r["f1"] == 1.0 for r in rows[:4]) and all(r["f1"] == 0.0 for r in rows[-2:])
    # the order is exactly: score desc, then tokens per question asc, then latency asc
    keys = [(-round(r["score"], 9), r["tokens_per_question"], r["latency_s"]) for r in rows]
    assert keys == sorted(keys) and [r["rank"] for r in rows] == [1, 2, 3, 4, 5, 6]
    # and each score is recomputed from the trial's own per-question metrics
    weights = {"f1": 1, "em": 1, "answer_similarity": 1, "mrr": 1, "recall_at_k": 1}
    for r in rows:
        per_q = json.loads((result.out / "trials" / r["trial_id"] / "trial.json").read_text())["questions"]
        assert r["score"] == pytest.approx(score_trial(per_q, weights)["score"])
    # among the equally scored top_k=2/3 trials, top_k=2 is cheaper (fewer passages -> tokens)
    assert rows[0]["label"].startswith("retrieval.top_k=2")
    # three questions decide nothing: the order is the measured one, and the sweep says so
    decision = json.loads((result.out / "summary.json").read_text())["decision"]
    assert (decision["state"], decision["n_questions"], decision["min_questions"]) == ("undecided", 3, 6)
    assert result.decision == decision and all(r["beaten"] is None for r in rows[1:])
    assert [r["vs_best"] for r in rows[-2:]] == [pytest.approx(-rows[0]["overall"] + r["overall"]) for r in rows[-2:]]
    assert "not decided: 3 questions in common" in (result.out / "leaderboard.md").read_text()
    for name in ("leaderboard.parquet", "leaderboard.csv", "leaderboard.md", "leaderboard.html", "best_config.yaml"):
        assert (result.out / name).is_file(), name
    assert len(pq.read_table(result.out / "leaderboard.parquet")) == 6
    assert "| 1 | retrieval.top_k=2" in (result.out / "leaderboard.md").read_text()
    # Tune's own results live in the storage path (TensorBoard / dashboard readable)
    assert any((result.out / "tune").rglob("result.json"))
    assert len(list((result.out / "tune").rglob("events.out.tfevents.*"))) == 6  # one TensorBoard log per trial
    # ... and the README's `tensorboard --logdir <sweep>/tune` shows each trial's metrics
    tags = tensorboard_tags(result.out / "tune")
    assert len(tags) == 6 and all({"ray/tune/f1", "ray/tune/n_questions"} <= set(run_tags) for run_tags in tags.values())
    # the exported best config re-runs with `ragray run` to the same answers
    again = run_influence(load_config(result.out / "best_config.yaml"), tmp_path / "again", progress=False)
    best = json.loads((result.out / "trials" / rows[0]["trial_id"] / "trial.json").read_text())["summary"]
    assert again.summary.quality.f1 == best["f1"] and again.summary.n_questions == best["n_questions"]


@pytest.mark.timeout(600)
def test_a_failing_trial_is_reported_and_the_sweep_goes_on(ray_session, spec, tmp_path):
    path = spec("variants:\n  - {name: ok}\n  - {name: broken, set: {retrieval.retriever: dense, "
                "retrieval.dense.model: /nonexistent/encoder}}\nsearch: {max_trials: 3, strategy: random, seed: 3}\n")
    result = run_sweep(path, tmp_path / "out", verbose=0)
    failed = [r for r in result.rows if r["status"] == "failed"]
    done = [r for r in result.rows if r["status"] == "done"]
    assert failed and done and len(failed) + len(done) == 3
    assert all(r["label"].startswith("broken") and "nonexistent" in r["error"] for r in failed)
    assert all(r["rank"] is None for r in failed) and result.rows[-len(failed):] == failed
    summary = json.loads((result.out / "summary.json").read_text())
    assert summary["n_failed"] == len(failed) and summary["best"]["trial_id"] == done[0]["trial_id"]


@pytest.mark.timeout(900)
def test_an_interrupted_sweep_resumes(ray_session, spec, tmp_path):
    """Kill a sweep after its first trial finished; --resume completes it without redoing work."""
    path = spec("execution: {cpus_per_trial: 0.5, concurrency: 1}\n")
    out = tmp_path / "out"
    code = ("import ray; from ragray.adapters.sweep.runner import run_sweep; "
            "ray.init(address='local', num_cpus=2, include_dashboard=False, _temp_dir='/tmp/rg-sweep2'); "
            f"run_sweep({str(path)!r}, {str(out)!r}, verbose=0)")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not list(out.glob("trials/*/trial.json")):
        assert proc.poll() is None and time.time() < deadline, "the sweep ended before it could be interrupted"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("trials/*/trial.json")}
    assert 1 <= len(first) < 6
    with pytest.raises(Exception, match="already holds a sweep; pass --resume"):
        run_sweep(path, out, verbose=0)
    result = run_sweep(path, out, resume=True, verbose=0)
    assert [r["status"] for r in result.rows] == ["done"] * 6
    for trial_dir in out.glob("trials/*"):
        ids = [json.loads(line)["question"]["question_id"] for line in (trial_dir / "progress.jsonl").read_text().splitlines()]
        assert sorted(ids) == ["q0", "q1", "q2"], trial_dir  # no question run twice
    for trial_id, mtime in first.items():  # trials finished before the kill were not run again
        assert (out / "trials" / trial_id / "trial.json").stat().st_mtime_ns == mtime


@pytest.mark.timeout(600)
@pytest.mark.parametrize("cleanup", [True, False])
def test_ephemeral_namespaces_hold_each_trials_per_sample_indexes(ray_session, spec, tmp_path, cleanup):
    from datetime import datetime, timedelta, timezone

    from ragray.store.history import History

    cache, url = tmp_path / "cache", f"sqlite:///{tmp_path / 'h.sqlite'}"
    path = spec(f"retrieval: {{top_k: [1, 2]}}\ngeneration: {{template: plain}}\nset: [data.path={tmp_path / 'birds.jsonl'}, "
                f"generation.backend=scripted, metrics.embedding=false, cache.dir={cache}, history.url={url}]\n"
                f"ephemeral: {{namespace: birds-ns, cleanup: {str(cleanup).lower()}, ttl_s: 600}}\n")
    result = run_sweep(path, tmp_path / "out", verbose=0)
    assert [r["status"] for r in result.rows] == ["done", "done"]
    folders = {r["trial_id"]: cache / "ephemeral" / f"birds-ns_{r['trial_id']}" for r in result.rows}
    for row in result.rows:  # three questions, each its own corpus: three indexes built per trial
        assert row["cache_indexes_miss"] == 3 and row["cache_retrievals_miss"] == 3
    summary = json.loads((result.out / "summary.json").read_text())
    history = History(url)
    if cleanup:
        assert not any(f.exists() for f in folders.values())
        assert summary["ephemeral_cleanup"] == {"namespaces": 2, "expired_count": 2, "deleted_count": 2,
                                                "errors": []}
        assert history.cleanup_expired(now=datetime.now(timezone.utc) + timedelta(days=1))["expired_count"] == 0
    else:
        for folder in folders.values():  # the BM25 index files of each question, in the manifest format
            assert len(list((folder / "indexes").glob("*/manifest.json"))) == 3
        assert "ephemeral_cleanup" not in summary
        assert history.cleanup_expired()["expired_count"] == 0  # TTL not reached
        later = datetime.now(timezone.utc) + timedelta(seconds=601)
        assert history.cleanup_expired(now=later) == {"expired_count": 2, "deleted_count": 2, "errors": []}
        assert not any(f.exists() for f in folders.values())
    history.close()


def many_birds(tmp_path, n):
    """``n`` questions laid out as ROWS: top_k=1 retrieves only the distractor (F1 0)."""
    rows = [{**ROWS[i % 3], "id": f"m{i}", "gold_passage_ids": [f"m{i}-gold"],
             "passages": [{**p, "id": p["id"].replace(f"q{i % 3}-", f"m{i}-")} for p in ROWS[i % 3]["passages"]]}
            for i in range(n)]
    data = tmp_path / "many.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return data


def results_of(out, trial_id):
    """Every result a trial reported to Tune (its result.json lines)."""
    for path in (out / "tune").rglob("result.json"):
        lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        if lines and lines[0]["config"].get("trial_id") == trial_id:
            return lines
    raise LookupError(trial_id)


@pytest.mark.timeout(600)
def test_asha_stops_the_known_worst_trial_at_its_grace_period(ray_session, tmp_path):
    """top_k=1 never retrieves the passage with the answer: after the grace period its running
    score is below the others' and ASHA stops it; it is listed as stopped, with the questions it
    ran, and never ranked. The finished trials reported running step metrics every 10 questions."""
    n = 200
    path = tmp_path / "asha.yaml"
    # one trial at a time, the worst last: ASHA compares each trial with those already at the rung
    path.write_text(f"""
name: asha
set: [data.path={many_birds(tmp_path, n)}, generation.backend=scripted, metrics.embedding=false]
retrieval: {{top_k: [2, 3, 1]}}
search: {{scheduler: asha, grace_questions: 10, reduction_factor: 2}}
report_every: 10
execution: {{cpus_per_trial: 1, concurrency: 1}}
""")
    result = run_sweep(path, tmp_path / "out", verbose=0)
    by_label = {r["label"]: r for r in result.rows}
    worst = by_label["retrieval.top_k=1"]
    assert worst["status"] == "stopped" and worst["rank"] is None
    assert 10 <= worst["n_questions"] < n  # stopped at (or shortly after) the first rung, not run to the end
    ran = (result.out / "trials" / worst["trial_id"] / "progress.jsonl").read_text().splitlines()
    assert len(ran) < n and not (result.out / "trials" / worst["trial_id"] / "trial.json").exists()
    assert [by_label[f"retrieval.top_k={k}"]["status"] for k in (2, 3)] == ["done", "done"]
    assert result.best["label"] in ("retrieval.top_k=2", "retrieval.top_k=3") and result.best["n_questions"] == n
    summary = json.loads((result.out / "summary.json").read_text())
    assert (summary["n_done"], summary["n_stopped"], summary["n_failed"]) == (2, 1, 0)
    assert summary["questions_run"] == 2 * n + worst["n_questions"]
    # running step metrics: questions 10, 20, ..., 200, then the final report
    steps = results_of(result.out, result.best["trial_id"])
    assert [s["questions"] for s in steps[:-1]] == list(range(10, n + 1, 10)) and steps[-1]["finished"] == 1.0
    assert all(s["overall_low"] <= s["overall"] <= s["overall_high"] and s["f1"] == 1.0 for s in steps[1:-1])
    assert steps[-1]["score"] == pytest.approx(result.best["score"])  # the last report is the leaderboard's
    worst_steps = results_of(result.out, worst["trial_id"])
    assert worst_steps[0]["questions"] == 10 and worst_steps[0]["f1"] == 0.0
    assert worst_steps[0]["score"] < steps[0]["score"]
    assert "finished" not in worst_steps[-1]  # it never sent its final report
    # TensorBoard draws each trial's running score as a curve: one point per report
    curves = tensorboard_tags(result.out / "tune", runs=3, series="ray/tune/score")
    assert sorted(len(points) for points in curves.values()) == sorted(
        [len(results_of(result.out, r["trial_id"])) for r in result.rows])
    assert max(len(points) for points in curves.values()) == n // 10 + 1


@pytest.mark.timeout(600)
def test_optuna_proposes_max_trials_from_the_spec_axes(ray_session, spec, tmp_path):
    """search.strategy optuna (seeded TPE over the grid's axes): max_trials Tune trials, each a
    point of the spec; a point proposed twice runs once; the leaderboard lists what ran."""
    pytest.importorskip("optuna")
    path = spec("search: {strategy: optuna, max_trials: 4, seed: 3}\n")
    result = run_sweep(path, tmp_path / "out", verbose=0)
    tune_trials = list((result.out / "tune").rglob("result.json"))
    assert len(tune_trials) == 4
    labels = [r["label"] for r in result.rows]
    assert 1 <= len(labels) <= 4 and len(set(labels)) == len(labels)
    assert {r["status"] for r in result.rows} == {"done"}
    all_points = {f"retrieval.top_k={k} generation.template={t}" for k in (1, 2, 3) for t in ("numbered", "plain")}
    assert set(labels) <= all_points
    scores = [r["score"] for r in result.rows]
    assert scores == sorted(scores, reverse=True)
    summary = json.loads((result.out / "summary.json").read_text())
    assert summary["search"]["strategy"] == "optuna" and summary["n_trials"] == len(labels)


def test_optuna_needs_max_trials(tmp_path):
    from ragray.errors import ConfigError
    from ragray.adapters.sweep.spec import load_spec

    path = tmp_path / "s.yaml"
    path.write_text("name: s\nretrieval: {top_k: [1, 2]}\nsearch: {strategy: optuna}\n")
    with pytest.raises(ConfigError, match="optuna needs max_trials"):
        load_spec(path)
