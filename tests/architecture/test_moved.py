"""The adapters moved under ragray.adapters; their old import paths still work for a release."""

import importlib
import subprocess
import sys

import pytest

from ragray._moved import MOVED, new_name


@pytest.mark.parametrize("old", [*MOVED, "ragray.serving.app", "ragray.sweep.runner", "ragray.commands.parser"])
def test_an_old_path_imports_the_moved_module_with_a_warning(old):
    new = new_name(old)
    assert new.startswith("ragray.adapters.") and new.endswith(old.removeprefix("ragray"))
    moved = importlib.import_module(new)
    for name in [m for m in sys.modules if m == old or m.startswith(old + ".")]:
        del sys.modules[name]  # as in a fresh process
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is moved and module.__name__ == new  # one module: its classes and registries shared


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
