"""``auto`` resources per model holder, and the device a model resolves to inside a Ray worker
(no Ray started: the cluster is a list of nodes, the worker's GPU assignment is faked)."""

import types

import pytest

from ragray.encoders import resolve_device
from ragray.adapters.execution import placement as pl
from ragray.adapters.execution.placement import ClusterView, NodeView, holder_resources, serve_gpus


def view(*nodes, dead=()):
    """A cluster of (cpus, gpus) nodes as ``ray.nodes()`` lists them."""
    raw = [{"NodeID": f"n{i}", "Alive": i not in dead,
            "Resources": {**({"CPU": c} if c else {}), **({"GPU": g} if g else {})}} for i, (c, g) in enumerate(nodes)]
    return pl.cluster_view(types.SimpleNamespace(nodes=lambda: raw))


@pytest.mark.parametrize(("cpus", "count", "share"), [
    ((2,), 1, 2),           # a lone holder gets the whole laptop
    ((2,), 2, 1),           # two share its 2 cores
    ((2,), 3, 1),           # never below one
    ((1, 1), 2, 1),         # one per node
    ((16, 16), 4, 8),       # two per node
    ((0, 8, 4), 2, 4),      # a CPU-less head is not a place for holders; the smallest node decides
])
def test_without_gpus_the_cpu_rule_holds(cpus, count, share):
    res = holder_resources(view(*[(c, 0) for c in cpus]), gpus="auto", count=count, cpus=None)
    assert (res.count, res.cpus, res.gpus) == (count, share, 0.0)
    assert holder_resources(view(*[(c, 0) for c in cpus]), gpus="auto", count="auto", cpus=None).count == 1


def test_dead_nodes_and_a_cpu_less_cluster_are_not_counted():
    assert holder_resources(view((2, 0), (16, 0), dead=(0,)), gpus="auto", count=1, cpus=None).cpus == 16
    assert holder_resources(view((0, 0)), gpus="auto", count=2, cpus=None).cpus == 1


def test_on_a_gpu_cluster_every_holder_gets_its_own_gpu_and_the_cpu_head_counts_for_nothing():
    # a CPU-only head of 1 core, two GPU workers of 16 cores and 4 GPUs each
    res = holder_resources(view((1, 0), (16, 4), (16, 4)), gpus="auto", count="auto", cpus=None)
    assert (res.count, res.gpus, res.cpus) == (8, 1.0, 4)   # one per GPU; 16 cores / 4 holders per node
    # an explicit GPU share and holder count are kept; the CPUs follow the holders that fit a node
    res = holder_resources(view((1, 0), (16, 4)), gpus=0.5, count="auto", cpus=None)
    assert (res.count, res.gpus, res.cpus) == (8, 0.5, 2)
    res = holder_resources(view((1, 0), (16, 4)), gpus=0.0, count=3, cpus=2.5)
    assert (res.count, res.gpus, res.cpus) == (3, 0.0, 2.5)
    # a lone actor on an 8-GPU node gets one GPU and the node's cores
    res = holder_resources(view((32, 8)), gpus="auto", count=1, cpus=None)
    assert (res.count, res.gpus, res.cpus) == (1, 1.0, 32)


def test_serve_gpus_fit_the_cluster():
    none = view((8, 0))
    assert serve_gpus(none, generator="auto", generator_replicas=1, small={"retriever": "auto", "reranker": "auto"}) \
        == {"retriever": 0.0, "reranker": 0.0, "generator": 0.0}
    one = view((8, 1))  # one GPU: the generator takes what the two small models leave, all on the one GPU
    got = serve_gpus(one, generator="auto", generator_replicas=1, small={"retriever": "auto", "reranker": "auto"})
    assert got == {"retriever": 0.25, "reranker": 0.25, "generator": 0.5} and sum(got.values()) <= 1
    two = view((8, 2))
    assert serve_gpus(two, generator="auto", generator_replicas=1, small={"retriever": 0.0, "reranker": "auto"}) \
        == {"retriever": 0.0, "reranker": 0.25, "generator": 1.0}
    assert serve_gpus(view((8, 4)), generator="auto", generator_replicas=2, small={"reranker": "auto"})["generator"] == 1.0
    assert serve_gpus(one, generator=0.0, generator_replicas=1, small={"reranker": 0.0}) == {"reranker": 0.0,
                                                                                               "generator": 0.0}


def test_placement_warns_when_a_gpu_node_runs_a_holder_without_a_gpu():
    idle = pl.Placement("actor", "abcdef123456", "10.0.0.2", 7, (), None, "cpu", 8.0)
    used = pl.Placement("actor", "abcdef123456", "10.0.0.2", 8, ("3",), "3", "cuda", 8.0)
    cpu_node = pl.Placement("actor", "fedcba", "10.0.0.1", 9, (), None, "cpu", 0.0)
    assert "no GPU assigned while its node has 8 GPU(s)" in idle.warning()
    assert used.warning() is None and cpu_node.warning() is None
    rows = pl.summarize_placements([used.as_dict(), idle.as_dict(), used.as_dict()])
    assert [(r["pid"], r["questions"]) for r in rows] == [(8, 2), (7, 1)]
    lines = pl.placement_lines(rows)
    assert "GPU 3, device cuda, 2 questions" in lines[0] and "GPU none, device cpu" in lines[1]
    assert lines[-1].startswith("  warning: actor pid 7 ran with no GPU on a node with 8 GPU(s)")


@pytest.mark.parametrize(("assigned", "cuda", "device"), [
    ([], True, "cpu"),          # a Ray worker given no GPU stays off the node's GPUs
    (["1"], True, "cuda"),      # its own GPU (Ray set CUDA_VISIBLE_DEVICES, so cuda is that GPU)
    (["0"], False, "cpu"),      # a fake GPU (ray start --num-gpus on a CPU machine): torch has none
    (None, True, "cuda"),       # outside Ray: CUDA when torch sees it
    (None, False, "cpu"),
])
def test_device_auto_follows_the_gpu_ray_assigned(monkeypatch, assigned, cuda, device):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr("ragray.worker.assigned_gpus", lambda: assigned)
    assert resolve_device("auto") == device
    assert resolve_device("cpu") == "cpu"


def test_a_view_lists_alive_nodes_with_what_they_offer():
    v = view((1, 0), (16, 2), (4, 1), dead=(2,))
    assert v == ClusterView((NodeView("n0", 1.0, 0.0), NodeView("n1", 16.0, 2.0)))
    assert v.gpus == 2
