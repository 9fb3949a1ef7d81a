"""The Ray Data executor on a multi-node cluster (``ray.cluster_utils.Cluster``, one machine).

A head node with no CPUs (so no question runs there) and three one-CPU worker nodes: questions
spread over the workers and the tables equal the local executor's; a worker node killed mid-run
loses no question and duplicates none (its actor restarts on a surviving node and its rows are
retried).
"""

import functools
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

from ray.cluster_utils import Cluster

from ragray.config import load_config
from ragray.pipeline import influence_processor, open_question_run, run_influence, run_questions
from ragray.rows.influence import InfluenceRecord

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROWS = [
    {"id": f"q{i}", "question": f"Which ferry number {i}?", "answers": ["tern"],
     "passages": [{"id": f"q{i}-p{j}", "text": f"Passage {j} of question {i}."
                   + (" ANSWER=tern" if j == i % 4 else "")} for j in range(4)]}
    for i in range(12)
]
N_WORKERS = 3
# RAY_TMPDIR: a short session path (AF_UNIX 107-byte limit) and, above all, the cluster address
# file Cluster writes (``<tmp>/ray/ray_current_cluster``) stays out of the machine-wide /tmp/ray,
# where any bare ``ray.init()`` of another user would attach to this test cluster.
ENV = {"RAY_TMPDIR": "/tmp/rg-mn", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
       "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "RAY_DATA_DISABLE_PROGRESS_BARS": "1"}
# Declare a dead node after ~5 missed 1 s health checks (Ray's defaults are slower); not tighter,
# or a loaded 2-core machine gets healthy nodes declared dead.
FAST_NODE_DEATH = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 1000,
                   "health_check_timeout_ms": 2000, "health_check_failure_threshold": 5}


def slow_influence(config, generator=None, *, delay):
    """``ragray run``'s per-question work, ``delay`` seconds slower (time to kill a node mid-run)."""
    process = influence_processor(config, generator)

    def run(qh):
        time.sleep(delay)
        return process(qh)

    return run


@pytest.fixture(scope="module")
def cluster():
    """Head (0 CPUs) + three 1-CPU worker nodes; the driver connected; all gone at module end."""
    saved = {k: os.environ.get(k) for k in ENV}
    os.environ.update(ENV)
    os.makedirs(ENV["RAY_TMPDIR"], exist_ok=True)
    # Ray workers cannot import this module (--import-mode=importlib, tests/ is no package):
    # ship its functions (the slow builder) by value instead of by reference.
    module = sys.modules[__name__]
    ray.cloudpickle.register_pickle_by_value(module)
    # Send no row before the whole actor pool is up: otherwise the first actor ready takes
    # every scripted question (a few ms each) and the placement checks depend on timing.
    data_context = ray.data.DataContext.get_current()
    wait_before = data_context.wait_for_min_actors_s
    data_context.wait_for_min_actors_s = 120
    nodes = None
    try:
        nodes = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False, "object_store_memory": 100 * 2**20,
            "_system_config": FAST_NODE_DEATH})
        for _ in range(N_WORKERS):
            nodes.add_node(num_cpus=1, object_store_memory=100 * 2**20)
        nodes.wait_for_nodes()
        ray.init(address=nodes.address, log_to_driver=False)
        yield nodes
    finally:
        ray.shutdown()
        if nodes is not None:
            nodes.shutdown()  # also removes the address file (still under RAY_TMPDIR here)
        data_context.wait_for_min_actors_s = wait_before
        ray.cloudpickle.unregister_pickle_by_value(module)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return [f"data.path={path}", "generation.backend=scripted", "metrics.embedding=false"]


@pytest.fixture(scope="module")
def local(base, tmp_path_factory):
    """The reference: the same run with the local executor."""
    return run_influence(load_config(None, base), tmp_path_factory.mktemp("local"), progress=False).out


def stable(out, name):
    return [{k: v for k, v in r.items() if k not in ("seconds", "latency_s")}
            for r in pq.read_table(out / f"{name}.parquet").to_pylist()]


def logged(out):
    return [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]


def worker_node_ids():
    return {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0}


@pytest.mark.timeout(300)
def test_questions_spread_over_worker_nodes_and_equal_local(cluster, base, local, tmp_path):
    # 1 CPU per actor and per node: each of the three actors sits on its own worker node
    cfg = load_config(None, [*base, "execution.executor=ray", "execution.actors=3", "execution.num_cpus=1"])
    remote = run_influence(cfg, tmp_path / "ray", progress=False)
    for name in ("questions", "passages", "calls"):
        assert stable(remote.out, name) == stable(local, name)
    records = logged(remote.out)
    assert sorted(r["question"]["question_id"] for r in records) == sorted(r["id"] for r in ROWS)
    nodes = {r["worker"]["node_id"] for r in records}
    assert nodes <= worker_node_ids()  # never on the CPU-less head
    assert len(nodes) == N_WORKERS, f"questions ran on {len(nodes)} of {N_WORKERS} worker nodes"


@pytest.mark.timeout(300)
def test_losing_a_worker_node_mid_run_loses_and_duplicates_nothing(cluster, base, local, tmp_path):
    # half a CPU per actor: a surviving node has room for the actor Ray restarts
    cfg = load_config(None, [*base, "execution.executor=ray", "execution.actors=3", "execution.num_cpus=0.5"])
    out = tmp_path / "ray"
    log_path = out / "progress.jsonl"
    run_over = threading.Event()

    def kill_a_busy_node():
        """Once each of the 3 actors has logged a question, hard-kill the first one's node."""
        deadline = time.monotonic() + 120
        while not run_over.is_set() and time.monotonic() < deadline:
            text = log_path.read_text() if log_path.exists() else ""
            before = [json.loads(line)["worker"] for line in text.split("\n")[:-1]]  # whole lines
            workers = {(w["node_id"], w["pid"]) for w in before}
            if len(workers) == 3:
                node = next(n for n in cluster.worker_nodes if n.node_id == before[0]["node_id"])
                cluster.remove_node(node, allow_graceful=False)
                return {"node_id": node.node_id, "n_logged": len(before), "workers": workers}
            time.sleep(0.05)
        return None

    qr = open_question_run(cfg, out, resume=False, record_type=InfluenceRecord)
    with ThreadPoolExecutor(max_workers=1) as pool:  # the kill's errors re-raise here
        kill = pool.submit(kill_a_busy_node)
        try:
            run_questions(qr, cfg, functools.partial(slow_influence, delay=1.0), "run", False, None, InfluenceRecord)
        finally:
            run_over.set()
        killed = kill.result(timeout=60)
    assert killed is not None, "the node was not killed during the run"
    assert killed["n_logged"] < len(ROWS), "the run was over before the node died"
    assert killed["node_id"] not in worker_node_ids()

    records = logged(out)
    ids = [r["question"]["question_id"] for r in records]
    assert sorted(ids) == sorted(r["id"] for r in ROWS)  # every question exactly once
    # the rows the dead node's actor held were finished by a 4th actor process, on a surviving
    # node: Ray restarted the actor there and retried its rows
    late = {(r["worker"]["node_id"], r["worker"]["pid"]) for r in records[killed["n_logged"]:]}
    restarted = late - killed["workers"]
    assert restarted and all(node != killed["node_id"] for node, _ in restarted)
    # the tables are built from the log: resuming the finished run only writes them
    result = run_influence(cfg, out, resume=True, progress=False)
    assert result.n_resumed == len(ROWS)
    for name in ("questions", "passages", "calls"):
        assert stable(result.out, name) == stable(local, name)
