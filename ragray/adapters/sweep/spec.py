"""The sweep spec (YAML): which configurations to try, how to score them, how to run them.

A spec names a base ragray config and sweeps fields of four groups — ``chunking``,
``retrieval``, ``rerank``, ``generation`` — where every field takes a scalar or a list (a dotted
field such as ``dense.index`` reaches a nested section). Optional ``variants`` are named whole
alternatives (e.g. the seeds' four RAG "versions") crossed with the grid. ``search`` picks the
grid or a seeded random sample of it (``max_trials``). Every trial config is built and validated
when the spec loads, so a bad value fails before any trial starts, naming the trial and field.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ragray.config import (
    ExperimentConfig,
    apply_overrides,
    format_validation_error,
    parse_override,
    read_config_file,
    validate_config,
)
from ragray.config_paths import anchor_cwd_paths, resolve_dotted
from ragray.errors import ConfigError, InputError
from ragray.adapters.sweep.catalog import METRICS, OBJECTIVES

__all__ = ["SweepSpec", "Trial", "load_spec", "GROUPS"]

GROUPS = ("chunking", "retrieval", "rerank", "generation")
Scalar = str | int | float | bool | None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Variant(_Model):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.+-]+$")
    set: dict[str, Any] = Field(default_factory=dict, description="dotted config key -> value")


class Search(_Model):
    """Which configurations run, and which stop early.

    ``grid``: every point (or the first ``max_trials``); ``random``: ``max_trials`` points sampled
    without replacement; ``optuna``: ``max_trials`` trials proposed by Optuna's TPE sampler (seeded)
    over the spec's axes, each from the scores of those before (Tune's ``OptunaSearch``; a point
    proposed twice runs once). ``scheduler: asha`` (Tune's ``ASHAScheduler`` on the running
    ``score``, questions as its time axis) stops a trial whose running score is in the worst
    ``1 - 1/reduction_factor`` of its rung at ``grace_questions``, ``grace_questions·rf``, ... questions;
    a stopped trial is listed as stopped with the questions it ran and never ranked.
    """

    strategy: Literal["grid", "random", "optuna"] = "grid"
    max_trials: int | None = Field(None, ge=1, description="grid: first N; random: N sampled without replacement; "
                                                           "optuna: N trials (required)")
    seed: int = 0
    scheduler: Literal["none", "asha"] = "none"
    grace_questions: int = Field(20, ge=1, description="asha: questions every trial runs before it can be stopped")
    reduction_factor: float = Field(3.0, gt=1, description="asha: 1/rf of the trials go on at each rung")

    @model_validator(mode="after")
    def _optuna_needs_a_budget(self) -> Search:
        if self.strategy == "optuna" and self.max_trials is None:
            raise ValueError("strategy optuna needs max_trials: how many trials Optuna proposes")
        return self


class Execution(_Model):
    concurrency: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="trials at once; auto: one per GPU of the cluster (GPUs / gpus_per_trial), "
                            "1 without GPUs")
    timeout_s: float = Field(3600.0, gt=0, description="a trial running longer fails (and the sweep goes on)")
    cpus_per_trial: float | None = Field(
        None, gt=0, description="CPUs each trial reserves, and its model's threads; none: the smallest node's "
                                "cores shared by the trials that run on it at once (a lone trial gets them all)")
    gpus_per_trial: Annotated[float, Field(ge=0)] | Literal["auto"] = Field(
        "auto", description="GPUs each trial reserves (its model runs there); auto: 1 when the cluster has "
                            "GPUs, else 0")
    address: str | None = Field(None, description="Ray cluster (or RAY_ADDRESS); none: in-process Ray")
    max_failures: int = Field(2, ge=0, description="times a trial whose worker was lost (a node died) is "
                                                   "started again; it resumes its finished questions")


class Caching(_Model):
    chunksets: bool = True
    embeddings: bool = True
    indexes: bool = True
    retrievals: bool = True


class Ephemeral(_Model):
    """Per-sample (per-question) indexes built by trials, kept under a namespace.

    With a ``namespace`` every trial keeps the indexes of its questions' own corpora in
    ``<cache.dir>/ephemeral/<namespace>_<trial id>/`` (``cache.namespace``), registered in the run
    history with ``ttl_s``. ``cleanup: true`` deletes them when the sweep finishes; otherwise (and
    after an interrupted sweep) ``ragray cleanup`` / ``POST /cleanup`` deletes them once expired.
    """

    namespace: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+$", max_length=96)
    cleanup: bool = Field(True, description="delete them when the sweep ends")
    ttl_s: float = Field(86400.0, gt=0, description="otherwise `ragray cleanup` deletes them after this")


class SweepSpec(_Model):
    name: str = Field("sweep", pattern=r"^[A-Za-z0-9_.-]+$")
    base: str | None = Field(None, description="ragray config the trials start from (relative to the spec)")
    set: list[str] = Field(default_factory=list, description="'a.b=value' overrides of the base, for every trial")
    chunking: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    retrieval: dict[str, Any] = Field(default_factory=dict)
    rerank: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    generation: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    variants: list[Variant] = Field(default_factory=list)
    search: Search = Field(default_factory=Search)
    objective: Literal["quality", "usage"] = Field(
        "quality", description="quality: answers + retrieval; usage: rho, divergence, wasted context")
    metrics: list[str] | None = Field(None, description="metrics in the score; default: the objective's")
    weights: dict[str, float] = Field(default_factory=dict, description="metric -> weight (default 1)")
    report_every: int = Field(10, ge=1, description="questions between a trial's running step metrics (Tune, "
                                                    "TensorBoard, the scheduler)")
    execution: Execution = Field(default_factory=Execution)
    caching: Caching = Field(default_factory=Caching)
    ephemeral: Ephemeral = Field(default_factory=Ephemeral)

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, names: list[str] | None) -> list[str] | None:
        for name in names or ():
            if name not in METRICS:
                raise ValueError(f"unknown metric '{name}'; valid: {', '.join(sorted(METRICS))}")
        return names

    @field_validator("weights")
    @classmethod
    def _known_weights(cls, weights: dict[str, float]) -> dict[str, float]:
        for name, w in weights.items():
            if name not in METRICS:
                raise ValueError(f"unknown metric '{name}'; valid: {', '.join(sorted(METRICS))}")
            if w < 0:
                raise ValueError(f"weight of '{name}' must be >= 0, got {w}")
        return weights

    @model_validator(mode="after")
    def _unique_variants(self) -> SweepSpec:
        names = [v.name for v in self.variants]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"variant names must be unique; repeated: {sorted(dup)}")
        swept = {key for key, _ in self.axes()}
        for v in self.variants:
            both = sorted(swept & set(v.set))
            if both:
                raise ValueError(f"variant '{v.name}' sets {', '.join(both)}, which the grid also sweeps; "
                                 "set each key in one place")
        return self

    def score_metrics(self) -> dict[str, float]:
        """Metric -> weight of the overall score."""
        names = self.metrics or OBJECTIVES[self.objective]
        return {n: float(self.weights.get(n, 1.0)) for n in names}

    def axes(self) -> list[tuple[str, list[Any]]]:
        """Swept dotted keys and their values, in spec order (scalars are one-value axes)."""
        out = []
        for group in GROUPS:
            for field, value in getattr(self, group).items():
                out.append((f"{group}.{field}", list(value) if isinstance(value, list) else [value]))
        return out


@dataclass(frozen=True)
class Trial:
    """One configuration of the sweep: its id, the values that define it, and its config."""

    id: str
    variant: str | None
    params: dict[str, Any]  # dotted key -> value (variant keys first, then the grid's)
    config: ExperimentConfig

    def label(self) -> str:
        """``v2-hybrid retrieval.top_k=5``: the variant, then the grid values."""
        parts = [self.variant] if self.variant else []
        parts += [f"{k}={v}" for k, v in self.params.items() if k != "variant"]
        return " ".join(parts) or self.id


def _trial_id(params: dict[str, Any]) -> str:
    blob = json.dumps(params, sort_keys=True, default=str).encode()
    return hashlib.sha1(blob).hexdigest()[:10]


def _caching_overrides(spec: SweepSpec) -> dict[str, Any]:
    c = spec.caching
    return {"cache.chunksets": c.chunksets, "cache.indexes": c.indexes, "cache.retrievals": c.retrievals,
            "retrieval.dense.cache": c.embeddings}


def _anchor_paths(raw: dict[str, Any]) -> dict[str, Any]:
    """Relative data paths and a relative SQLite history made absolute (from this working dir).

    Trials run in Ray workers whose working directory need not be this one (Tune moves each
    trial into its own directory), so every trial config must name its files absolutely.
    """
    raw = anchor_cwd_paths(raw)
    history = dict(raw.get("history") or {})
    url = history.get("url")
    if isinstance(url, str) and url.startswith("sqlite:///") and not url.startswith("sqlite:////") \
            and ":memory:" not in url:
        history["url"] = "sqlite:///" + str(Path(url[len("sqlite:///"):]).resolve())
    return {**raw, "history": history}


def expand(spec: SweepSpec, base: dict[str, Any], folder: str | Path | None = None) -> list[Trial]:
    """Every trial of the spec (grid, or the seeded random sample), each config validated.

    ``folder`` is the spec file's: relative paths among the variants' and the grid's values
    resolve against it (a trial's params keep them as written).
    """
    base = _anchor_paths(base)
    axes = spec.axes()
    keys = [k for k, _ in axes]
    grid = list(itertools.product(*(values for _, values in axes))) or [()]
    variants = spec.variants or [None]
    combos = [(v, point) for v in variants for point in grid]
    if spec.search.strategy != "optuna" and spec.search.max_trials is not None \
            and spec.search.max_trials < len(combos):  # optuna picks among every point while it runs
        if spec.search.strategy == "random":
            picked = sorted(random.Random(spec.search.seed).sample(range(len(combos)), spec.search.max_trials))
            combos = [combos[i] for i in picked]
        else:
            combos = combos[: spec.search.max_trials]
    trials = []
    for variant, point in combos:
        values = {**_caching_overrides(spec), **(variant.set if variant else {}), **dict(zip(keys, point))}
        if folder is not None:
            values = resolve_dotted(values, folder)
        params = {**({"variant": variant.name} if variant else {}), **dict(zip(keys, point))}
        if spec.ephemeral.namespace:  # the trial's own per-sample indexes: "{namespace}_{trial id}"
            values["cache.namespace"] = f"{spec.ephemeral.namespace}_{_trial_id(params)}"
        raw = apply_overrides(base, (), values)
        raw["name"] = f"{spec.name}-{_trial_id(params)}"
        try:
            config = validate_config(raw)
        except ConfigError as exc:
            where = variant.name if variant else ", ".join(f"{k}={v}" for k, v in params.items())
            raise ConfigError(f"sweep trial [{where}]: {exc}") from None
        trials.append(Trial(_trial_id(params), variant.name if variant else None, params, config))
    ids = [t.id for t in trials]
    if len(set(ids)) != len(ids):
        raise ConfigError("sweep: two trials have the same parameters (repeated values in a list?)")
    return trials


def load_spec(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> tuple[SweepSpec, list[Trial]]:
    """Read, validate and expand a sweep spec; errors name the file and the field."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"sweep spec not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise InputError(f"{path}: a sweep spec is a mapping, got {type(raw).__name__}")
    try:
        spec = SweepSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, str(path))) from None
    base_path = (path.parent / spec.base) if spec.base else None
    if base_path is not None and not base_path.is_file():
        raise InputError(f"{path}: base config not found: {base_path}")
    # the base file's paths are relative to it, the spec's own `set` to the spec, --set to the cwd
    raw = read_config_file(base_path) if base_path is not None else {}
    for item in spec.set:
        raw = apply_overrides(raw, (), resolve_dotted(dict([parse_override(item)]), path.parent))
    raw = anchor_cwd_paths(apply_overrides(raw, overrides))
    base = validate_config(raw, where=str(base_path) if base_path is not None else "")
    return spec, expand(spec, base.model_dump(mode="json"), path.parent)
