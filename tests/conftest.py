"""Shared test setup: no network for Hugging Face, and the real-data folder beside the checkout."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Tests never touch the network: make HF libraries fail fast instead of trying the hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# generation.dtype auto stays float32 on every CPU: reference-equality tests compare fp32 numbers
os.environ.setdefault("RAGRAY_CPU_BF16", "0")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _own_call_cache(tmp_path_factory, monkeypatch):
    """Each test its own persistent call cache (``cache.calls``, and ``cache.embeddings``): a call one test paid for is never
    served to another, so tests that count calls or time them see what they ran (a config's own
    ``cache.dir`` still decides for itself)."""
    root = tmp_path_factory.mktemp("call-cache")
    monkeypatch.setattr("ragray.cache.calls.cache_root", lambda: root)
    monkeypatch.setattr("ragray.cache.embeddings.cache_root", lambda: root)  # and its answer-metric embeddings


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
def start_ray():
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
        # and trials and actors record runs there (never the tester's ~/.local/share/ragray)
        home = tempfile.mkdtemp(prefix="ragray-home-")
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                 object_store_memory=200 * 2**20, _temp_dir=temp_dir, runtime_env={"env_vars": {"RAGRAY_HOME": home}},
                 **({"num_gpus": num_gpus} if num_gpus else {}))

    return start
