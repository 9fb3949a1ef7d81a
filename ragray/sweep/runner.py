"""Run a sweep on Ray Tune: one trial per configuration, then the leaderboard.

Layout of ``<out>``: ``spec.yaml`` (the spec as given), ``sweep.json`` (the trials and their
params), ``trials/<id>/`` (each trial's ordinary run directory plus ``trial.json`` with its
metrics), ``tune/`` (Tune's storage path: results, TensorBoard logs, experiment state) and the
leaderboard files (:mod:`ragray.sweep.leaderboard`).

With ``ephemeral.namespace`` each trial's per-question indexes live in its own namespace,
registered with a TTL before the trials start and deleted when the sweep finishes
(``ephemeral.cleanup``; the counts go to ``summary.json``).

A failing or timed-out trial is recorded as failed with its error; the others go on. An
interrupted sweep continues with ``--resume``: Tune restores its experiment (finished trials
stay finished) and a restarted trial resumes its own run directory question by question.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ragray.config import validate_config
from ragray.errors import InputError
from ragray.execution.ray_runtime import connect
from ragray.store.rundir import default_run_dir
from ragray.sweep.leaderboard import write_leaderboard
from ragray.sweep.score import rank_trials, score_trial
from ragray.sweep.spec import SweepSpec, Trial, load_spec

__all__ = ["SweepResult", "run_sweep"]

EXPERIMENT = "tune"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepResult:
    out: Path
    rows: list[dict[str, Any]]  # leaderboard order
    files: dict[str, Path]

    @property
    def best(self) -> dict[str, Any] | None:
        return self.rows[0] if self.rows and self.rows[0].get("rank") == 1 else None


def _numbers(summary: dict[str, Any]) -> dict[str, float]:
    """The numeric metrics Tune records (and TensorBoard plots)."""
    return {k: float(v) for k, v in summary.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _trainable(params: dict[str, Any], configs: dict[str, str], root: str, timeout_s: float,
               parent_id: str | None) -> None:
    """A Tune function trainable: run one trial (in a thread, to enforce the timeout)."""
    from ray import tune

    from ragray.sweep.trial import run_trial

    trial_id = params["trial_id"]
    config = validate_config(yaml.safe_load(configs[trial_id]))
    out = Path(root) / "trials" / trial_id
    done = out / "trial.json"
    if done.is_file():  # finished before an interruption: report it again, never redo it
        summary = json.loads(done.read_text())["summary"]
        tune.report({**_numbers(summary), "done": 1.0})
        return
    box: dict[str, Any] = {}

    def work() -> None:
        from ragray.store.recording import recorded_run

        try:  # recorded as a trial of the sweep; the run inside joins this record
            with recorded_run(config, "trial", out, parent_id=parent_id) as rec:
                box["result"] = run_trial(config, out)
                rec.summary = box["result"]["summary"]
        except BaseException as exc:  # re-raised in the trial's own thread below
            box["error"] = exc

    thread = threading.Thread(target=work, name=f"trial-{trial_id}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(f"trial {trial_id} ran longer than execution.timeout_s={timeout_s:g} s")
    if "error" in box:
        raise box["error"]
    result = box["result"]
    tmp = done.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    tmp.replace(done)  # atomic: a trial.json is always complete
    tune.report({**_numbers(result["summary"]), "done": 1.0})


def _describe(error: BaseException) -> str:
    """The trial's own exception (not Ray's wrapper), one line."""
    cause = getattr(error, "cause", None) or error
    return f"{type(cause).__name__}: {cause}".strip().splitlines()[0][:500]


def _check_out(out: Path, trials: list[Trial], resume: bool) -> None:
    state = out / "sweep.json"
    if state.exists() and not resume:
        raise InputError(f"{out} already holds a sweep; pass --resume to continue it or choose a new --out")
    if resume and state.exists():
        saved = [t["id"] for t in json.loads(state.read_text())["trials"]]
        if saved != [t.id for t in trials]:
            raise InputError(f"--resume: the spec's trials differ from those {out} was started with; "
                             "resume with the same spec or choose a new --out")


def _rows(trials: list[Trial], out: Path, errors: dict[str, str], spec: SweepSpec) -> list[dict[str, Any]]:
    weights = spec.score_metrics()
    rows = []
    for t in trials:
        row: dict[str, Any] = {"trial_id": t.id, "label": t.label(), "out": str(out / "trials" / t.id)}
        done = out / "trials" / t.id / "trial.json"
        if done.is_file():
            result = json.loads(done.read_text())
            row.update(result["summary"])
            row.update({k: v for k, v in score_trial(result["questions"], weights).items() if k != "coverage"})
            row["status"] = "done"
        else:
            row.update({"status": "failed", "error": errors.get(t.id, "the trial did not finish")})
        rows.append(row)
    return rank_trials(rows)


def _save_best_preset(spec: SweepSpec, best: Trial | None) -> None:
    """The winner as preset ``<sweep name>-best`` in the history database (never fatal)."""
    if best is None or not best.config.history.record:
        return
    try:
        from ragray.store.history import History

        history = History(best.config.history.url)
        try:
            history.save_preset(f"{spec.name}-best", best.config, f"best of sweep '{spec.name}': {best.label()}")
        finally:
            history.close()
    except Exception as exc:  # noqa: BLE001 - the leaderboard files are the result; the preset is a copy
        log.warning("sweep: could not save the best config as a preset: %s", exc)


def _ephemeral(spec: SweepSpec, trials: list[Trial], *, register: bool) -> dict[str, Any] | None:
    """Register each trial's ephemeral index folder with the spec's TTL (``register``), or delete
    them all (the end of a sweep with ``ephemeral.cleanup``). Never fatal: the TTL is the fallback."""
    if not spec.ephemeral.namespace or not trials:
        return None
    from ragray.cache import RetrievalCache
    from ragray.store.history import History

    try:
        history = History(trials[0].config.history.url)
    except Exception as exc:  # noqa: BLE001 - the sweep's results do not depend on it
        log.warning("sweep: ephemeral indexes not tracked (history database: %s)", exc)
        return None
    counts: dict[str, Any] = {"namespaces": 0, "expired_count": 0, "deleted_count": 0, "errors": []}
    try:
        for t in trials:
            cache = RetrievalCache.from_config(t.config.cache)
            if register:
                history.register_ephemeral(cache.namespace, cache.ephemeral_root, spec.ephemeral.ttl_s)
            else:
                done = history.delete_namespace(cache.namespace)
                for key in ("expired_count", "deleted_count"):
                    counts[key] += done[key]
                counts["errors"] += done["errors"]
            counts["namespaces"] += 1
    finally:
        history.close()
    return counts


def run_sweep(spec_path: str | Path, out: str | Path | None = None, *, address: str | None = None,
              resume: bool = False, overrides: tuple[str, ...] | list[str] = (), verbose: int = 1) -> SweepResult:
    """Expand the spec, run every trial on Ray Tune, write the leaderboard (module docstring)."""
    spec, trials = load_spec(spec_path, overrides)
    out = Path(out or default_run_dir("sweep", spec.name)).resolve()
    _check_out(out, trials, resume)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "spec.yaml").exists():
        shutil.copyfile(spec_path, out / "spec.yaml")
    (out / "sweep.json").write_text(json.dumps({
        "name": spec.name, "spec": str(Path(spec_path).resolve()), "overrides": list(overrides),
        "trials": [{"id": t.id, "label": t.label(), "params": t.params} for t in trials],
        "scoring": {"objective": spec.objective, "weights": spec.score_metrics()},
    }, indent=1, default=str) + "\n")

    from ragray.store.recording import recorded_run

    with recorded_run(trials[0].config.model_copy(update={"name": spec.name}), "sweep", out) as record:
        parent_id = record.id
        _ephemeral(spec, trials, register=True)
        connect(address or spec.execution.address, feature="ragray sweep")
        from ray import tune

        ex = spec.execution
        trainable = tune.with_resources(
            tune.with_parameters(_trainable, configs={t.id: t.config.to_yaml() for t in trials}, root=str(out),
                                 timeout_s=ex.timeout_s, parent_id=parent_id),
            {"cpu": ex.cpus_per_trial, "gpu": ex.gpus_per_trial},
        )
        path = out / EXPERIMENT
        start = time.perf_counter()
        if resume and tune.Tuner.can_restore(str(path)):
            tuner = tune.Tuner.restore(str(path), trainable, resume_unfinished=True, resume_errored=True)
        else:
            tuner = tune.Tuner(
                trainable,
                param_space={"trial_id": tune.grid_search([t.id for t in trials])},
                tune_config=tune.TuneConfig(max_concurrent_trials=ex.concurrency, num_samples=1),
                run_config=tune.RunConfig(name=EXPERIMENT, storage_path=str(out), verbose=verbose,
                                          failure_config=tune.FailureConfig(max_failures=0)),
            )
        grid = tuner.fit()
        errors = {r.config["trial_id"]: _describe(r.error) for r in grid if r.error is not None and r.config}
        rows = _rows(trials, out, errors, spec)
        winner = rows[0]["trial_id"] if rows and rows[0].get("rank") == 1 else None
        best = next((t for t in trials if t.id == winner), None)
        files = write_leaderboard(out, rows, f"ragray sweep '{spec.name}'",
                                  {"objective": spec.objective, "weights": spec.score_metrics()},
                                  best.config.to_yaml() if best else None)
        summary = {"name": spec.name, "n_trials": len(trials), "n_done": sum(r["status"] == "done" for r in rows),
                   "n_failed": sum(r["status"] != "done" for r in rows), "best": rows[0] if best else None,
                   "wall_seconds": time.perf_counter() - start, "tune_path": str(path)}
        if spec.ephemeral.cleanup:
            summary["ephemeral_cleanup"] = _ephemeral(spec, trials, register=False)
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
        record.summary = summary
        _save_best_preset(spec, best)
    return SweepResult(out, rows, files)
