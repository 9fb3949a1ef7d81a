"""Shared test setup: no network for Hugging Face, and the real-data folder beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests never touch the network: make HF libraries fail fast instead of trying the hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (real evaluation sets, see its README); skips when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA} (it sits beside the checkout in CI)")
    return SHARED_DATA
