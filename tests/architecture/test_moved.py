"""The adapters moved under ragray.adapters; their old import paths still work for a release."""

import importlib
import importlib.util
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import ragray._moved as moved_paths
from ragray._moved import MOVED, REMOVED_IN, new_name


def _fresh(old: str) -> None:
    """As in a fresh process: the old path not imported yet, and not warned about."""
    for name in [m for m in sys.modules if m == old or m.startswith(old + ".")]:
        del sys.modules[name]
    moved_paths._WARNED.clear()


@pytest.mark.parametrize("old", [*MOVED, "ragray.serving.app", "ragray.sweep.runner", "ragray.commands.parser"])
def test_an_old_path_imports_the_moved_module_untouched_with_one_warning(old):
    new = new_name(old)
    assert new.startswith("ragray.adapters.") and new.endswith(old.removeprefix("ragray"))
    moved = importlib.import_module(new)
    spec, loader, path = moved.__spec__, moved.__loader__, getattr(moved, "__path__", None)
    _fresh(old)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}; the old path is removed in ragray {REMOVED_IN}"):
        module = importlib.import_module(old)
    assert module is moved and module.__name__ == new  # one module: its classes and registries shared
    # the real module untouched: its own spec (name, loader, origin), loader and search path
    assert module.__spec__ is spec and module.__spec__.name == new and module.__loader__ is loader
    assert getattr(module, "__path__", None) == path
    assert importlib.util.find_spec(new) is spec
    del sys.modules[old]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert importlib.import_module(old) is moved  # warned once per path: the second import is quiet


def test_the_removal_release_is_in_the_changelog():
    changelog = (Path(__file__).resolve().parents[2] / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {REMOVED_IN}" in changelog
    section = changelog.split(f"## {REMOVED_IN}", 1)[1].split("\n## ", 1)[0]
    assert all(old in section for old in MOVED)


def test_a_deprecation_warning_from_ragrays_own_code_fails_the_suite():
    """pytest's warning filters turn a DeprecationWarning raised from ragray's code into an error (a
    use of an old path or a deprecated API in ragray itself), and leave other packages' alone."""
    config = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    assert '"error::DeprecationWarning:ragray' in config
    code = compile("import warnings\nwarnings.warn('old', DeprecationWarning)\n", "ragray_probe", "exec")
    with pytest.raises(DeprecationWarning):
        exec(code, {"__name__": "ragray.probe"})


def test_other_names_are_not_taken_over():
    assert new_name("ragray.pipeline") is None and new_name("ragray.cli_tools") is None
    assert new_name("ragray.adapters.cli") is None
    with pytest.raises(ModuleNotFoundError, match="ragray.adapters.serving.nothing"):
        importlib.import_module("ragray.serving.nothing")


def test_python_dash_m_on_an_old_path_runs_the_moved_module():
    out = subprocess.run([sys.executable, "-W", "always::DeprecationWarning", "-m", "ragray.cli", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("usage: ragray") and "ragray.cli moved to ragray.adapters.cli" in out.stderr
