"""The Serve config files under serve/ are valid for Ray Serve and build ragray's application."""

from pathlib import Path

import pytest
import yaml

schema = pytest.importorskip("ray.serve.schema")

from ragray.config import load_config  # noqa: E402
from ragray.errors import ConfigError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "serve").glob("*.yaml"))
DEPLOYMENTS = {"Retriever", "Reranker", "Generator", "RagrayAPI"}


def test_there_are_serve_configs():
    assert {f.name for f in FILES} >= {"demo.yaml", "gpu.yaml"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_serve_config_validates_and_builds(path, monkeypatch):
    from ragray.adapters.serving.app import build_app

    raw = yaml.safe_load(path.read_text())
    parsed = schema.ServeDeploySchema.model_validate(raw)
    monkeypatch.chdir(ROOT)  # `serve run` resolves the args' config path from the working dir
    for app in parsed.applications:
        assert app.import_path == "ragray.adapters.serving.app:build_app"
        assert {d["name"] for d in raw["applications"][0].get("deployments", [])} <= DEPLOYMENTS
        config = load_config(app.args["config"], app.args.get("overrides", []))
        assert config.serve.generator.num_cpus + config.serve.retriever.num_cpus <= 2 or "gpu" in path.name
        bound = build_app(app.args)
        assert type(bound).__name__ == "Application"


def test_app_builder_rejects_unknown_args():
    from ragray.adapters.serving.app import build_app

    with pytest.raises(ConfigError, match=r"unknown \['confg'\]; valid: config, overrides"):
        build_app({"confg": "x.yaml"})


def test_deployment_options_follow_the_serve_section():
    from ragray.adapters.serving.app import deployment_options

    cfg = load_config(None, ["serve.generator.num_gpus=1", "serve.generator.max_queued_requests=8",
                             "serve.retriever.autoscaling={min_replicas: 1, max_replicas: 3}"])
    gen = deployment_options(cfg.serve.generator)
    assert gen == {"ray_actor_options": {"num_cpus": 0.5, "num_gpus": 1.0}, "max_ongoing_requests": 8,
                   "max_queued_requests": 8, "num_replicas": 1}
    ret = deployment_options(cfg.serve.retriever, 0.0)  # auto, resolved: BM25 holds no model
    assert ret["ray_actor_options"]["num_gpus"] == 0.0
    from ragray.adapters.execution.placement import ClusterView, NodeView
    from ragray.adapters.serving.app import serve_resources

    assert serve_resources(cfg, ClusterView((NodeView("n", 8, 0),))) == {
        "retriever": 0.0, "reranker": 0.0, "generator": 1.0, "ingress": 0.0}  # generator: the explicit 1
    assert serve_resources(load_config(None, ["rerank.strategy=bi_encoder"]), ClusterView((NodeView("n", 8, 1),))) \
        == {"retriever": 0.0, "reranker": 0.25, "generator": 0.75, "ingress": 0.0}
    assert "num_replicas" not in ret and ret["autoscaling_config"] == {
        "min_replicas": 1, "max_replicas": 3, "target_ongoing_requests": 2.0}
    with pytest.raises(ConfigError, match="min_replicas .3. must be <= max_replicas .1."):
        load_config(None, ["serve.retriever.autoscaling={min_replicas: 3, max_replicas: 1}"])
