"""Recompute every published figure from the per-item records the repository keeps.

    python benchmarks/verify.py            # every check; one line per figure
    python benchmarks/verify.py --quiet    # differences and the count only
    python benchmarks/verify.py --only shared_evidence
    python benchmarks/verify.py --jobs 1      # one check at a time (default: one process per CPU)

Published figures: the generated blocks of README.md and docs/*.md, the figures README.md and
docs/trust.md state in prose, and the results JSON files at the top of ``benchmarks/results/``.
Each check (``benchmarks/checks/*.py``, registered with :func:`check`) recomputes its figures from
per-item records — never by reading the published number back — and yields one :class:`Figure`
per number: ``name: published = recomputed``. The run exits non-zero on any difference, on a check
that cannot run, and on a results JSON that no check covers (figures whose per-item records were
never kept live under ``benchmarks/results/archive/``, labelled so, and are not published evidence).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
CHECKS_DIR = REPO / "benchmarks" / "checks"
NUMBER = re.compile(r"[-+−]?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class Figure:
    """One published number and the same number recomputed from the records."""

    name: str
    published: Any
    recomputed: Any

    def agrees(self) -> bool:
        a, b = self.published, self.recomputed
        if isinstance(a, bool) or isinstance(b, bool) or not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
            return a == b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)

    def line(self) -> str:
        return f"{self.name}: {self.published!r} = {self.recomputed!r}" + ("" if self.agrees() else "   <-- DIFFERS")


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[], Iterable[Figure]]
    covers: tuple[str, ...]  # results files (relative to benchmarks/results) whose figures it recomputes
    slow: bool = False  # started first when checks run side by side


CHECKS: dict[str, Check] = {}


def check(name: str, *, covers: Iterable[str] = (), slow: bool = False
          ) -> Callable[[Callable[[], Iterable[Figure]]], Callable[[], Iterable[Figure]]]:
    """Register a check that recomputes ``covers`` (results files) and any docs figures; ``slow``
    (tens of seconds): started first when checks run side by side."""
    def register(fn: Callable[[], Iterable[Figure]]) -> Callable[[], Iterable[Figure]]:
        CHECKS[name] = Check(name, fn, tuple(covers), slow)
        return fn
    return register


# -- helpers the checks share ------------------------------------------------------------------


def leaves(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every scalar of a JSON value with its path (``a.b[3].c``)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from leaves(v, f"{prefix}[{i}]")
    else:
        yield prefix, obj


def compare_json(name: str, published: Any, recomputed: Any, skip: Iterable[str] = ()) -> list[Figure]:
    """One figure per scalar of ``published`` (paths under ``skip`` left out: provenance such as the
    machine), against the same path of ``recomputed``; a path missing there is a difference."""
    skip = tuple(skip)
    fresh = dict(leaves(recomputed))
    out = []
    for path, value in leaves(published):
        if any(path == s or path.startswith(s + ".") or path.startswith(s + "[") for s in skip):
            continue
        out.append(Figure(f"{name}:{path}", value, fresh.get(path, "<missing>")))
    published_paths = {p for p, _ in leaves(published)}
    out += [Figure(f"{name}:{p}", "<missing>", v) for p, v in fresh.items() if p not in published_paths
            and not any(p == s or p.startswith(s + ".") or p.startswith(s + "[") for s in skip)]
    return out


def read_json(rel: str) -> Any:
    return json.loads((RESULTS / rel).read_text(encoding="utf-8"))


def block(page: Path, begin: str, end: str) -> str:
    text = page.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise ValueError(f"{page.relative_to(REPO)}: block markers missing ({begin})")
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")


def compare_text(name: str, published: str, recomputed: str) -> list[Figure]:
    """Every number of a published text against the same position of the text regenerated from
    recomputed results; a text that differs elsewhere is one more difference."""
    a, b = NUMBER.findall(published), NUMBER.findall(recomputed)
    out = [Figure(f"{name}#{i + 1}", x, b[i] if i < len(b) else "<missing>") for i, x in enumerate(a)]
    out += [Figure(f"{name}#{i + 1}", "<missing>", y) for i, y in enumerate(b[len(a):], start=len(a))]
    if NUMBER.sub("#", published) != NUMBER.sub("#", recomputed):
        out.append(Figure(f"{name}:words", "the published text", "differs from the regenerated text"))
    return out


def compare_block(name: str, page: Path, begin: str, end: str, regenerated: str) -> list[Figure]:
    return compare_text(name, block(page, begin, end), regenerated.strip("\n"))


def claim(name: str, page: Path, sentence: str, recomputed: str) -> list[Figure]:
    """A figure stated in prose: ``sentence`` (with ``{}`` where the number stands) must be on
    ``page`` with ``recomputed`` (formatted as published) in it."""
    text = " ".join(page.read_text(encoding="utf-8").split())
    wanted = sentence.format(recomputed)
    if wanted in text:
        return [Figure(name, recomputed, recomputed)]
    head, _, tail = sentence.partition("{}")
    m = re.search(re.escape(head) + r"(.+?)" + re.escape(tail), text) if head or tail else None
    return [Figure(name, m.group(1) if m else "<sentence not found>", recomputed)]


# -- running --------------------------------------------------------------------------------------


def load_checks() -> None:
    for path in sorted(CHECKS_DIR.glob("*.py")):
        if path.stem != "__init__":
            importlib.import_module(f"benchmarks.checks.{path.stem}")


def uncovered() -> list[str]:
    covered = {c for chk in CHECKS.values() for c in chk.covers}
    return sorted(p.name for p in RESULTS.glob("*.json") if p.name not in covered)


@dataclass(frozen=True)
class Outcome:
    """One check's run: the lines it prints, its figures and those that differ, or why it failed."""

    name: str
    lines: tuple[str, ...]
    figures: int = 0
    differ: int = 0
    failed: bool = False


def run_check(name: str, quiet: bool) -> Outcome:
    """The check ``name`` run (in this process, or in a fresh worker process: it loads the checks)."""
    if name not in CHECKS:
        load_checks()
    try:
        figures = list(CHECKS[name].run())
    except Exception:  # noqa: BLE001 - a check that cannot run is reported, and fails the run
        return Outcome(name, (f"{name}: CANNOT RECOMPUTE\n{traceback.format_exc()}",), failed=True)
    bad = [f for f in figures if not f.agrees()]
    lines = [f.line() for f in (figures if not quiet else bad)]
    lines.append(f"== {name}: {len(figures)} figures recomputed, {len(bad)} differ")
    return Outcome(name, tuple(lines), len(figures), len(bad))


def outcomes(names: list[str], quiet: bool, jobs: int) -> Iterator[Outcome]:
    """Each check's outcome in ``names``' order; with ``jobs`` > 1 the checks run side by side in
    fresh worker processes (they read records and compute, nothing shared is written), the slow ones
    first. Spawned, not forked: a caller that already ran torch's threads (the test suite) cannot
    hand a worker a lock held by a thread that is not there. Workers see the module as imported,
    not as the caller may have patched it: ``--jobs 1`` runs in this process."""
    if jobs <= 1 or len(names) <= 1:
        yield from (run_check(name, quiet) for name in names)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(min(jobs, len(names)), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {name: pool.submit(run_check, name, quiet)
                   for name in sorted(names, key=lambda n: not CHECKS[n].slow)}
        yield from (futures[name].result() for name in names)


#: the BLAS kernels the published figures were computed with. OpenBLAS picks its kernels by CPU, and
#: its AVX-512 ones (``SkylakeX``) round the inner products of the Lasso's coordinate descent
#: differently from its AVX2 ones (``Haswell``, ``Zen``): on an AVX-512 CPU 12 ContextCite-style Lasso
#: figures (lasso_k1 LDS, k + 1 masks) moved at the 5th decimal (0.5500288 published, 0.5500366
#: there). Pinned for the checks' processes (before they load numpy) wherever a user has not chosen;
#: any x86-64 CPU with AVX2 then gives every figure to the last digit.
BLAS_KERNELS = {"OPENBLAS_CORETYPE": "Haswell"}


def pin_blas_kernels() -> None:
    """:data:`BLAS_KERNELS` into this process's environment (inherited by the spawned workers; this
    process's own numpy, if already loaded, keeps its kernels) on x86-64, where a user has not set them."""
    import platform

    if platform.machine().lower() in ("x86_64", "amd64"):
        for key, value in BLAS_KERNELS.items():
            os.environ.setdefault(key, value)


def main(argv: list[str] | None = None) -> int:
    pin_blas_kernels()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quiet", action="store_true", help="print differences and counts only")
    ap.add_argument("--only", nargs="*", help="run these checks only")
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                    help="checks run side by side (default: one per CPU; 1: one at a time)")
    args = ap.parse_args(argv)
    load_checks()
    total = differ = 0
    failed: list[str] = []
    names = [name for name in CHECKS if not args.only or name in args.only]
    for out in outcomes(names, args.quiet, args.jobs):
        total += out.figures
        differ += out.differ
        failed += [out.name] if out.failed else []
        print("\n".join(out.lines), flush=True)
    missing = [] if args.only else uncovered()
    for rel in missing:
        print(f"benchmarks/results/{rel}: no check recomputes it (per-item records, or archive it)")
    print(f"verify: {total} published figures recomputed from the records; {differ} differ; "
          f"{len(failed)} checks could not run; {len(missing)} results files uncovered")
    return 1 if differ or failed or missing else 0


if __name__ == "__main__":
    # the checks register with the module ``benchmarks.verify``; run as a script, this file is
    # ``__main__``, another module with its own (empty) CHECKS
    from benchmarks.verify import main as verify_main

    raise SystemExit(verify_main())
