"""The ``ragray.loads`` lines go to whatever stderr is when a model loads, not the first caller's."""

from __future__ import annotations

import io
import logging
import sys

from ragray.console import show_loads


def test_a_load_line_reaches_the_stderr_of_its_moment_after_the_first_one_closed(monkeypatch):
    logger = logging.getLogger("ragray.loads")
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    monkeypatch.setattr(logger, "propagate", True)
    first, later = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    show_loads()  # the first run of a process (an earlier test's capture, a closed notebook cell)
    logger.info("loading the generator one")
    first.close()
    monkeypatch.setattr(sys, "stderr", later)
    show_loads()  # a later run: the handler is already there, not added twice
    logger.info("loading the generator two")
    assert later.getvalue() == "ragray: loading the generator two\n"  # no '--- Logging error ---'
    assert len(logger.handlers) == 1


def test_no_progress_silences_bars_for_its_own_command_only(monkeypatch):
    """``--no-progress`` hides library bars through ``TQDM_DISABLE`` while its command runs; the next
    command of the same process (a notebook, a test) has its bars again."""
    import os

    from ragray.adapters import cli

    seen = []
    monkeypatch.setitem(cli.COMMANDS, "run", lambda args: seen.append(os.environ.get("TQDM_DISABLE")) or 0)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert cli.main(["run", "--no-progress"]) == 0
    assert cli.main(["run"]) == 0
    assert seen == ["1", None] and "TQDM_DISABLE" not in os.environ


def test_the_calls_bar_shows_though_tqdm_was_first_imported_under_no_progress():
    """tqdm reads ``TQDM_DISABLE`` once, at import: a process whose first command ran with
    ``--no-progress`` must still show the model-calls bar of a later command."""
    import os
    import subprocess

    code = (
        "import io, os\n"
        "import tqdm.auto, tqdm.std\n"  # imported while TQDM_DISABLE=1, as inside a --no-progress command
        "del os.environ['TQDM_DISABLE']\n"
        "import ragray.progress as p\n"
        "with p.calls_bar(True):\n"
        "    assert not p._BAR[-1].disable\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TQDM_DISABLE": "1"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_model_libraries_load_bars_are_off_unless_verbose(monkeypatch):
    """Issue 66: transformers' own "Loading weights 0/272" bar appeared among ragray's; it is off
    without -v, on with it, and a user's own setting wins."""
    import os

    from ragray.adapters.cli import quiet_third_party_bars

    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    quiet_third_party_bars(1)
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ
    quiet_third_party_bars(0)
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")
    quiet_third_party_bars(0)
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "0"


def test_a_load_line_is_a_line_of_its_own_while_a_bar_is_drawn(monkeypatch):
    """Issue 66: the load line came glued to the model-calls bar ("model calls: 0call [...]ragray:
    loading the generator ..."); tqdm now clears the bar, writes the line and redraws the bar."""
    import re

    from ragray.console import progress_bar

    logger = logging.getLogger("ragray.loads")
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    show_loads()
    with progress_bar(total=3, desc="model calls", file=sys.stderr, disable=False, mininterval=0) as bar:
        bar.update(1)
        logger.info("loading the generator smollm2")
        bar.update(1)
    lines = [re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", line).strip() for line in err.getvalue().splitlines()]
    assert "ragray: loading the generator smollm2" in lines  # its own line, after the bar was cleared


def test_transformers_gguf_conversion_bar_is_hidden_with_the_library_bars(monkeypatch):
    """Issue 66: the first run's "Converting and de-quantizing GGUF tensors" bar is transformers' plain
    tqdm, which ``HF_HUB_DISABLE_PROGRESS_BARS`` (set by the CLI unless -v) does not reach."""
    import importlib

    from ragray.generation.packaged import _library_bars_hidden

    gguf = importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    before = gguf.tqdm
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    with _library_bars_hidden():
        assert gguf.tqdm([1, 2]).disable
    assert gguf.tqdm is before
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")  # -v, or the user's own setting: shown
    with _library_bars_hidden():
        assert gguf.tqdm is before
