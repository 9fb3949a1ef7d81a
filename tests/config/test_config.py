"""Config loading: defaults, YAML files, --set overrides and the precise error messages."""

from pathlib import Path

import pytest

from ragray.config import ExperimentConfig, apply_overrides, load_config
from ragray.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "exp.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_defaults_match_configs_default_yaml():
    assert load_config(REPO / "configs" / "default.yaml") == ExperimentConfig()


def test_yaml_and_overrides_nest(tmp_path):
    cfg = load_config(
        write(tmp_path, "retrieval:\n  top_k: 5\n  bm25:\n    k1: 0.9\n"),
        ["retrieval.bm25.b=0.4", "retrieval.filters={source: harbour-records}"],
    )
    assert (cfg.retrieval.top_k, cfg.retrieval.bm25.k1, cfg.retrieval.bm25.b) == (5, 0.9, 0.4)
    assert cfg.retrieval.filters == {"source": "harbour-records"}


def test_typed_values_win_and_are_not_yaml_parsed(tmp_path):
    cfg = load_config(write(tmp_path, "data:\n  path: a.jsonl\n"), ["data.path=b.jsonl"],
                      {"data.path": "1e5"})
    assert cfg.data.path == "1e5"


def test_resolved_config_round_trips(tmp_path):
    cfg = load_config(None, ["retrieval.retriever=hybrid", "chunking.method=words"])
    path = cfg.save(tmp_path / "run" / "config.yaml")
    assert load_config(path) == cfg


@pytest.mark.parametrize(
    "text, overrides, message",
    [
        ("retrieval:\n  top_k: 0\n", [], r"retrieval\.top_k must be >= 1, got 0"),
        ("", ["retrieval.bm25.b=1.5"], r"retrieval\.bm25\.b must be <= 1, got 1\.5"),
        ("retrieval:\n  topk: 3\n", [], r"retrieval\.topk: unknown key \(valid keys: retriever, top_k"),
        ("colour: red\n", [], r"colour: unknown key \(valid keys: name, seed, data"),
        ("retrieval:\n  scope: everywhere\n", [],
         r"retrieval\.scope must be one of 'auto', 'per_question' or 'global', got 'everywhere'"),
        ("retrieval:\n  retriever: bm52\n", [], r"retrieval\.retriever: unknown retriever 'bm52'; valid: bm25, dense, given, hybrid"),
        ("rerank:\n  strategy: magic\n", [], r"rerank\.strategy: unknown reranker 'magic'; valid: .*bge"),
        ("chunking:\n  size: 10\n  overlap: 10\n", [], r"chunking\.overlap must be < chunking\.size \(10\), got 10"),
        ("retrieval:\n  top_k: many\n", [], r"retrieval\.top_k: input should be a valid integer.*got 'many'"),
        ("data:\n  on_bad_row: ignore\n", [], r"data\.on_bad_row must be one of 'error' or 'skip'"),
        ("retrieval: 5\n", [], r"retrieval: input should be a valid dictionary"),
        ("", ["retrieval.top_k"], r"--set expects KEY=VALUE"),
        ("retrieval:\n  top_k: 3\n", ["retrieval.top_k.x=1"], r"--set retrieval.top_k.x: 'retrieval.top_k' is not a section"),
        ("", ["retrieval.top_k=[1"], r"--set retrieval.top_k: value '\[1' is not valid YAML"),
        ("", ["influence.position_control=sideways"],
         r"influence\.position_control must be one of 'none', 'reversed' or 'shuffled', got 'sideways'"),
        ("", ["influence.misalignment_threshold=0"], r"influence\.misalignment_threshold must be > 0, got 0"),
        ("", ["influence.rbo_p=1"], r"influence\.rbo_p must be < 1, got 1"),
    ],
)
def test_bad_config_messages(tmp_path, text, overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text), overrides)


def test_error_names_the_file(tmp_path):
    path = write(tmp_path, "retrieval:\n  top_k: -2\n")
    with pytest.raises(ConfigError, match=rf"{path}: retrieval\.top_k must be >= 1, got -2"):
        load_config(path)


@pytest.mark.parametrize("overrides, values, setter", [
    (["generation.model=x"], {}, "--set generation.model"),
    ([], {"generation.model": "x"}, "option generation.model"),  # what --model sets
])
def test_a_section_the_file_made_a_value_is_blamed_on_the_file(tmp_path, overrides, values, setter):
    """``generation: 5`` in the file is the file's fault, not the ``--set`` (or flag) that needs
    the section; a setting an override made a value is that override's fault."""
    path = write(tmp_path, "generation: 5\n")
    with pytest.raises(ConfigError, match=rf"^{path}: generation must be a section \(a mapping of its settings\), "
                                          rf"got 5 \({setter} sets a key inside it\)$"):
        load_config(path, overrides, values)
    with pytest.raises(ConfigError, match=r"^--set generation\.model: 'generation' is not a section "
                                          r"\(set by --set generation\)$"):
        load_config(write(tmp_path, "generation: {model: y}\n"), ["generation=5", "generation.model=x"])
    with pytest.raises(ConfigError, match=rf"^{path}: generation: input should be a valid dictionary"):
        load_config(write(tmp_path, "generation: 5\n"))


def test_all_errors_reported_at_once(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "retrieval:\n  top_k: 0\n  bm25:\n    k1: -1\n"))
    assert "retrieval.top_k" in str(info.value) and "retrieval.bm25.k1" in str(info.value)


@pytest.mark.parametrize(
    "text, message",
    [
        ("retrieval: [1, 2\n", r"exp\.yaml:\d+: invalid YAML"),
        ("- a\n- b\n", r"top level must be a mapping, got list"),
    ],
)
def test_bad_yaml_files(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "latin.yaml"
    bad.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="latin.yaml: not UTF-8 text"):
        load_config(bad)


def test_config_is_frozen():
    cfg = ExperimentConfig()
    with pytest.raises(Exception):
        cfg.retrieval.top_k = 3  # type: ignore[misc]


def test_apply_overrides_does_not_mutate_input():
    raw = {"retrieval": {"top_k": 3}}
    apply_overrides(raw, ["retrieval.top_k=4"])
    assert raw == {"retrieval": {"top_k": 3}}


@pytest.mark.parametrize("name", ["faithfulness_sentence.yaml", "audit_pdfs.yaml", "scifact_bm25.yaml"])
def test_example_configs_validate(name):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    cfg = load_config(root / "configs" / name)
    assert cfg.name == name.removesuffix(".yaml").replace("_", "-")
    # a dataset by name, or a path beside the repo's configs/ (relative to the file)
    assert cfg.data.path in ("hotpotqa", "scifact") or cfg.data.path == str(root / "data" / "pdfs")


def test_embedding_metrics_auto_follow_the_installed_package(monkeypatch):
    """``metrics.embedding: auto`` runs them where sentence-transformers is installed and skips them
    where it is not (``ragray[generate]`` alone); true and false are kept as set."""
    import importlib.util

    from ragray.config import load_config

    auto = load_config(None, []).metrics
    assert auto.embedding == "auto"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sentence_transformers" else real(name, *a))
    assert auto.embedding_on is False
    assert load_config(None, ["metrics.embedding=true"]).metrics.embedding_on is True
    monkeypatch.setattr(importlib.util, "find_spec", real)
    assert auto.embedding_on is (real("sentence_transformers") is not None)
    assert load_config(None, ["metrics.embedding=false"]).metrics.embedding_on is False
