"""The Ray Data executor gives the local executor's results (real in-process Ray)."""

import json

import pyarrow.parquet as pq
import pytest

ray = pytest.importorskip("ray")

from ragray.generation.engine_counts import ENGINE_COUNTS
from ragray.pipeline import run_influence, run_interpret  # noqa: E402
from ragray.config import load_config  # noqa: E402

pytestmark = pytest.mark.ray

ROWS = [
    {"id": f"q{i}", "question": f"Which ferry number {i}?", "answers": ["tern"],
     "passages": [{"id": f"q{i}-p{j}", "text": f"Passage {j} of question {i}."
                   + (" ANSWER=tern" if j == i % 4 else "")} for j in range(4)]}
    for i in range(6)
]


@pytest.fixture(scope="module")
def ray_session(start_ray):
    """One in-process Ray for this module, shut down after it (the vLLM tests run later)."""
    start_ray("/tmp/rg-ray")
    yield
    ray.shutdown()


@pytest.fixture()
def dataset(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return path


def stable(out, name):
    # engine counts measure the work done, which the call cache changes (an actor's calls may be hits)
    return [{k: v for k, v in r.items() if k not in ("seconds", "latency_s", *ENGINE_COUNTS)}
            for r in pq.read_table(out / f"{name}.parquet").to_pylist()]


@pytest.mark.timeout(600)
def test_run_on_ray_equals_local_and_resumes(ray_session, dataset, tmp_path):
    base = [f"data.path={dataset}", "generation.backend=scripted", "metrics.embedding=false"]
    local = run_influence(load_config(None, base), tmp_path / "local", progress=False)
    cfg = load_config(None, [*base, "execution.executor=ray", "execution.actors=2", "execution.num_cpus=0.5"])
    remote = run_influence(cfg, tmp_path / "ray", progress=False)
    for name in ("questions", "passages", "calls"):
        assert stable(remote.out, name) == stable(local.out, name)
    assert remote.summary.model == local.summary.model == "scripted"
    # a resumed Ray run only sends the questions the log does not hold
    log = (tmp_path / "ray" / "progress.jsonl").read_text().splitlines()
    part = tmp_path / "part"
    part.mkdir()
    (part / "progress.jsonl").write_text("\n".join(log[:2]) + "\n")
    (part / "config.yaml").write_text((tmp_path / "ray" / "config.yaml").read_text())
    resumed = run_influence(cfg, part, resume=True, progress=False)
    assert resumed.n_resumed == 2
    assert stable(resumed.out, "questions") == stable(local.out, "questions")


@pytest.mark.timeout(600)
def test_ray_actors_take_batches_of_questions_in_flight(ray_session, dataset, tmp_path):
    """An actor gets ``max_questions_in_flight`` questions per batch and merges their engine calls;
    the tables are the local executor's."""
    base = [f"data.path={dataset}", "generation.backend=scripted", "metrics.embedding=false"]
    local = run_influence(load_config(None, base), tmp_path / "local", progress=False)
    cfg = load_config(None, [*base, "execution.executor=ray", "execution.actors=1", "execution.num_cpus=0.5",
                             "execution.max_questions_in_flight=3"])
    remote = run_influence(cfg, tmp_path / "ray", progress=False)
    for name in ("questions", "passages", "calls"):
        assert stable(remote.out, name) == stable(local.out, name)


@pytest.mark.timeout(600)
def test_ray_actors_report_their_call_cache(ray_session, dataset, tmp_path):
    """The actors' call-cache hits and misses reach summary.json: a rerun against the endpoint is
    all hits and sends nothing."""
    from ragray.loopback import LoopbackServer

    with LoopbackServer(latency=0.01, limit=16) as server:
        cfg = load_config(None, [
            f"data.path={dataset}", "generation.backend=openai", f"generation.openai.base_url={server.base_url}",
            "generation.model=loopback", "influence.mode=loo", "metrics.embedding=false",
            "execution.executor=ray", "execution.num_cpus=0.5", f"cache.dir={tmp_path / 'c'}"])
        first = run_influence(cfg, tmp_path / "a", progress=False)
        sent = server.stats.answered
        again = run_influence(cfg, tmp_path / "b", progress=False)
        assert server.stats.answered == sent > 0
    assert first.summary.cache["calls_miss"] == sent and first.summary.cache["calls_hit"] == 0
    assert again.summary.cache["calls_hit"] == sent and again.summary.cache["calls_miss"] == 0


@pytest.mark.timeout(600)
def test_interpret_on_ray_equals_local(ray_session, dataset, tmp_path):
    base = [f"data.path={dataset}", "generation.backend=scripted", "faithfulness.similarity=rouge_l",
            "faithfulness.measures=[rouge_l,exact_match]", "faithfulness.k_values=[top-1]",
            "faithfulness.random_repeats=3"]
    local = run_interpret(load_config(None, base), tmp_path / "local", progress=False)
    remote = run_interpret(load_config(None, [*base, "execution.executor=ray", "execution.num_cpus=0.5"]),
                           tmp_path / "ray", progress=False)
    for name in ("questions", "units", "arms", "cases"):
        assert stable(remote.out, name) == stable(local.out, name)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_real_model_on_ray_equals_local(ray_session, tmp_path):
    """SmolLM2 in a Ray Data actor answers exactly as in this process (same seed, fp32 greedy)."""
    base = ["data.path=demo", "data.limit=2", "retrieval.top_k=3", "generation.max_tokens=16",
            "metrics.embedding=false"]
    local = run_influence(load_config(None, base), tmp_path / "local", progress=False)
    remote = run_influence(load_config(None, [*base, "execution.executor=ray", "execution.num_cpus=1"]),
                           tmp_path / "ray", progress=False)
    assert remote.summary.model == local.summary.model == "smollm2"
    # the actor ran the model: nothing came from a call cache another test filled (conftest's $RAGRAY_CACHE)
    assert remote.summary.cache["calls_hit"] == 0 and remote.summary.cache["calls_miss"] > 0, remote.summary.cache
    for name in ("questions", "passages", "calls"):
        # the same answers and verdicts; the raw log-prob columns to float noise: the actor runs
        # torch on its one CPU, this process on two, and the reduction order follows the thread
        # count (seen on a 2-core AVX2 EPYC: 1e-5 nats in logprob_drop; the clipped influence equal)
        for got, want in zip(stable(remote.out, name), stable(local.out, name), strict=True):
            # a passage whose credit sits on its question's used bar may fall either side of it by
            # that float noise: its mark is compared only off the bar
            bars = {q["question_id"]: q["used_bar"] for q in stable(local.out, "questions")}
            near = name == "passages" and abs(want["credit"] - bars[want["question_id"]]) < 1e-3
            if near:
                got, want = {**got, "used": None}, {**want, "used": None}
            assert got == pytest.approx(want, rel=1e-4, abs=1e-4), name
    calls = stable(remote.out, "calls")  # influence.mode auto: each actor's model scores, so interactions
    assert len(calls) == 2 * 4 and all(c["answer"] for c in calls if c["arm"] == "baseline")
    assert {q["influence_mode"] for q in stable(remote.out, "questions")} == {"interactions"}


@pytest.mark.timeout(600)
def test_ray_actors_heal_a_damaged_call_cache(ray_session, dataset, tmp_path):
    """The cache file is not SQLite when the actors open it: the run completes with no error and the
    tables of an uncached run, and the file is set aside once."""
    from ragray.loopback import LoopbackServer

    cache = tmp_path / "c"
    cache.mkdir()
    (cache / "calls.sqlite").write_text("not a database\n" * 500)
    with LoopbackServer(latency=0.01, limit=16) as server:
        base = [f"data.path={dataset}", "generation.backend=openai", f"generation.openai.base_url={server.base_url}",
                "generation.model=loopback", "influence.mode=loo", "metrics.embedding=false",
                "execution.executor=ray", "execution.actors=2", "execution.num_cpus=0.5",
                "execution.max_questions_in_flight=2", f"cache.dir={cache}"]
        healed = run_influence(load_config(None, base), tmp_path / "a", progress=False)
        plain = run_influence(load_config(None, [*base, "cache.calls=false"]), tmp_path / "b", progress=False)
    assert healed.summary.errors == 0
    for name in ("questions", "passages", "calls"):
        assert stable(healed.out, name) == stable(plain.out, name)
    moved = [p for p in cache.glob("calls.sqlite.corrupt-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(moved) == 1


def test_a_worker_keeps_to_the_cpus_ray_reserved_for_it(ray_session):
    """Whole reserved CPUs are a worker's threads; a fraction, a driver or no reservation is none."""
    from ragray.adapters.execution.ray_runtime import reserved_cpus

    @ray.remote
    def reserved():
        return reserved_cpus()

    assert ray.get(reserved.options(num_cpus=2).remote()) == 2
    assert ray.get(reserved.options(num_cpus=1).remote()) == 1
    assert ray.get(reserved.options(num_cpus=0.5).remote()) is None
    assert reserved_cpus() is None  # this test's process is Ray's driver


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_packaged_model_in_a_one_cpu_worker_runs_one_thread(ray_session):
    """Two one-CPU sweep trials on a 2-core node each ran SmolLM2 on every core (4 threads on 2
    cores); the model now takes the worker's reservation, and a Serve-style fraction still gets
    every core."""
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 cores to tell one thread from every core")

    @ray.remote
    def threads():
        import torch

        from ragray.config import load_config
        from ragray.generation import build_generator

        gen = build_generator(load_config(None, ["generation.dtype=float32"]).generation)
        try:
            return torch.get_num_threads()
        finally:
            gen.close()

    assert ray.get(threads.options(num_cpus=1).remote()) == 1
    assert ray.get(threads.options(num_cpus=0.5).remote()) == len(os.sched_getaffinity(0))
