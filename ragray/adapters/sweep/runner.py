"""Run a sweep on Ray Tune: one trial per configuration, then the leaderboard.

Layout of ``<out>``: ``spec.yaml`` (the spec as given), ``sweep.json`` (the trials and their
params), ``trials/<id>/`` (each trial's ordinary run directory plus ``trial.json`` with its
metrics, ``attempts.jsonl``: where each attempt ran, ``error.json`` once it failed), ``locks/``,
``tune/`` (Tune's storage path: every running step report, TensorBoard logs, experiment state)
and the leaderboard files (:mod:`ragray.adapters.sweep.leaderboard`).

With ``ephemeral.namespace`` each trial's per-question indexes live in its own namespace,
registered with a TTL before the trials start and deleted when the sweep finishes
(``ephemeral.cleanup``; the counts go to ``summary.json``).

A trial reports its running step metrics every ``report_every`` questions; the spec's scheduler
(ASHA) may stop it, and a stopped trial is listed as stopped, never ranked. A failing or
timed-out trial is recorded as failed with its error (not retried: it would fail the same way);
the others go on. A trial whose worker was lost (its node died) is started again up to
``execution.max_failures`` times, on any node with room, and resumes its finished questions; the
summary lists those retries. An interrupted sweep continues with ``--resume``: Tune restores its
experiment (finished trials stay finished, failed ones are tried again) and a restarted trial
resumes its own run directory question by question.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ragray.config import validate_config
from ragray.errors import InputError
from ragray.adapters.execution.placement import HolderResources, cluster_view, current_placement, holder_resources
from ragray.adapters.execution.ray_runtime import connect
from ragray.store.rundir import default_run_dir, prepare_run_dir
from ragray.adapters.sweep.leaderboard import COLUMNS, write_leaderboard
from ragray.adapters.sweep.compare import compare_to_best, decision_line
from ragray.adapters.sweep.score import composite, rank_trials, score_trial
from ragray.adapters.sweep.spec import SweepSpec, Trial, load_spec

__all__ = ["SweepResult", "run_sweep"]

EXPERIMENT = "tune"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepResult:
    out: Path
    rows: list[dict[str, Any]]  # leaderboard order
    files: dict[str, Path]
    #: is the winner ahead of the others beyond noise (:func:`~ragray.adapters.sweep.compare.compare_to_best`)
    decision: dict[str, Any] = field(default_factory=dict)

    @property
    def best(self) -> dict[str, Any] | None:
        return self.rows[0] if self.rows and self.rows[0].get("rank") == 1 else None


def _numbers(summary: dict[str, Any]) -> dict[str, float]:
    """The numeric metrics Tune records (and TensorBoard plots)."""
    return {k: float(v) for k, v in summary.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _point(params: dict[str, Any], points: dict[str, str] | None) -> str:
    """The trial id of Tune's parameters: ``trial_id`` (grid, random), else Optuna's point."""
    if "trial_id" in params:
        return params["trial_id"]
    assert points is not None
    return points[",".join(str(params[f"x{i}"]) for i in range(len(params)))]


@contextmanager
def _held(lock: Path) -> Iterator[None]:
    """An exclusive lock on ``lock`` (a point Optuna proposes twice runs once; the other waits)."""
    import fcntl

    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _record_node(out: Path) -> None:
    """One more attempt of the trial and where it runs (``attempts.jsonl``: the Ray node's id and IP,
    the GPUs Ray assigned it and ``CUDA_VISIBLE_DEVICES``, the host, the time), for the leaderboard's
    ``node``, ``gpus`` and ``attempts`` and the summary's retries and placement."""
    import socket


    node = {**current_placement("trial").as_dict(), "host": socket.gethostname(), "started": time.time()}
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "attempts.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(node) + "\n")


def _attempts(out: Path, trial_id: str) -> list[dict[str, Any]]:
    path = out / "trials" / trial_id / "attempts.jsonl"
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _node(attempt: dict[str, Any]) -> str:
    """``<ip> <node id[:8]>``."""
    return f"{attempt['node_ip']} {attempt['node_id'][:8]}"


def _failed(path: Path, error: BaseException) -> BaseException:
    """``error``, recorded in ``path`` (``error.json``) so that a retry re-raises it at once."""
    path.write_text(json.dumps({"error": _describe(error)}) + "\n", encoding="utf-8")
    return error


class TrialError(RuntimeError):
    """A trial's own error, recorded in ``error.json``: a retry re-raises it without running again
    (retries are for lost workers, not for a config that fails the same way every time)."""


def _trainable(params: dict[str, Any], configs: dict[str, str], root: str, timeout_s: float,
               parent_id: str | None, every: int = 10, weights: dict[str, float] | None = None,
               points: dict[str, str] | None = None) -> None:
    """A Tune function trainable: run one trial in a thread (to enforce the timeout) and report its
    running step metrics to Tune as they come (the scheduler's and TensorBoard's), then the final."""
    from ray import tune

    from ragray.adapters.sweep.trial import run_trial, running_metrics

    trial_id = _point(params, points)
    config = validate_config(yaml.safe_load(configs[trial_id]))
    out = Path(root) / "trials" / trial_id
    done = out / "trial.json"
    with _held(Path(root) / "locks" / f"{trial_id}.lock"):
        failed = out / "error.json"
        if failed.is_file():
            raise TrialError(json.loads(failed.read_text(encoding="utf-8"))["error"])
        if done.is_file():  # finished before an interruption (or proposed twice): report it, never redo it
            finished = json.loads(done.read_text())
            tune.report({**_numbers(finished["summary"]), **running_metrics(finished["questions"], weights or {}),
                         "finished": 1.0})
            return
        _record_node(out)  # an attempt: only when it runs (a duplicate that found trial.json is none)
        box: dict[str, Any] = {}
        steps: queue.Queue[dict[str, float]] = queue.Queue()

        def work() -> None:
            from ragray.store.recording import recorded_run

            try:  # recorded as a trial of the sweep; the run inside joins this record
                with recorded_run(config, "trial", out, parent_id=parent_id) as rec:
                    box["result"] = run_trial(config, out, every=every, on_step=steps.put, weights=weights)
                    rec.summary = box["result"]["summary"]
            except BaseException as exc:  # re-raised in the trial's own thread below
                box["error"] = exc

        thread = threading.Thread(target=work, name=f"trial-{trial_id}", daemon=True)
        thread.start()
        deadline = time.monotonic() + timeout_s
        while thread.is_alive() or not steps.empty():
            try:  # reported from the trainable's own thread, as Tune requires
                tune.report(steps.get(timeout=0.2))
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise _failed(failed, TimeoutError(
                        f"trial {trial_id} ran longer than execution.timeout_s={timeout_s:g} s")) from None
        if "error" in box:
            raise box["error"] if isinstance(box["error"], KeyboardInterrupt) else _failed(failed, box["error"])
        result = box["result"]
        tmp = done.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
        tmp.replace(done)  # atomic: a trial.json is always complete
        tune.report({**_numbers(result["summary"]), **running_metrics(result["questions"], weights or {}),
                     "finished": 1.0})


def _describe(error: BaseException) -> str:
    """The trial's own exception (not Ray's wrapper), one line."""
    cause = getattr(error, "cause", None) or error
    if isinstance(cause, TrialError):  # already described by the attempt that failed
        return str(cause)
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


def _check_data(trials: list[Trial], remote: bool) -> None:
    """Each dataset the trials read, loaded here first (once per distinct ``data`` section): a
    missing file or a bad row fails the sweep in seconds, before Ray starts, not in every trial
    after it. On a cluster (``remote``: an address given or in ``RAY_ADDRESS``) the trials may run
    where a file is that this machine lacks: a path missing here is left to them. Natural
    Questions streams from the hub: left to the trials."""
    from ragray.data import load_dataset
    from ragray.data.loading import detect_format

    seen: set[str] = set()
    for t in trials:
        key = t.config.data.model_dump_json()
        if key in seen:
            continue
        seen.add(key)
        data = t.config.data
        try:
            if (data.format if data.format != "auto" else detect_format(data.path)) != "nq":
                load_dataset(data)
        except InputError as exc:
            if remote and not Path(data.path).exists():
                log.info("sweep: %s is not on this machine; the trials read it where they run", data.path)
                continue
            raise InputError(f"trial {t.label()}: {exc}") from None


def _rows(trials: list[Trial], out: Path, tune_results: dict[str, Any], spec: SweepSpec) -> list[dict[str, Any]]:
    """One row per trial that ran (every trial unless Optuna chose among them): ``done`` (scored,
    ranked), ``stopped`` by the scheduler (the questions it ran and its last running metrics;
    never ranked) or ``failed`` (with its error)."""
    weights = spec.score_metrics()
    rows = []
    for t in trials:
        attempts = _attempts(out, t.id)
        row: dict[str, Any] = {"trial_id": t.id, "label": t.label(), "out": str(out / "trials" / t.id),
                               "node": _node(attempts[-1]) if attempts else None, "attempts": len(attempts),
                               "gpus": ",".join(attempts[-1].get("gpu_ids") or []) if attempts else None}
        done = out / "trials" / t.id / "trial.json"
        result = tune_results.get(t.id)
        if done.is_file():
            finished = json.loads(done.read_text())
            row.update(finished["summary"])
            row.update({k: v for k, v in score_trial(finished["questions"], weights).items() if k != "coverage"})
            row["status"] = "done"
        elif result is None:
            if spec.search.strategy == "optuna":
                continue  # never proposed
            row.update({"status": "failed", "error": "the trial did not finish"})
        elif result.error is not None:
            row.update({"status": "failed", "error": _describe(result.error)})
        elif not (result.metrics or {}).get("done"):  # Tune marks the last result of a trial it stopped
            row.update({"status": "failed", "error": "the trial did not finish (the sweep was interrupted?)"})
        else:  # ended by Tune without an error and without its final report: the scheduler stopped it
            metrics = result.metrics or {}
            row.update({k: v for k, v in metrics.items() if k in COLUMNS and isinstance(v, (int, float))})
            row.update({"status": "stopped", "n_questions": int(metrics.get("questions") or _finished(out, t.id)),
                        "error": None})
        rows.append(row)
    return rank_trials(rows)


def _composites(out: Path, rows: list[dict[str, Any]], weights: dict[str, float]) -> dict[str, dict[str, float]]:
    """Ranked trial id -> question id -> the per-question composite behind its ``overall``."""
    found = {}
    for r in rows:
        if r.get("rank"):
            qs = json.loads((out / "trials" / r["trial_id"] / "trial.json").read_text())["questions"]
            found[r["trial_id"]] = {q["question_id"]: c for q in qs if (c := composite(q, weights)) is not None}
    return found


def _finished(out: Path, trial_id: str) -> int:
    """Questions in a trial's run log."""
    log = out / "trials" / trial_id / "progress.jsonl"
    return sum(1 for line in log.read_text(encoding="utf-8").splitlines() if line.strip()) if log.is_file() else 0


def _search(spec: SweepSpec, trials: list[Trial]) -> tuple[dict[str, Any], dict[str, str] | None, Any, Any]:
    """Tune's param space, Optuna's points (point -> trial id), the search algorithm and the scheduler."""
    from ray import tune

    search = spec.search
    scheduler = None
    if search.scheduler == "asha":
        from ray.tune.schedulers import ASHAScheduler

        scheduler = ASHAScheduler(time_attr="questions", metric="score", mode="max", max_t=10**9,
                                  grace_period=search.grace_questions, reduction_factor=search.reduction_factor)
    if search.strategy != "optuna":
        return {"trial_id": tune.grid_search([t.id for t in trials])}, None, None, scheduler
    from ray.tune.search.optuna import OptunaSearch

    keys = list(trials[0].params)
    values = {k: list(dict.fromkeys(json.dumps(t.params[k], sort_keys=True, default=str) for t in trials)) for k in keys}
    space = {f"x{i}": tune.choice(list(range(len(values[k])))) for i, k in enumerate(keys)}
    points = {",".join(str(values[k].index(json.dumps(t.params[k], sort_keys=True, default=str))) for k in keys): t.id
              for t in trials}
    searcher = OptunaSearch(metric="score", mode="max", seed=search.seed)
    return space, points, searcher, scheduler


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
    _check_data(trials, remote=bool(address or spec.execution.address or os.environ.get("RAY_ADDRESS")))
    prepare_run_dir(out)
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
        ray = connect(address or spec.execution.address, feature="ragray sweep")
        ex = spec.execution
        res = holder_resources(cluster_view(ray), gpus=ex.gpus_per_trial, count=ex.concurrency,
                               cpus=ex.cpus_per_trial)
        log.info("Tune: %d trial(s) at once, %g CPU and %g GPU each", res.count, res.cpus, res.gpus)
        tuner, points = _tuner(spec, trials, out, res, parent_id, resume=resume, verbose=verbose)
        start = time.perf_counter()
        grid = tuner.fit()
        results = {_point(r.config, points): r for r in grid if r.config}
        rows = _rows(trials, out, results, spec)
        decision = compare_to_best(rows, _composites(out, rows, spec.score_metrics()))
        winner = rows[0]["trial_id"] if rows and rows[0].get("rank") == 1 else None
        best = next((t for t in trials if t.id == winner), None)
        files = write_leaderboard(out, rows, f"ragray sweep '{spec.name}'",
                                  {"objective": spec.objective, "weights": spec.score_metrics()},
                                  best.config.to_yaml() if best else None, decision_line(decision))
        summary = _summary(spec, out, rows, best, decision, res, wall=time.perf_counter() - start)
        if spec.ephemeral.cleanup:
            summary["ephemeral_cleanup"] = _ephemeral(spec, trials, register=False)
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
        record.summary = summary
        _save_best_preset(spec, best)
    return SweepResult(out, rows, files, decision)


def _tuner(spec: SweepSpec, trials: list[Trial], out: Path, res: HolderResources, parent_id: str, *,
           resume: bool, verbose: int) -> tuple[Any, Any]:
    """The Tuner over the trials (restored where ``resume`` finds one), and the trials' points."""
    from ray import tune

    ex = spec.execution
    space, points, searcher, scheduler = _search(spec, trials)
    trainable = tune.with_resources(
        tune.with_parameters(_trainable, configs={t.id: t.config.to_yaml() for t in trials}, root=str(out),
                             timeout_s=ex.timeout_s, parent_id=parent_id, every=spec.report_every,
                             weights=spec.score_metrics(), points=points),
        {"cpu": res.cpus, "gpu": res.gpus},
    )
    path = out / EXPERIMENT
    if resume:  # a resumed sweep tries its failed trials again (the cause may be gone)
        for failed in (out / "trials").glob("*/error.json"):
            failed.unlink()
    if resume and tune.Tuner.can_restore(str(path)):
        tuner = tune.Tuner.restore(str(path), trainable, resume_unfinished=True, resume_errored=True)
    else:
        tuner = tune.Tuner(
            trainable,
            param_space=space,
            # a stopped trial's actor must go with it (a reused one would keep running it)
            tune_config=tune.TuneConfig(max_concurrent_trials=res.count, search_alg=searcher,
                                        scheduler=scheduler, reuse_actors=False,
                                        num_samples=spec.search.max_trials if searcher else 1),
            run_config=tune.RunConfig(name=EXPERIMENT, storage_path=str(out), verbose=verbose,
                                      failure_config=tune.FailureConfig(max_failures=ex.max_failures)),
        )
    return tuner, points


def _summary(spec: SweepSpec, out: Path, rows: list[dict[str, Any]], best: Trial | None, decision: Any,
             res: HolderResources, *, wall: float) -> dict[str, Any]:
    """The sweep's summary.json."""
    summary = {"name": spec.name, "n_trials": len(rows), "n_done": sum(r["status"] == "done" for r in rows),
               "n_stopped": sum(r["status"] == "stopped" for r in rows),
               "n_failed": sum(r["status"] == "failed" for r in rows), "best": rows[0] if best else None,
               # is the winner ahead beyond noise? (ragray.adapters.sweep.compare)
               "decision": decision,
               "questions_run": sum(int(r.get("n_questions") or 0) for r in rows),
               # trials started more than once (a lost worker, or --resume): where each attempt ran
               "retried": [{"trial_id": r["trial_id"], "label": r["label"], "status": r["status"],
                            "nodes": [_node(a) for a in _attempts(out, r["trial_id"])]}
                           for r in rows if r["attempts"] > 1],
               "search": spec.search.model_dump(),
               # what each trial asked Ray for (auto resolved) and where each trial's last attempt ran
               "resources": res.as_dict(),
               "placement": [{"trial_id": r["trial_id"], **_attempts(out, r["trial_id"])[-1]}
                             for r in rows if r["attempts"]],
               "wall_seconds": wall, "tune_path": str(out / EXPERIMENT)}
    return summary
