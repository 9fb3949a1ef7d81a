"""The files in cluster/ are checked the way Ray, KubeRay and ragray will read them.

A wrong key, a GPU count that does not match the instance, an image built for another Ray, or a
job entrypoint the CLI rejects would otherwise surface only after a GPU cluster has been paid
for. Where Ray has its own validator (the launcher schema, the KubeRay translation the Ray
autoscaler applies, ``RuntimeEnv``, working-dir packaging) the tests call it; ragray's side is
checked with its real argument parser and config loader. No Ray cluster is started.
"""

from __future__ import annotations

import argparse
import copy
import re
import shlex
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ray = pytest.importorskip("ray")

from packaging.requirements import Requirement  # noqa: E402
from packaging.specifiers import SpecifierSet  # noqa: E402
from ray.runtime_env import RuntimeEnv  # noqa: E402

from ragray.adapters import cli  # noqa: E402
from ragray.config import ExperimentConfig, load_config  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "cluster"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])

# rayproject/ray:<ray>-py<3xx>-<cpu|gpu|cuXXX>, the tags Ray publishes for each release.
RAY_IMAGE = re.compile(
    r"^rayproject/ray(?:-ml|-llm)?:(?P<ray>\d+\.\d+\.\d+)-py(?P<py>3\d+)-(?P<variant>cpu|gpu|cu\d+)$"
)
# EC2 GPU instance types the launcher may use: (vCPUs, GPUs). Add a row to use another type.
EC2_GPU_TYPES = {
    "g5.xlarge": (4, 1), "g5.2xlarge": (8, 1), "g5.4xlarge": (16, 1), "g5.8xlarge": (32, 1),
    "g5.12xlarge": (48, 4), "g5.16xlarge": (64, 1), "g5.24xlarge": (96, 4), "g5.48xlarge": (192, 8),
    "g6.xlarge": (4, 1), "g6.12xlarge": (48, 4), "g6e.xlarge": (4, 1), "g6e.12xlarge": (48, 4),
    "p4d.24xlarge": (96, 8), "p5.48xlarge": (192, 8),
}
# Directories that must never be uploaded or synced to a cluster (they can hold gigabytes).
LARGE_DIRS = (".git", "runs", "benchmarks/results", ".gpu")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def load_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def check_image(image: str, *, gpu: bool) -> None:
    """An image must carry the installed Ray, a Python that ragray supports, and CUDA for GPUs."""
    m = RAY_IMAGE.match(image)
    assert m, f"{image!r} is not a rayproject/ray:<version>-py3xx-<variant> image"
    assert m["ray"] == ray.__version__, f"{image} has Ray {m['ray']}, installed Ray is {ray.__version__}"
    python = f"{m['py'][0]}.{m['py'][1:]}"
    requires = SpecifierSet(PYPROJECT["project"]["requires-python"])
    assert python in requires, f"{image} has Python {python}; ragray requires {requires}"
    if gpu:
        assert m["variant"] != "cpu", f"{image} has no CUDA but runs GPU workers"


def parse_ragray(command: str) -> tuple[argparse.Namespace, ExperimentConfig]:
    """Parse a ``ragray ...`` command with ragray's own parser and load its config like the CLI."""
    argv = shlex.split(command)
    assert argv[0] == "ragray", f"not a ragray command: {command!r}"
    try:
        args = cli.build_parser().parse_args(argv[1:])
    except SystemExit:
        pytest.fail(f"ragray's CLI rejects: {command}")
    if args.config is not None:
        assert not Path(args.config).is_absolute(), f"{args.config} must be relative to the repo root"
        assert (REPO / args.config).is_file(), f"{command!r} names {args.config}, not in the repo"
    # the CLI's own flag -> config key mapping, so --backend, --executor ... count as they do there
    config = load_config(REPO / args.config if args.config else None, args.overrides, cli._flag_values(args))
    return args, config


# ---------------------------------------------------------------------------------------------
# cluster launcher


@pytest.fixture(scope="module")
def launcher() -> dict[str, Any]:
    return yaml.safe_load((CLUSTER / "launcher-gpu.yaml").read_text(encoding="utf-8"))


def test_launcher_passes_rays_own_validation(launcher):
    """What `ray up` does before touching AWS: merge the provider defaults, then check the
    result against ray-schema.json (unknown keys, types) and the worker-count rules."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(prepare_config(copy.deepcopy(launcher)))


def test_launcher_schema_rejects_a_typo(launcher):
    """The schema check above has teeth: a misspelt node-type key fails it."""
    import jsonschema
    from ray.autoscaler._private.util import prepare_config, validate_config

    broken = copy.deepcopy(launcher)
    node = next(v for k, v in broken["available_node_types"].items() if k != broken["head_node_type"])
    node["max_worker"] = node.pop("max_workers")
    with pytest.raises(jsonschema.ValidationError, match="max_worker"):
        validate_config(prepare_config(broken))


def test_launcher_gpu_workers_declare_their_real_gpus(launcher):
    head = launcher["head_node_type"]
    workers = {k: v for k, v in launcher["available_node_types"].items() if k != head}
    assert workers, "no worker node types"
    for name, node in workers.items():
        instance = node["node_config"]["InstanceType"]
        assert instance in EC2_GPU_TYPES, f"{name}: {instance} is not a known GPU instance type"
        vcpus, gpus = EC2_GPU_TYPES[instance]
        assert node["resources"].get("GPU") == gpus, f"{name}: {instance} has {gpus} GPUs"
        assert 0 < node["resources"].get("CPU", vcpus) <= vcpus, f"{name}: {instance} has {vcpus} vCPUs"
        lo, hi = node.get("min_workers", 0), node["max_workers"]
        assert 0 <= lo <= hi <= launcher["max_workers"], f"{name}: need min {lo} <= max {hi} <= {launcher['max_workers']}"
    assert "GPU" not in launcher["available_node_types"][head]["resources"], "the head is the CPU node"


def test_launcher_images_match_installed_ray(launcher):
    docker = launcher["docker"]
    check_image(docker.get("worker_image", docker["image"]), gpu=True)
    check_image(docker.get("head_image", docker["image"]), gpu=False)
    for node in launcher["available_node_types"].values():
        if "worker_image" in node.get("docker", {}):
            check_image(node["docker"]["worker_image"], gpu=True)


def test_launcher_installs_this_checkout_without_large_dirs(launcher):
    """setup_commands pip-install the directory that file_mounts copies from the repo root."""
    installs = [c for c in launcher["setup_commands"] if re.search(r"pip install .*ragray\[", c)]
    assert len(installs) == 1, "expected one `pip install <path>/ragray[extras]` in setup_commands"
    target = re.search(r'"?(\S+?)\[([\w,-]+)\]"?', installs[0].split("install", 1)[1])
    remote, extras = target[1].replace("$HOME", "~"), set(target[2].split(","))
    assert remote in launcher["file_mounts"], f"{remote} is not a file_mounts destination"
    local = (REPO / launcher["file_mounts"][remote]).resolve()
    assert local == REPO, f"file_mounts copies {local}, not the repo root (run `ray up` from it)"
    assert extras <= EXTRAS, f"unknown extras {extras - EXTRAS}"
    assert {"ray", "vllm"} <= extras, "GPU nodes need the ray and vllm extras"
    excluded = {p.strip("/") for p in launcher["rsync_exclude"]}
    assert set(LARGE_DIRS) <= excluded, f"rsync_exclude misses {set(LARGE_DIRS) - excluded}"


# ---------------------------------------------------------------------------------------------
# runtime env for `ray job submit`


@pytest.fixture(scope="module")
def runtime_env() -> dict[str, Any]:
    return yaml.safe_load((CLUSTER / "runtime_env.yaml").read_text(encoding="utf-8"))


def test_runtime_env_is_a_valid_ray_runtime_env(runtime_env):
    """RuntimeEnv checks types (env values must be strings, excludes a list) but passes unknown
    keys to plugins, so the keys are checked against its known fields too."""
    assert set(runtime_env) <= RuntimeEnv.known_fields, set(runtime_env) - RuntimeEnv.known_fields
    env = RuntimeEnv(**runtime_env, working_dir=str(REPO))  # as `--working-dir .` adds it
    assert env["env_vars"]["TOKENIZERS_PARALLELISM"] == "false"
    assert "pip" not in env and "conda" not in env, "cluster nodes already hold ragray's dependencies"


def packaged(root: Path, excludes: list[str], tmp_path: Path, gitignore: bool) -> set[str]:
    """The files Ray's own packaging puts in the working-dir zip it uploads."""
    from ray._private.runtime_env.packaging import create_package

    target = tmp_path / f"{root.name}.zip"
    create_package(str(root), target, include_gitignore=gitignore, excludes=excludes)
    with zipfile.ZipFile(target) as z:
        return {n for n in z.namelist() if not n.endswith("/")}


def test_runtime_env_excludes_leave_out_large_dirs(runtime_env, tmp_path):
    """On a made-up checkout, with Ray's default excludes and .gitignore switched off (users can
    do both), only the runtime env's own excludes stand between a job and a huge upload."""
    tree = tmp_path / "repo"
    keep = ["ragray/adapters/cli.py", "configs/default.yaml", "pyproject.toml", "benchmarks/bench_retrieval.py",
            "data/pdfs/a.pdf", "tests/fixtures/nq_rows.jsonl"]
    drop = [".git/objects/ab/cdef", "runs/run-default-1/calls.parquet", "benchmarks/results/r.json",
            "ragray/__pycache__/cli.cpython-311.pyc", "ragray.egg-info/PKG-INFO", ".pytest_cache/v/x",
            ".venv/lib/site.py", "dist/ragray-0.1.0.whl"]
    for rel in keep + drop:
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text("x")
    assert packaged(tree, runtime_env["excludes"], tmp_path, gitignore=False) == set(keep)


def test_this_checkout_uploads_small(runtime_env, tmp_path):
    """What `ray job submit --working-dir .` would upload from this checkout right now."""
    from ray._private import ray_constants

    excludes = ray_constants.get_runtime_env_default_excludes() + runtime_env["excludes"]
    names = packaged(REPO, excludes, tmp_path, gitignore=True)
    assert {"ragray/adapters/cli.py", "configs/default.yaml", "cluster/runtime_env.yaml"} <= names
    leaked = sorted(n for n in names if any(n.startswith(d + "/") for d in LARGE_DIRS))
    assert not leaked, f"uploaded: {leaked[:5]}"
    size = sum((REPO / n).stat().st_size for n in names if (REPO / n).is_file())
    assert size < 50 * 2**20, f"working dir upload is {size / 2**20:.0f} MiB"


# ---------------------------------------------------------------------------------------------
# KubeRay


@pytest.fixture(scope="module")
def raycluster_docs() -> list[dict[str, Any]]:
    return load_docs(CLUSTER / "kuberay" / "raycluster.yaml")


@pytest.fixture(scope="module")
def rayjob_docs() -> list[dict[str, Any]]:
    return load_docs(CLUSTER / "kuberay" / "rayjob.yaml")


@pytest.fixture(scope="module")
def rayjob(rayjob_docs) -> dict[str, Any]:
    return one(rayjob_docs, "RayJob")


@pytest.fixture(scope="module", params=["RayCluster", "RayJob"])
def cluster_spec(request, raycluster_docs, rayjob) -> dict[str, Any]:
    """The RayCluster spec of either manifest (the RayJob embeds one)."""
    if request.param == "RayCluster":
        return one(raycluster_docs, "RayCluster")["spec"]
    return rayjob["spec"]["rayClusterSpec"]


def test_manifests_are_ray_io_v1(raycluster_docs, rayjob_docs):
    for docs, kind in ((raycluster_docs, "RayCluster"), (rayjob_docs, "RayJob")):
        cr = one(docs, kind)
        assert cr["apiVersion"] == "ray.io/v1"
        assert DNS_LABEL.match(cr["metadata"]["name"]), "names must be DNS-1123 labels"
        for doc in docs:
            assert {"apiVersion", "kind", "metadata"} <= set(doc), doc.get("kind")


def test_rayjob_embeds_the_raycluster_spec(raycluster_docs, rayjob):
    """One cluster definition: the RayJob's cluster must not drift from raycluster.yaml."""
    assert rayjob["spec"]["rayClusterSpec"] == one(raycluster_docs, "RayCluster")["spec"]
    assert "clusterSelector" not in rayjob["spec"], "rayClusterSpec and clusterSelector exclude each other"


def containers(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    groups = [("head", spec["headGroupSpec"])] + [(g["groupName"], g) for g in spec["workerGroupSpecs"]]
    return [(name, c) for name, g in groups for c in g["template"]["spec"]["containers"]]


def test_ray_version_and_images_match_installed_ray(cluster_spec):
    assert cluster_spec["rayVersion"] == ray.__version__
    for name, container in containers(cluster_spec):
        check_image(container["image"], gpu=name != "head")


def test_gpu_worker_groups(cluster_spec):
    assert cluster_spec.get("enableInTreeAutoscaling") is True, "min/maxReplicas need the autoscaler"
    assert cluster_spec["workerGroupSpecs"], "no worker groups"
    names = [g["groupName"] for g in cluster_spec["workerGroupSpecs"]]
    assert len(set(names)) == len(names) and all(DNS_LABEL.match(n) for n in names), names
    for group in cluster_spec["workerGroupSpecs"]:
        name = group["groupName"]
        res = group["template"]["spec"]["containers"][0]["resources"]
        gpus = res["limits"].get("nvidia.com/gpu")
        assert isinstance(gpus, int) and gpus >= 1, f"{name}: limits need nvidia.com/gpu >= 1"
        # Ray sizes a pod from its limits; requests that differ let K8s overcommit the node
        assert res["requests"] == res["limits"], f"{name}: requests must equal limits"
        assert 0 <= group["minReplicas"] <= group.get("replicas", 0) <= group["maxReplicas"], name
        tolerated = {t["key"] for t in group["template"]["spec"].get("tolerations", [])}
        assert "nvidia.com/gpu" in tolerated, f"{name}: GPU node pools are tainted nvidia.com/gpu"


def test_autoscaler_reads_the_cluster_as_intended(cluster_spec):
    """Ray's own translation of a RayCluster (what the KubeRay autoscaler runs, including
    validate_config): GPUs from the nvidia.com/gpu limits, a head without CPUs for tasks."""
    from ray.autoscaler._private.kuberay.autoscaling_config import _derive_autoscaling_config_from_ray_cr

    config = _derive_autoscaling_config_from_ray_cr(
        {"metadata": {"name": "ragray", "namespace": "default"}, "spec": copy.deepcopy(cluster_spec)}
    )
    types = config["available_node_types"]
    assert types["headgroup"]["resources"]["CPU"] == 0 and "GPU" not in types["headgroup"]["resources"]
    for group in cluster_spec["workerGroupSpecs"]:
        node = types[group["groupName"]]
        limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert node["resources"]["GPU"] == limits["nvidia.com/gpu"]
        assert (node["min_workers"], node["max_workers"]) == (group["minReplicas"], group["maxReplicas"])


def test_head_ray_start_params(cluster_spec):
    head = cluster_spec["headGroupSpec"]
    params = head["rayStartParams"]
    # a map[string]string in the CRD: `num-cpus: 0` (an int) is rejected by the API server
    assert all(isinstance(v, str) for v in params.values()), params
    assert not {"head", "address", "block", "port"} & set(params), "KubeRay sets these itself"
    assert params.get("dashboard-host") == "0.0.0.0", "the RayJob submitter reaches the job API over the network"
    assert params.get("num-cpus") == "0", "keep tasks and actors on the workers"
    ray_container = head["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in ray_container["ports"]}
    assert ports.get("dashboard") == int(params.get("dashboard-port", "8265"))


def test_volumes_are_defined(raycluster_docs, rayjob_docs):
    for docs, kind in ((raycluster_docs, "RayCluster"), (rayjob_docs, "RayJob")):
        spec = one(docs, kind)["spec"]
        spec = spec.get("rayClusterSpec", spec)
        claims = {d["metadata"]["name"] for d in docs if d["kind"] == "PersistentVolumeClaim"}
        for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
            pod = group["template"]["spec"]
            volumes = {v["name"]: v for v in pod.get("volumes", [])}
            for v in volumes.values():
                if "persistentVolumeClaim" in v:
                    assert v["persistentVolumeClaim"]["claimName"] in claims, f"{kind}: no PVC for {v}"
            for c in pod["containers"]:
                for m in c.get("volumeMounts", []):
                    assert m["name"] in volumes, f"{kind}: mount of undefined volume {m['name']}"


def test_rayjob_entrypoint_is_a_valid_ragray_command(rayjob):
    """Parsed by ragray's real parser, config loaded as the CLI would, and sized to the cluster:
    actors that ask for more GPUs than a pod has, or more than the group can ever hold, would
    wait forever."""
    spec = rayjob["spec"]
    args, config = parse_ragray(spec["entrypoint"])
    assert args.command in ("run", "interpret")
    assert config.data.path == "demo" or (REPO / config.data.path).exists(), config.data.path
    ex = config.execution
    assert ex.executor == "ray", "without --executor ray the GPU workers stay idle"
    group = spec["rayClusterSpec"]["workerGroupSpecs"][0]
    limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert 1 <= ex.num_gpus <= limits["nvidia.com/gpu"]
    assert ex.num_cpus is None or ex.num_cpus <= float(limits["cpu"])  # None: a share of a node, fits by construction
    assert ex.actors * ex.num_gpus <= group["maxReplicas"] * limits["nvidia.com/gpu"]
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    mounts = [m["mountPath"] for m in head.get("volumeMounts", [])]
    assert args.out and any(args.out.startswith(m + "/") for m in mounts), \
        f"--out {args.out} is not on a volume: it would vanish with the cluster"


def test_rayjob_runtime_env(rayjob, runtime_env):
    env = yaml.safe_load(rayjob["spec"]["runtimeEnvYAML"])
    assert set(env) <= RuntimeEnv.known_fields, set(env) - RuntimeEnv.known_fields
    parsed = RuntimeEnv(**env)
    from ray._common.runtime_env_uri import Protocol, parse_uri

    protocol, _ = parse_uri(env["working_dir"])
    assert protocol in Protocol.remote_protocols() and env["working_dir"].endswith(".zip"), \
        "on Kubernetes the working dir must be a downloadable zip"
    reqs = [Requirement(p) for p in parsed["pip"]["packages"]]
    own = [r for r in reqs if r.name == "ragray"]
    assert len(own) == 1, "the pip list must install ragray"
    assert own[0].extras <= EXTRAS and {"ray", "vllm"} <= own[0].extras, own[0].extras
    assert own[0].url == env["working_dir"], "pip and working_dir must take the same archive"
    assert env["env_vars"] == runtime_env["env_vars"], "keep the job env equal to cluster/runtime_env.yaml"


def test_rayjob_lifecycle(rayjob):
    spec = rayjob["spec"]
    assert spec["shutdownAfterJobFinishes"] is True, "a finished job must release its GPUs"
    assert isinstance(spec["ttlSecondsAfterFinished"], int) and spec["ttlSecondsAfterFinished"] >= 0
    assert spec.get("submissionMode", "K8sJobMode") in ("K8sJobMode", "HTTPMode")
    assert spec.get("backoffLimit", 0) >= 0 and spec.get("activeDeadlineSeconds", 1) > 0


# ---------------------------------------------------------------------------------------------
# the commands written in cluster/README.md and the launcher's comments


def documented_commands() -> list[str]:
    """Every ``... -- ragray ...`` command in the docs, with shell line continuations joined."""
    out = []
    for path in (CLUSTER / "README.md", CLUSTER / "launcher-gpu.yaml"):
        text = path.read_text(encoding="utf-8")
        text = re.sub(r"\\\n(#\s*)?\s*", " ", text)  # continuations, also inside YAML comments
        out += [line.split(" -- ", 1)[1].strip() for line in text.splitlines() if " -- ragray " in line]
    return out


@pytest.mark.parametrize("command", documented_commands())
def test_documented_commands_parse(command):
    argv = shlex.split(command)
    if argv[1] == "sweep":  # a sweep's trials are Ray Tune trials: no executor to name
        args = cli.build_parser().parse_args(argv[1:])
        assert (REPO / args.spec).is_file(), f"{command!r} names {args.spec}, not in the repo"
        return
    _, config = parse_ragray(command)
    assert config.execution.executor == "ray", f"a job without --executor ray runs on one CPU: {command}"


def test_documented_commands_found():
    assert len(documented_commands()) >= 5

