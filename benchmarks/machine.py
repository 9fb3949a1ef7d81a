"""Machine and version facts recorded beside every benchmark result."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_key() -> str:
    """The CPU as far as a model's fp32 kernels can tell: model name, widest vector ISA and torch's
    version (greedy answers decoded on an AVX-512 Xeon and an AVX2 EPYC differ; measured in
    benchmarks/results/tracing.json)."""
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    isa = next((f for f in ("amx_tile", "avx512_bf16", "avx512f", "avx2") if f in flags), "base")
    try:
        torch = md.version("torch")
    except md.PackageNotFoundError:
        torch = None
    return f"{_cpu_model()} [{isa}] torch {torch}"


def _commit() -> str:
    """HEAD's short hash; ``RAGRAY_COMMIT`` where the tree travelled without its ``.git`` (the lent
    GPU machine gets a copy of the working tree only)."""
    if os.environ.get("RAGRAY_COMMIT"):
        return os.environ["RAGRAY_COMMIT"]
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine_info(packages: tuple[str, ...] = ()) -> dict[str, Any]:
    versions = {}
    for name in ("ragray", "numpy", "scipy", *packages):
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": _commit(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
    }


def save_result(path: str | Path, result: dict[str, Any]) -> Path:
    """Write a benchmark's result JSON (indented, parents created); returns the path."""
    import json

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return out


def write_block(page: Path, begin: str, end: str, block: str) -> None:
    """Replace what stands between the ``begin`` and ``end`` markers of ``page`` with ``block``
    (a generated docs block; the markers must be there)."""
    text = page.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise SystemExit(f"{page}: the markers {begin!r} ... {end!r} are missing")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    page.write_text(f"{head}{begin}\n{block}\n{end}{tail}", encoding="utf-8")
