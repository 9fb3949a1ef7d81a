"""The suite's cache isolation (tests/_cache_root.py): a process a test starts gets the test's own call
cache, never the tester's, while converted models stay shared."""

import os
import subprocess
import sys
from pathlib import Path

from tests._cache_root import SHARED, real_cache_root


def test_a_process_a_test_starts_has_the_tests_own_call_cache_and_the_testers_models():
    code = ("from ragray.cache.calls import calls_path; from ragray.cache.embeddings import embeddings_path; "
            "from ragray.paths import cache_root; "
            "print(calls_path(None)); print(embeddings_path(None)); print((cache_root() / 'models').resolve())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    calls, embeddings, models = (Path(line) for line in done.stdout.split())
    own = Path(os.environ["RAGRAY_CACHE"])
    assert calls.parent == own and embeddings.parent == own
    assert own != real_cache_root() and not calls.exists(), "a new, empty call cache"
    assert models == (real_cache_root() / "models").resolve(), "converted models shared with the tester's cache"
    assert sorted(p.name for p in own.iterdir() if p.is_symlink()) == sorted(SHARED)


def test_the_cache_root_is_a_temporary_folder_of_this_session(tmp_path_factory):
    seen = Path(os.environ["RAGRAY_CACHE"])
    assert seen.is_relative_to(tmp_path_factory.getbasetemp()), "under this session's temporary folders"
