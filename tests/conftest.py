"""Shared test setup: no network for Hugging Face, and the real-data folder beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests._cache_root import own_cache_root, real_cache_root

# Tests never touch the network: make HF libraries fail fast instead of trying the hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# generation.dtype auto is float32 on every CPU, and a tester's RAGRAY_CPU_BF16=1 must not make it bf16:
# reference-equality tests compare fp32 numbers
os.environ.setdefault("RAGRAY_CPU_BF16", "0")
real_cache_root()  # the tester's cache, resolved before any test sets $RAGRAY_CACHE

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _own_call_cache(tmp_path_factory, monkeypatch):
    """Each test its own persistent call cache (``cache.calls``) and answer-metric embeddings, in
    this process and in every process it starts (``$RAGRAY_CACHE``, :mod:`tests._cache_root`): a call
    one test (or a CI step, or the tester) paid for is never served to another, so tests that count
    calls or time them see what they ran, and a subprocess running the packaged model runs it (a
    config's own ``cache.dir`` still decides for itself). Converted models, indexes and retrievals
    stay shared."""
    monkeypatch.setenv("RAGRAY_CACHE", str(own_cache_root(tmp_path_factory.mktemp("cache"))))


@pytest.fixture(autouse=True)
def _own_history(tmp_path_factory, monkeypatch):
    """Each test its own ragray data folder (the default run history lives there), never the
    tester's ``~/.local/share/ragray``."""
    monkeypatch.setenv("RAGRAY_HOME", str(tmp_path_factory.mktemp("ragray-home")))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (real evaluation sets, see its README); skips when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA} (it sits beside the checkout in CI)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def minilm():
    """The packaged all-MiniLM-L6-v2 on CPU, loaded once for the whole session."""
    from ragray.encoders import SentenceEncoder

    return SentenceEncoder("minilm", "cpu", cache=False)


class CountingEncoder:
    """Passes ``encode`` through to an encoder and records every call's texts."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def encode(self, texts, normalize=True, cache=False):
        self.calls.append(list(texts))
        return self.inner.encode(texts, normalize=normalize, cache=cache)


@pytest.fixture(scope="session")
def counting_encoder():
    """The :class:`CountingEncoder` class (test modules cannot import conftest)."""
    return CountingEncoder


@pytest.fixture(scope="session")
def make_pdf():
    """``make_pdf(path, pages)``: a real PDF (reportlab) with one text line per entry on each page."""
    canvas = pytest.importorskip("reportlab.pdfgen.canvas")

    def make(path: Path, pages: list[list[str]]) -> Path:
        pdf = canvas.Canvas(str(path))
        for lines in pages or [[]]:
            y = 780
            for line in lines:
                pdf.drawString(72, y, line)
                y -= 16
            pdf.showPage()
        pdf.save()
        return path

    return make


@pytest.fixture(scope="session")
def start_ray(tmp_path_factory):
    """``start_ray(temp_dir)``: an in-process Ray of 2 CPUs for one test module (ENV.md settings).

    ``address="local"`` so a cluster some ``ray start`` recorded in /tmp/ray is never joined; a
    short ``temp_dir`` per module (AF_UNIX paths); the module shuts it down with ``ray.shutdown()``.
    """
    import ray

    def start(temp_dir: str, num_gpus: int = 0) -> None:
        """``num_gpus``: fake GPUs (Ray's resource only: torch still sees none), as ``ray start --num-gpus``."""
        for key, value in {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled",
                           "RAY_USAGE_STATS_ENABLED": "0"}.items():
            os.environ.setdefault(key, value)
        # the workers' own data folder: a module's Ray starts before any test's RAGRAY_HOME is set,
        # and trials and actors record runs there (never the tester's ~/.local/share/ragray); and their
        # own call cache (tests._cache_root), shared by the module's tests but no one else
        # (under pytest's temporary folders, which it prunes, as the tests' own)
        own = {"RAGRAY_HOME": str(tmp_path_factory.mktemp("ray-home")),
               "RAGRAY_CACHE": str(own_cache_root(tmp_path_factory.mktemp("ray-cache")))}
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                 object_store_memory=200 * 2**20, _temp_dir=temp_dir, runtime_env={"env_vars": own},
                 **({"num_gpus": num_gpus} if num_gpus else {}))

    return start
