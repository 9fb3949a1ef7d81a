"""Relative paths in a config file resolve against its folder; on the command line, the cwd."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragray.config import load_config
from ragray.config_paths import resolve_dotted, resolve_file_paths
from ragray.adapters.sweep.spec import load_spec


@pytest.fixture()
def layout(tmp_path, monkeypatch):
    """``proj/configs/exp.yaml`` naming ``proj/data/*``; the test runs from ``elsewhere/``."""
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    (proj / "configs").mkdir()
    for name in ("qa.jsonl", "qa.corpus.jsonl", "queries.json", "gt.json"):
        (proj / "data" / name).write_text("{}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return proj


def test_data_paths_in_a_file_resolve_against_its_folder(layout):
    cfg_file = layout / "configs" / "exp.yaml"
    cfg_file.write_text("data:\n  path: ../data/qa.jsonl\n  corpus: ../data/qa.corpus.jsonl\n"
                        "  queries: ../data/queries.json\n  ground_truth: ../data/gt.json\n")
    data = load_config(cfg_file).data
    assert data.path == str(layout / "data" / "qa.jsonl")
    assert data.corpus == str(layout / "data" / "qa.corpus.jsonl")
    assert data.queries == str(layout / "data" / "queries.json")
    assert data.ground_truth == str(layout / "data" / "gt.json")
    # the same file loaded through a relative path from another folder
    os.chdir(layout)
    assert load_config(Path("configs/exp.yaml")).data.path == str(layout / "data" / "qa.jsonl")


def test_a_missing_file_still_resolves_against_the_config_folder(layout):
    cfg_file = layout / "configs" / "exp.yaml"
    cfg_file.write_text("data:\n  path: nope.jsonl\n")
    assert load_config(cfg_file).data.path == str(layout / "configs" / "nope.jsonl")


@pytest.mark.parametrize("value", ["demo", "nq", "squad", "hotpotqa", "pubmedqa", "scifact",
                                   "https://example.org/qa.jsonl", "/abs/qa.jsonl"])
def test_keywords_urls_and_absolute_paths_are_never_resolved(layout, value):
    (layout / "configs" / value.strip("/").split("/")[-1]).mkdir(exist_ok=True)  # even beside the file
    cfg_file = layout / "configs" / "exp.yaml"
    cfg_file.write_text(f"data:\n  path: {value}\n")
    assert load_config(cfg_file).data.path == value
    assert load_config(None, [f"data.path={value}"]).data.path == value


def test_an_nq_hub_id_stays_a_hub_id(layout):
    cfg_file = layout / "configs" / "exp.yaml"
    cfg_file.write_text("data:\n  path: someone/natural_questions_copy\n  format: nq\n")
    assert load_config(cfg_file).data.path == "someone/natural_questions_copy"


def test_model_settings_resolve_only_when_written_as_paths_or_present(layout):
    (layout / "configs" / "models" / "tiny").mkdir(parents=True)
    cfg_file = layout / "configs" / "exp.yaml"
    cfg_file.write_text("generation: {model: ./gen}\nrerank: {model: BAAI/bge-reranker-base}\n"
                        "retrieval: {dense: {model: models/tiny}}\nmetrics: {encoder: minilm}\n"
                        "chunking: {tokenizer: ../tok}\n")
    cfg = load_config(cfg_file)
    assert cfg.generation.model == str(layout / "configs" / "gen")
    assert cfg.rerank.model == "BAAI/bge-reranker-base"
    assert cfg.retrieval.dense.model == str(layout / "configs" / "models" / "tiny")
    assert cfg.metrics.encoder == "minilm"
    assert cfg.chunking.tokenizer == str(layout / "tok")


def test_outputs_stay_relative_to_the_working_directory(layout):
    cfg_file = layout / "configs" / "exp.yaml"
    cfg_file.write_text("serve: {runs_dir: runs, presets_dir: configs}\ncache: {dir: .cache}\n"
                        "history: {url: 'sqlite:///runs/h.sqlite'}\n")
    cfg = load_config(cfg_file)
    assert (cfg.serve.runs_dir, cfg.serve.presets_dir, cfg.cache.dir) == ("runs", "configs", ".cache")
    assert cfg.history.url == "sqlite:///runs/h.sqlite"


def test_command_line_paths_resolve_against_the_working_directory(layout):
    cfg_file = layout / "configs" / "exp.yaml"
    cfg_file.write_text("data:\n  path: ../data/qa.jsonl\n")
    os.chdir(layout / "data")
    # --set and flag values override the file and name files in the cwd, made absolute if present
    assert load_config(cfg_file, ["data.path=gt.json"]).data.path == str(layout / "data" / "gt.json")
    assert load_config(cfg_file, (), {"data.corpus": "qa.corpus.jsonl"}).data.corpus == \
        str(layout / "data" / "qa.corpus.jsonl")
    # one that does not exist is left as written (the loader's error names it so)
    assert load_config(None, ["data.path=missing.jsonl"]).data.path == "missing.jsonl"


def test_the_file_mapping_is_not_modified():
    raw = {"data": {"path": "a.jsonl"}, "retrieval": {"top_k": 3}}
    out = resolve_file_paths(raw, "/x/y")
    assert raw == {"data": {"path": "a.jsonl"}, "retrieval": {"top_k": 3}}
    assert out == {"data": {"path": "/x/y/a.jsonl"}, "retrieval": {"top_k": 3}}
    assert resolve_dotted({"data.path": "../a.jsonl", "data": {"corpus": "c.jsonl"}, "retrieval.top_k": 3},
                          "/x/y") == {"data.path": "/x/a.jsonl", "data": {"corpus": "/x/y/c.jsonl"},
                                      "retrieval.top_k": 3}


def test_sweep_paths_resolve_against_the_spec_the_base_and_the_cwd(layout):
    (layout / "configs" / "base.yaml").write_text("data:\n  corpus: ../data/qa.corpus.jsonl\n")
    sweeps = layout / "configs" / "sweeps"
    sweeps.mkdir()
    spec_file = sweeps / "s.yaml"
    spec_file.write_text(
        "name: s\nbase: ../base.yaml\nset: [data.path=../../data/qa.jsonl, data.limit=2]\n"
        "variants:\n  - {name: a, set: {data.ground_truth: ../../data/gt.json}}\n  - {name: b}\n"
    )
    spec, trials = load_spec(spec_file)
    a, b = trials
    assert a.config.data.path == b.config.data.path == str(layout / "data" / "qa.jsonl")
    assert a.config.data.corpus == str(layout / "data" / "qa.corpus.jsonl")
    assert a.config.data.ground_truth == str(layout / "data" / "gt.json") and b.config.data.ground_truth is None
    assert a.params == {"variant": "a"} and a.config.data.limit == 2
    # the command line's --set names a file in the working directory
    os.chdir(layout / "data")
    _, trials = load_spec(spec_file, ["data.path=gt.json"])
    assert trials[0].config.data.path == str(layout / "data" / "gt.json")


def test_cli_anchors_path_arguments_but_not_dataset_names(layout, monkeypatch):
    import argparse

    from ragray.adapters import cli

    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    args = argparse.Namespace(dataset="squad", corpus="../proj/data/qa.corpus.jsonl", config=None)
    cli._anchor_path_args(args)
    assert args.dataset == "squad" and args.corpus == str(layout / "data" / "qa.corpus.jsonl")
