"""Who sets what: the settings of a server's operator, and the few an HTTP client may choose.

The operator starts ``ragray serve`` with a config and owns everything in it: models, backends,
endpoints and the environment variables that hold their keys, devices and execution, every path
(data, corpus, cache, runs, presets, history) and the server's own limits. A client of the HTTP
API may choose, per request, only the settings of :data:`CLIENT_SETTINGS`: which served dataset,
how many questions, how retrieval ranks and how many passages it keeps, the measurement's knobs
(influence, faithfulness, audit), seeds. ``POST /runs`` overrides, presets saved with ``PUT
/presets/{name}`` and the fields of the one-question endpoints all pass through
:meth:`ClientPolicy.apply`; anything else is a :class:`~ragray.errors.NotAllowedError` (HTTP 403)
that names the key and lists what a client may set.

Two gates, so a gap in one is caught by the other: every key a client names must be allowed
(and ``data.path`` must name a served dataset), and the config that results may differ from the
operator's only in allowed settings (:func:`changed_settings`). Every number a client sets must be
within its cap (:mod:`ragray.config.limits`: a :class:`~ragray.errors.LimitError`, HTTP 400), checked
as sent and again as validated, and an override's YAML must be plain (no anchors, aliases or tags).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ragray.catalog import DATASET_NAMES
from ragray.config import ExperimentConfig, Section, ServeConfig, apply_overrides, parse_override, validate_config
from ragray.config.limits import Limits
from ragray.errors import ConfigError, NotAllowedError

__all__ = ["CLIENT_SETTINGS", "ClientPolicy", "changed_settings", "flatten", "is_allowed", "leaves_of"]

#: What an HTTP client may set: a key allows itself and every key below it. Never a model, a
#: backend, an endpoint, a key's variable, a device, a path or a limit of the server; ``data.path``
#: only to a served dataset's name (:attr:`ClientPolicy.datasets`).
CLIENT_SETTINGS: tuple[str, ...] = (
    "name", "seed",
    "data.path", "data.limit", "data.on_bad_row", "data.columns",
    "chunking.method", "chunking.size", "chunking.overlap",
    "retrieval.retriever", "retrieval.top_k", "retrieval.scope", "retrieval.min_score", "retrieval.filters",
    "retrieval.bm25", "retrieval.hybrid", "retrieval.expand",
    "rerank.candidates",
    "generation.template", "generation.system_prompt", "generation.decline", "generation.temperature", "generation.max_tokens",
    "generation.seed",
    "influence", "faithfulness", "audit",
    "metrics.embedding", "metrics.tau_recall", "metrics.tau_h",
)


#: a client's ``name`` labels its run; it may become part of a folder name, so it is a plain word
_LABEL = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def is_allowed(key: str, allowed: Iterable[str] = CLIENT_SETTINGS) -> bool:
    """Whether ``key`` is an allowed setting or lies below one (``influence.mode`` under ``influence``)."""
    return any(key == a or key.startswith(a + ".") for a in allowed)


def _section(model: type[BaseModel], name: str) -> type[Section] | None:
    info = model.model_fields.get(name)
    ann = info.annotation if info is not None else None
    return ann if isinstance(ann, type) and issubclass(ann, Section) else None


def _section_at(key: str) -> type[BaseModel] | None:
    """The config section ``key`` names (``""``: the whole config), else None."""
    model: type[BaseModel] | None = ExperimentConfig
    for part in filter(None, key.split(".")):
        model = _section(model, part) if model is not None else None
    return model


def _known(key: str) -> bool:
    """Whether ``key`` names a setting (or a section, or a key inside a mapping setting)."""
    model: type[BaseModel] = ExperimentConfig
    for part in key.split("."):
        if part not in model.model_fields:
            return False
        sub = _section(model, part)
        if sub is None:  # a leaf; deeper parts are keys of a mapping setting (retrieval.filters.genre)
            return True
        model = sub
    return True


def leaves_of(raw: Mapping[str, Any], prefix: str = "", model: type[BaseModel] = ExperimentConfig) -> dict[str, Any]:
    """A nested settings mapping as ``dotted key -> value``, descending only into config sections
    (a mapping setting such as ``retrieval.filters`` stays one value)."""
    out: dict[str, Any] = {}
    for name, value in raw.items():
        key = f"{prefix}{name}"
        sub = _section(model, str(name))
        if sub is not None and isinstance(value, Mapping):
            out.update(leaves_of(value, key + ".", sub))
        else:
            out[key] = value
    return out


def flatten(config: ExperimentConfig) -> dict[str, Any]:
    """Every setting of ``config`` as ``dotted key -> JSON value``."""
    return leaves_of(config.model_dump(mode="json"))


def changed_settings(base: ExperimentConfig, new: ExperimentConfig) -> list[str]:
    """The dotted keys whose values differ between ``base`` and ``new``."""
    a, b = flatten(base), flatten(new)
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


#: the built-in dataset names, which every server offers (``data.path`` stays the name)
_BUILT_IN: Mapping[str, str] = {n: n for n in sorted(DATASET_NAMES)}


@dataclass(frozen=True)
class ClientPolicy:
    """What a client may set on this server: ``allowed`` keys, for ``data.path`` a name of
    ``datasets`` (dataset name -> what ``data.path`` becomes: a built-in name or the operator's path),
    and numbers within ``limits``."""

    allowed: tuple[str, ...] = CLIENT_SETTINGS
    datasets: Mapping[str, str] = field(default_factory=lambda: _BUILT_IN)
    limits: Limits = field(default_factory=lambda: Limits.for_serve(ServeConfig()))

    @classmethod
    def for_server(cls, config: ExperimentConfig) -> ClientPolicy:
        """The policy of a server started with ``config``: its ``serve.client_settings`` (default:
        :data:`CLIENT_SETTINGS`), the built-in dataset names and its ``serve.datasets``."""
        sc = config.serve
        allowed = CLIENT_SETTINGS if sc.client_settings is None else tuple(sc.client_settings)
        unknown = [k for k in allowed if not _known(k)]
        if unknown:
            raise ConfigError(f"serve.client_settings: unknown key(s) {', '.join(unknown)}")
        return cls(allowed, {**_BUILT_IN, **sc.datasets}, Limits.for_serve(sc))

    def describe(self) -> str:
        """The settings a client may set, in words (for error messages and the docs)."""
        names = ", ".join(sorted(self.datasets))
        return ", ".join(f"data.path (a served dataset: {names})" if a == "data.path" else a for a in self.allowed)

    def refuse(self, key: str, where: str, why: str = "is the server operator's setting") -> NotAllowedError:
        return NotAllowedError(f"{where}: {key} {why}, not a client's; a client may set: {self.describe()}")

    def _check_key(self, key: str, value: Any, base: Mapping[str, Any], where: str) -> Any:
        """The value to apply for ``key`` (a dataset name resolved), after the key checks."""
        if not _known(key):
            raise ConfigError(f"{where}: {key}: unknown key")
        if key != "data.path" and base.get(key, object()) == value:
            return value  # restating the operator's value changes nothing
        if not is_allowed(key, self.allowed):
            raise self.refuse(key, where)
        if key == "name" and not (isinstance(value, str) and _LABEL.match(value) and value.strip(".")):
            raise ConfigError(f"{where}: name must be 1-100 letters, digits, '_', '.' or '-', got {value!r}")
        if key == "data.path":
            if not isinstance(value, str) or value not in self.datasets:
                if value == base.get(key) or value in self.datasets.values():
                    return value  # the served config's own dataset, or one already resolved
                names = ", ".join(sorted(self.datasets))
                raise NotAllowedError(f"{where}: data.path must name a dataset this server offers ({names}), "
                                      f"got {value!r}; files and folders are the operator's to choose")
            return self.datasets[value]
        return value

    def apply(self, base: ExperimentConfig, settings: Mapping[str, Any], where: str = "settings") -> ExperimentConfig:
        """``base`` with a client's ``settings`` (nested or ``dotted key -> value``), validated.

        Raises :class:`NotAllowedError` for a setting the operator owns, :class:`~ragray.errors.LimitError`
        for a number over its cap, :class:`ConfigError` for an unknown key or an invalid value.
        """
        flat_base = flatten(base)
        leaves = leaves_of(settings)
        values = {k: self._check_key(k, v, flat_base, where) for k, v in leaves.items()}
        self.limits.check({k: v for k, v in values.items() if flat_base.get(k, object()) != v}, where)
        raw = apply_overrides(base.model_dump(mode="json"), values=values)
        config = validate_config(raw, where=where)
        self.check(base, config, where)
        flat = flatten(config)  # again as validated: a number sent as text ("1e9") is one now
        self.limits.check({k: flat[k] for k in flat if flat[k] != flat_base.get(k)}, where)
        return config

    def apply_overrides(self, base: ExperimentConfig, overrides: Sequence[str],
                        where: str = "overrides") -> ExperimentConfig:
        """``base`` with ``a.b=value`` overrides (values parsed as plain YAML), under this policy."""
        settings: dict[str, Any] = {}
        for item in overrides:
            key, value = parse_override(item, plain=True)
            key = key.strip()
            section = _section_at(key)
            if section is not None and isinstance(value, Mapping):  # influence={mode: logprob_share}
                settings.update(leaves_of(value, key + ".", section))
            else:
                settings[key] = value
        return self.apply(base, settings, where)

    def check(self, base: ExperimentConfig, new: ExperimentConfig, where: str = "settings") -> None:
        """Raise :class:`NotAllowedError` if ``new`` differs from ``base`` in a setting a client may
        not set (the second gate: whatever the route, only allowed settings change)."""
        for key in changed_settings(base, new):
            if not is_allowed(key, self.allowed):
                raise self.refuse(key, where)
            if key == "data.path" and new.data.path not in self.datasets.values():
                raise NotAllowedError(f"{where}: data.path must name a dataset this server offers, "
                                      f"got {new.data.path!r}")
