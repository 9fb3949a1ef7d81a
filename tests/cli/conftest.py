"""Fixtures shared by the CLI tests."""

import pytest


@pytest.fixture()
def db(tmp_path):
    """``--set history.url=...`` for a fresh SQLite file, and the URL itself."""
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    return ["--set", f"history.url={url}"], url
