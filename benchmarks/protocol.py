"""The evidence protocol every known-truth benchmark follows: a split that never moves, a
pre-registration committed before the test split is read, and each test read recorded.

- **Split.** An item is ``tune`` or ``test`` by a stable hash of its id alone
  (:func:`split_of`): enlarging a set, reordering it or running it in batches never moves an item.
  Items read before this protocol existed are listed by id in the benchmark's ``read_before`` file
  and are tune for good.
- **Pre-registration.** ``benchmarks/protocol/<benchmark>.json`` names each figure's definition,
  goal and the candidate settings, and the settings chosen on tune; it is committed before any
  test figure is computed. :func:`registered` returns it with the commit that added it.
- **Test reads.** :func:`record_read` appends the commit, date and what was read to the
  benchmark's ``test_reads`` list, which the results JSON carries; a figure defined after the
  first read is labelled ``post_hoc`` there and in the docs.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROTOCOL = REPO / "benchmarks" / "protocol"
#: one item in TUNE_SHARE goes to tune
TUNE_SHARE = 3


def split_of(item_id: str, read_before: frozenset[str] = frozenset()) -> str:
    """``tune`` or ``test`` for ``item_id``: tune when it was read before this protocol, else when
    ``sha256(item_id)`` is 0 modulo :data:`TUNE_SHARE`."""
    if item_id in read_before:
        return "tune"
    return "tune" if int(hashlib.sha256(item_id.encode()).hexdigest()[:12], 16) % TUNE_SHARE == 0 else "test"


def read_before(benchmark: str) -> frozenset[str]:
    """Ids of the items read before the protocol (tune for good)."""
    path = PROTOCOL / f"{benchmark}.read_before.json"
    return frozenset(json.loads(path.read_text())["ids"]) if path.exists() else frozenset()


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def registered(benchmark: str) -> dict[str, Any]:
    """The pre-registration, with ``commit`` and ``committed`` (date) of the commit that added it
    (empty where it is not committed yet)."""
    path = PROTOCOL / f"{benchmark}.json"
    if not path.exists():
        raise SystemExit(f"{path}: no pre-registration; write and commit it before reading the test split")
    reg = json.loads(path.read_text())
    rel = str(path.relative_to(REPO))
    log = _git("log", "--diff-filter=A", "--format=%h %cI", "--", rel).splitlines()
    commit, date = (log[-1].split() if log else ("", ""))
    return {**reg, "commit": commit, "committed": date}


def record_read(benchmark: str, what: str) -> list[dict[str, Any]]:
    """Append one test read (commit, UTC date, ``what``) to ``<benchmark>.test_reads.json`` and
    return every read so far. Refused when the pre-registration is not committed, or when the
    working tree's copy differs from the committed one."""
    reg = registered(benchmark)
    rel = str((PROTOCOL / f"{benchmark}.json").relative_to(REPO))
    if not reg["commit"] or _git("status", "--porcelain", "--", rel):
        raise SystemExit(f"{rel}: commit the pre-registration before the test split is read")
    path = PROTOCOL / f"{benchmark}.test_reads.json"
    reads = json.loads(path.read_text()) if path.exists() else []
    reads.append({"commit": _git("rev-parse", "--short", "HEAD"),
                  "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "what": what})
    path.write_text(json.dumps(reads, indent=2) + "\n")
    return reads


def test_reads(benchmark: str) -> list[dict[str, Any]]:
    path = PROTOCOL / f"{benchmark}.test_reads.json"
    return json.loads(path.read_text()) if path.exists() else []
