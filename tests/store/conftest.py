"""A fresh history database per test (its folder made by History itself)."""

import pytest

from ragray.store.history import History


@pytest.fixture()
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'db' / 'history.sqlite'}"


@pytest.fixture()
def history(url):
    h = History(url)
    yield h
    h.close()
