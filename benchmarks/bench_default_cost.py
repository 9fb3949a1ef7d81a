"""What README command 1 (``ragray run --limit 12``: the demo's first 12 questions on the packaged
SmolLM2, at defaults) costs with the working tree against a base commit, back to back on one machine.

    python benchmarks/bench_default_cost.py --base <commit> [--limit 12] [--rounds 2]

Each round runs the base, then the working tree (the second round the other way round, so a slower
start or a warmer disk favours neither), each in a fresh folder with its own empty cache directory
(nothing is served from an earlier call), through the CLI in a subprocess, timed from start to exit
(model load included). Writes ``benchmarks/results/default_cost.json``: wall seconds per run, the
ratio of the means, and per run the calls and seconds per question from its summary.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import REPO, machine_info, save_result

RESULT = REPO / "benchmarks" / "results" / "default_cost.json"


def timed_run(tree: Path, work: Path, limit: int) -> dict[str, Any]:
    """``ragray run --limit N`` with ``tree``'s code in ``work``; wall seconds and the summary's counts."""
    work.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "RAGRAY_CACHE": str(work / "cache"), "XDG_CACHE_HOME": str(work / "xdg")}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", "import sys; from ragray.adapters.cli import main; sys.exit(main())",
                           "run", "--limit", str(limit), "--out", str(work / "run"), "--no-progress"],
                          cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"ragray run failed with {tree}:\n{proc.stderr[-3000:]}")
    summary = json.loads((work / "run" / "summary.json").read_text())
    return {"wall_s": round(wall, 2), "n_calls": summary.get("n_calls"), "influence_mode": summary.get("influence_mode"),
            "precision": summary.get("precision"), "n_measured": summary.get("n_measured"),
            "states": summary.get("states"), "console_head": proc.stdout.splitlines()[:16]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", args.base], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    root = Path(tempfile.mkdtemp(prefix="ragray-cost-"))
    base = root / "base"
    subprocess.run(["git", "worktree", "add", "--detach", str(base), commit], cwd=REPO, check=True,
                   capture_output=True)
    runs: dict[str, list[dict[str, Any]]] = {"base": [], "work": []}
    try:
        for r in range(args.rounds):
            order = ("base", "work") if r % 2 == 0 else ("work", "base")
            for name in order:
                got = timed_run(base if name == "base" else REPO, root / f"{name}-{r}", args.limit)
                runs[name].append(got)
                print(f"round {r + 1} {name}: {got['wall_s']} s ({got['n_calls']} calls)", flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO, capture_output=True)
    mean = {k: sum(x["wall_s"] for x in v) / len(v) for k, v in runs.items()}
    result = {"benchmark": "default_cost", "machine": machine_info(("torch", "transformers")),
              "base_commit": commit, "limit": args.limit, "rounds": args.rounds, "runs": runs,
              "mean_wall_s": mean, "ratio_work_over_base": mean["work"] / mean["base"],
              "goal": "at most 1.3x (issue 43)"}
    save_result(RESULT, result)
    print(json.dumps({k: result[k] for k in ("mean_wall_s", "ratio_work_over_base")}))


if __name__ == "__main__":
    main()
