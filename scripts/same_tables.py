"""Before/after check of a refactoring: the same commands give the same tables.

    python scripts/same_tables.py --base <commit> [--work /tmp/same-tables] [--questions 4]

Checks out ``--base`` in a git worktree, then runs the same commands on the packaged demo set
with the packaged SmolLM2 in fp32 (deterministic on one machine) once with the base tree and once
with the working tree, each in its own folder with its own caches (``$RAGRAY_CACHE``: nothing one
tree computed is read back by the other):

- ``ragray run --limit N`` (influence, log-prob by default) and ``--set influence.mode=generate`` (``loo``);
- ``ragray run --limit N/2`` with the surrogate beside the influence and the LDS and top-k checks
  (every measure and control), in jsd mode with the checks, and in surrogate mode;
- ``ragray interpret --limit N/2`` (faithfulness: importance, deletion arms, cases, curves);
- ``ragray audit`` (the integrity audit of the demo's retrieval) and ``ragray retrieve``;
- ``ragray score`` of a few records written here (answer-quality metrics);
- ``ragray sweep`` of two trials (two prompt templates) on N/2 questions.

Every Parquet table of every run directory (sweep trials and leaderboard included) must be equal
cell for cell (same schema, same values, floats bit for bit), and every ``summary.json`` and
``audit_report.json`` equal key for key and in the same key order, except what measures time or
names a path: the columns and keys in ``VOLATILE``. ``--allow-added`` lists (does not fail) columns a
table gained at its end, summary keys and whole tables only the working tree has; ``--float-tolerance X``
counts floats within X of each other as equal *within X*, listed apart from the bit-for-bit equal ones
(for float32 noise from a change of batching, e.g. an encoder that now embeds one text per pass).
``--work-set KEY=VALUE`` (repeatable) runs the working tree's commands that read a config with that
override, holding a default the change moved on purpose at the base's value, and
``--renamed OLD=NEW`` (repeatable) counts a value ``OLD`` in the base that is ``NEW`` in the working
tree as equal (in a summary, a key too: the new name in the old one's place, so that an old key the
working tree keeps after it is an added key): both are listed in the result, never silent.
Exit 0 when everything matches; else the differences, per file, and exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import shutil
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

#: columns / summary keys that measure wall time, hold a timestamp, or name a run's path
VOLATILE = frozenset({
    "seconds", "seconds_surrogate", "seconds_checks", "latency_s", "wall_seconds", "trial_seconds", "time_total_s",
    "timestamp",
    "time_this_iter_s", "date", "started", "finished", "created_at", "out", "path", "logdir",
    "trial_dir", "run_dir", "hostname", "node_ip", "pid", "mean_seconds", "seconds_per_question",
    "calls_per_second", "mean_latency_s",
    # where a trial ran: the Ray node's address and id differ between two Ray sessions
    "node", "node_id", "placement", "gpu_ids",
    # cache hits depend on what ran before on the machine (the caches are shared), not on the code
    "cache",
    # the engine's work (forward passes, tokens ...): a call answered from the call cache costs none
    "forward_passes", "host_syncs", "tokens_computed", "tokens_minimum", "padding_tokens", "engine",
})
VOLATILE_PREFIXES = ("cache_",)


def volatile(name: str) -> bool:
    return name in VOLATILE or name.startswith(VOLATILE_PREFIXES)

#: outputs of "your own pipeline" for ``ragray score`` (written by this script, about the demo's archipelago)
SCORE_RECORDS = [
    {"id": "s1", "question": "Which ferry sails to Kell?", "answer": "The Tern",
     "contexts": ["The ferry to Kell is the Tern.", "Puffins nest on the stacks."], "answers": ["Tern"],
     "latency_s": 1.2, "prompt_tokens": 100, "completion_tokens": 5, "model": "m"},
    {"id": "s2", "question": "Where do puffins nest?", "answer": "Bread is baked on Tuesdays.",
     "passages": [{"id": "ferry", "text": "The ferry sails at noon."},
                  {"id": "birds", "text": "Puffins nest on the north stacks."}],
     "ground_truth": "on the north stacks", "gold_passage_ids": ["birds"]},
]

SWEEP_SPEC = textwrap.dedent("""\
    name: same-tables
    set: [data.limit={n}]
    generation: {{template: [numbered, plain]}}
    execution: {{concurrency: 1, cpus_per_trial: 1}}
""")


#: the commands that read an experiment config (``--work-set`` reaches these)
CONFIGURED = ("run", "run_generate", "run_checks", "run_jsd", "run_surrogate", "interpret", "sweep")


def commands(tree: Path, out: Path, n: int, overrides: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """The commands, by name; ``overrides`` (``KEY=VALUE``) go to each of ``CONFIGURED`` as ``--set``."""
    half = max(1, n // 2)
    spec = out / "sweep.yaml"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(SWEEP_SPEC.format(n=half))
    named = _commands(out, n, half, spec)
    sets = [arg for kv in overrides for arg in ("--set", kv)]
    return {name: [*args, *sets] if name in CONFIGURED else args for name, args in named.items()}


def _commands(out: Path, n: int, half: int, spec: Path) -> dict[str, list[str]]:
    records = out / "score_records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in SCORE_RECORDS), encoding="utf-8")
    return {
        "run": ["run", "--limit", str(n), "--out", str(out / "run"), "--no-progress"],
        # the old name of the loo mode: both trees read it (the working tree as loo, warning)
        "run_generate": ["run", "--limit", str(n), "--set", "influence.mode=generate",
                         "--out", str(out / "run_generate"), "--no-progress"],
        # the measures beside the influence: the surrogate on its own subsets, every measure and
        # control through the LDS and top-k checks (the default measure, and jsd's scorer)
        "run_checks": ["run", "--limit", str(half), "--set", "influence.masks=8", "--set", "influence.check_subsets=8",
                       "--set", "influence.check_top_k=[1,2]", "--out", str(out / "run_checks"), "--no-progress"],
        "run_jsd": ["run", "--limit", str(half), "--set", "influence.mode=jsd", "--set", "influence.check_subsets=8",
                    "--set", "influence.check_top_k=[1]", "--out", str(out / "run_jsd"), "--no-progress"],
        "run_surrogate": ["run", "--limit", str(half), "--set", "influence.mode=surrogate",
                          "--out", str(out / "run_surrogate"), "--no-progress"],
        "interpret": ["interpret", "--limit", str(half), "--out", str(out / "interpret"), "--no-progress"],
        "audit": ["audit", "--out", str(out / "audit"), "--no-progress"],
        "retrieve": ["retrieve", "--out", str(out / "retrieve"), "--no-progress"],
        "score": ["score", "--records", str(records), "--out", str(out / "score"), "--no-progress"],
        "sweep": ["sweep", str(spec), "--out", str(out / "sweep")],
    }


#: the CLI of the tree it runs in (before issue 45 it lived at ragray.cli; asked by file, as an
#: editable install's finder would answer an import the tree lacks from the installed checkout)
_CLI = ("import pathlib, sys\nif pathlib.Path('ragray/adapters/cli.py').is_file():\n"
        "    from ragray.adapters.cli import main\nelse:\n    from ragray.cli import main\nsys.exit(main())")


def run_all(tree: Path, out: Path, n: int, keep: bool, overrides: tuple[str, ...] = ()) -> None:
    """Runs the commands with ``tree``'s code into ``out`` (``keep``: skip those already there)."""
    # each tree its own caches: a model call, index or embedding the other tree cached would be read
    # back instead of computed, and a change of the engine's numbers would never show
    cache = out.with_name(out.name + "-cache")
    if not keep:
        for folder in (out, cache):
            if folder.exists():
                shutil.rmtree(folder)
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "RAGRAY_CPU_BF16": "0", "RAY_DATA_DISABLE_PROGRESS_BARS": "1", "RAGRAY_CACHE": str(cache)}
    for name, args in commands(tree, out, n, overrides).items():
        if (out / name).exists():
            print(f"  {name}: kept from an earlier call", flush=True)
            continue
        print(f"  ragray {' '.join(args)}", flush=True)
        proc = subprocess.run([sys.executable, "-c", _CLI, *args], cwd=tree, env=env, capture_output=True, text=True)
        if proc.returncode not in ((0, 1) if name == "audit" else (0,)):  # audit exits 1 when a query FAILs
            raise SystemExit(f"{name} failed in {tree} (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def _strip(value: Any, out: Path) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v, out) for k, v in value.items() if not volatile(k)}
    if isinstance(value, list):
        return [_strip(v, out) for v in value]
    if isinstance(value, str):
        return value.replace(str(out), "<out>")
    return value


def table_differences(a: Path, b: Path, out_a: Path, out_b: Path, allow_added: bool = False,
                      tolerance: float = 0.0) -> list[str]:
    """How the Parquet tables ``a`` and ``b`` differ, ignoring ``VOLATILE`` columns (empty: equal).
    ``allow_added``: columns only ``b`` has, after all of ``a``'s, are reported, not counted.
    ``tolerance``: float cells at most this far apart are noted in ``NEAR``, not counted."""
    import pyarrow.parquet as pq

    ta, tb = pq.read_table(a), pq.read_table(b)
    keep = [c for c in ta.column_names if not volatile(c)]
    now = [c for c in tb.column_names if not volatile(c)]
    if allow_added and now[: len(keep)] == keep and len(now) > len(keep):
        ADDED.setdefault(", ".join(now[len(keep):]), []).append(a.name)
        now = keep
    if now != keep:
        return [f"columns differ: {ta.column_names} vs {tb.column_names}"]
    diffs = []
    if ta.num_rows != tb.num_rows:
        diffs.append(f"{ta.num_rows} rows vs {tb.num_rows}")
    for c in keep:
        if ta.schema.field(c).type != tb.schema.field(c).type:
            diffs.append(f"{c}: type {ta.schema.field(c).type} vs {tb.schema.field(c).type}")
            continue
        va = _strip(ta.column(c).to_pylist(), out_a)
        vb = _strip(tb.column(c).to_pylist(), out_b)
        bad = [i for i, (x, y) in enumerate(zip(va, vb))
               if x != y and not (x != x and y != y) and not _renamed(x, y, f"{a.relative_to(out_a)}:{c}")]
        near = [abs(va[i] - vb[i]) for i in bad if _close(va[i], vb[i], tolerance)]
        if bad and len(near) == len(bad):
            NEAR.setdefault(c, []).append((str(a.relative_to(out_a)), len(bad), max(near)))
            continue
        if bad:
            diffs.append(f"{c}: {len(bad)} rows differ, first row {bad[0]}: {va[bad[0]]!r} vs {vb[bad[0]]!r}")
    return diffs


#: ``--renamed``: a base value -> the working tree's name for it
RENAMES: dict[Any, Any] = {}
#: (old, new, where) -> how many values were equal under that rename
RENAMED: dict[tuple[Any, Any, str], int] = {}


def _renamed(x: Any, y: Any, where: str) -> bool:
    """``x`` in the base is ``y`` under one of ``--renamed`` (counted in ``RENAMED``)."""
    if isinstance(x, str) and RENAMES.get(x) == y:
        RENAMED[(x, y, where)] = RENAMED.get((x, y, where), 0) + 1
        return True
    return False


def _rename_json(a: Any, b: Any, where: str, key: str = "") -> Any:
    """The base's JSON ``a`` under the working tree's names where ``b`` uses them: a key ``--renamed``
    names becomes its new name, in its place, where ``b`` has the new one; a string value, where its
    twin in ``b`` is the new one (each counted in ``RENAMED``)."""
    def new(name: Any, found: bool, at: str) -> Any:
        if found and isinstance(name, str) and name in RENAMES:
            RENAMED[(name, RENAMES[name], at)] = RENAMED.get((name, RENAMES[name], at), 0) + 1
            return RENAMES[name]
        return name

    if isinstance(a, dict) and isinstance(b, dict):
        out = {}
        for k, v in a.items():
            at = f"{key}.{k}" if key else k
            k2 = new(k, RENAMES.get(k) in b, f"{where}:{at} (key)")
            out[k2] = _rename_json(v, b.get(k2), where, at)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [_rename_json(x, y, where, key) for x, y in zip(a, b)]
    return new(a, isinstance(a, str) and b == RENAMES.get(a), f"{where}:{key}")


#: columns the working tree added (``--allow-added``) -> the tables that gained them
ADDED: dict[str, list[str]] = {}
#: column or summary key -> (file, cells that differ, largest |difference|), each within ``--float-tolerance``
NEAR: dict[str, list[tuple[str, int, float]]] = {}


def _close(x: Any, y: Any, tolerance: float) -> bool:
    """Two numbers (not bools) at most ``tolerance`` apart; False for anything else or tolerance 0."""
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y))
    return tolerance > 0 and numbers and abs(x - y) <= tolerance


def _near_json(a: Any, b: Any, tolerance: float, where: str, key: str = "") -> Any:
    """``b`` with every number within ``tolerance`` of its twin in ``a`` replaced by ``a``'s (noted in ``NEAR``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _near_json(a[k], v, tolerance, where, f"{key}.{k}" if key else k) if k in a else v
                for k, v in b.items()}
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [_near_json(x, y, tolerance, where, key) for x, y in zip(a, b)]
    if a != b and _close(a, b, tolerance):
        NEAR.setdefault(key, []).append((where, 1, abs(a - b)))
        return a
    return b


def compare(out_a: Path, out_b: Path, allow_added: bool = False, tolerance: float = 0.0) -> dict[str, list[str]]:
    """Every table and summary under ``out_a`` against its twin under ``out_b``."""
    problems: dict[str, list[str]] = {}
    files_a = {p.relative_to(out_a) for p in out_a.rglob("*") if compared(p)}
    files_b = {p.relative_to(out_b) for p in out_b.rglob("*") if compared(p)}
    for rel in sorted(files_a ^ files_b):
        if allow_added and rel in files_b:
            NEW_FILES.append(str(rel))
            continue
        problems[str(rel)] = ["only in " + ("base" if rel in files_a else "working tree")]
    for rel in sorted(files_a & files_b):
        if rel.suffix == ".parquet":
            diffs = table_differences(out_a / rel, out_b / rel, out_a, out_b, allow_added, tolerance)
        else:
            sb = _strip(json.loads((out_b / rel).read_text()), out_b)
            sa = _rename_json(_strip(json.loads((out_a / rel).read_text()), out_a), sb, str(rel))
            if allow_added:
                sb = _drop_added(sa, sb, str(rel))
            sb = _near_json(sa, sb, tolerance, str(rel))
            diffs = [] if sa == sb else [_first_difference(sa, sb)]
            if not diffs and (where := _order_difference(sa, sb)):
                diffs = [f"same keys in another order at {where}"]
        if diffs:
            problems[str(rel)] = diffs
    return problems


#: tables and summaries only the working tree has (``--allow-added``)
NEW_FILES: list[str] = []

#: the JSON files compared besides the tables
JSON_FILES = ("summary.json", "audit_report.json")


def compared(path: Path) -> bool:
    return path.suffix == ".parquet" or path.name in JSON_FILES


def _order_difference(a: Any, b: Any, key: str = "") -> str | None:
    """Where two equal JSON values first list a mapping's keys in another order (None: nowhere)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return f"{key or '<root>'}: {list(a)} vs {list(b)}"
        return next((w for k in a if (w := _order_difference(a[k], b[k], f"{key}.{k}" if key else k))), None)
    if isinstance(a, list) and isinstance(b, list):
        return next((w for i, (x, y) in enumerate(zip(a, b)) if (w := _order_difference(x, y, f"{key}[{i}]"))),
                    None)
    return None


def _drop_added(before: Any, now: Any, where: str = "", key: str = "") -> Any:
    """``now`` without the dict keys ``before`` lacks (``--allow-added``: new summary keys, each
    noted in ``ADDED_KEYS``)."""
    if isinstance(before, dict) and isinstance(now, dict):
        for k in now:
            if k not in before:
                ADDED_KEYS.setdefault(f"{key}.{k}" if key else k, []).append(where)
        return {k: _drop_added(before[k], v, where, f"{key}.{k}" if key else k) for k, v in now.items() if k in before}
    if isinstance(before, list) and isinstance(now, list) and len(before) == len(now):
        return [_drop_added(x, y, where, key) for x, y in zip(before, now)]
    return now


#: summary keys only the working tree has (``--allow-added``) -> the files that gained them
ADDED_KEYS: dict[str, list[str]] = {}


def _first_difference(a: Any, b: Any, key: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in dict.fromkeys([*a, *b]):
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{key}.{k}" if key else str(k))
    return f"{key or '<root>'}: {a!r} vs {b!r}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the commit before the change (e.g. a tag or a hash)")
    ap.add_argument("--work", default="/tmp/same-tables", help="worktree and run folders (kept between calls)")
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--compare-only", action="store_true", help="compare the folders of an earlier call, run nothing")
    ap.add_argument("--allow-added", action="store_true",
                    help="columns (at a table's end), summary keys and files only the working tree has are listed, "
                         "not failed")
    ap.add_argument("--float-tolerance", type=float, default=0.0,
                    help="floats at most this far apart are listed as equal within it, not failed (default 0: bit for bit)")
    ap.add_argument("--work-set", action="append", default=[], metavar="KEY=VALUE",
                    help="run the working tree's configured commands with --set KEY=VALUE: a default the change "
                         "moved on purpose, held at the base's value (repeatable; listed in the result)")
    ap.add_argument("--renamed", action="append", default=[], metavar="OLD=NEW",
                    help="a value (in a summary, a key too) OLD in the base and NEW in the working tree counts "
                         "as equal (repeatable; listed)")
    args = ap.parse_args()
    for pair in args.renamed:
        old, sep, new = pair.partition("=")
        if not (sep and old and new):
            ap.error(f"--renamed {pair!r}: expected OLD=NEW")
        RENAMES[old] = new
    for pair in args.work_set:
        if "=" not in pair:
            ap.error(f"--work-set {pair!r}: expected KEY=VALUE")
    work = Path(args.work)
    base = work / "base-tree"
    commit = subprocess.run(["git", "rev-parse", args.base], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    if not base.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(base), commit], cwd=REPO, check=True)
    out_a, out_b = work / f"out-{commit[:10]}", work / "out-working-tree"
    if not args.compare_only:
        print(f"base {commit[:10]}:", flush=True)
        run_all(base, out_a, args.questions, keep=True)
        print("working tree:", flush=True)
        run_all(REPO, out_b, args.questions, keep=False, overrides=tuple(args.work_set))
    problems = compare(out_a, out_b, args.allow_added, args.float_tolerance)
    n = sum(1 for p in out_a.rglob("*") if compared(p))
    near_files = {f for cells in NEAR.values() for f, _, _ in cells}
    for rel, diffs in problems.items():
        print(f"DIFFERENT {rel}")
        for d in diffs:
            print(f"    {d}")
    for columns, tables in ADDED.items():
        print(f"added (allowed): {columns}  in {len(tables)} table(s): {', '.join(sorted(set(tables)))}")
    for key, files in ADDED_KEYS.items():
        print(f"added (allowed): summary key {key}  in {len(files)} file(s): {', '.join(sorted(set(files)))}")
    for rel in NEW_FILES:
        print(f"added (allowed): {rel}")
    for pair in args.work_set:
        print(f"held at the base's value (--work-set): {pair}")
    for (old, new, where), count in RENAMED.items():
        print(f"renamed (allowed): {old!r} -> {new!r}: {count} value(s) in {where}")
    for column, cells in NEAR.items():
        print(f"within {args.float_tolerance:g}: {column}: {sum(k for _, k, _ in cells)} values in {len(cells)} file(s), "
              f"largest |difference| {max(d for _, _, d in cells):.2g}")
    exact = n - len(problems) - len(near_files - set(problems))
    print(f"{n - len(problems)} of {n} tables and summaries equal (volatile columns ignored: timings, paths)"
          + (f": {exact} bit for bit, {n - len(problems) - exact} within {args.float_tolerance:g}" if NEAR else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
