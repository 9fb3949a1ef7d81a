"""Loading: YAML, ``--set`` overrides, validation, and errors that name the setting."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError


from ragray.config_paths import anchor_cwd_paths, resolve_file_paths
from ragray.errors import ConfigError

from ragray.config.experiment import ExperimentConfig
from ragray.config.plain import plain_yaml


def _describe(err: Mapping[str, Any]) -> str:
    loc = ".".join(str(part) for part in err["loc"])
    kind, ctx, got = err["type"], err.get("ctx") or {}, err.get("input")
    bounds = {
        "greater_than_equal": ">=",
        "greater_than": ">",
        "less_than_equal": "<=",
        "less_than": "<",
    }
    if kind in bounds:
        limit = next(iter(ctx.values()))
        limit = f"{limit:g}" if isinstance(limit, float) else limit
        return f"{loc} must be {bounds[kind]} {limit}, got {got!r}"
    if kind == "extra_forbidden":
        return f"{loc}: unknown key"
    if kind == "literal_error":
        return f"{loc} must be one of {ctx.get('expected')}, got {got!r}"
    if kind == "value_error":
        msg = str(ctx.get("error", err["msg"]))
        return msg if not loc else f"{loc}: {msg}" if not msg.startswith(loc) else msg
    return f"{loc}: {err['msg'].lower()}, got {got!r}"


_UNION_BRANCH = re.compile(r"^(constrained-)?(int|float|bool|str)$|^literal\[")
_KINDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string"}


def _alternative(err: Mapping[str, Any], branch: str) -> str:
    """What one branch of a union setting (``float >= 0 | 'auto'``) accepts, for the joined message."""
    if branch.startswith("literal["):
        return " or ".join(repr(v) for v in re.findall(r"'([^']*)'", branch))
    kind = _KINDS.get(branch.removeprefix("constrained-"), branch)
    described = _describe({**err, "loc": ()})
    return f"{kind} {described.removeprefix(' must be ').split(', got ')[0]}" if " must be " in described else kind


def _grouped(errors: Sequence[Mapping[str, Any]], describe: Any = None) -> list[str]:
    """Errors of one setting's union branches joined into one line (``execution.num_gpus must be a
    number >= 0 or 'auto', got -1``); every other error as :func:`_describe` words it."""
    lines: list[str] = []
    unions: dict[tuple, list[tuple[str, Mapping[str, Any]]]] = {}
    for err in errors:
        loc = tuple(err["loc"])
        if loc and isinstance(loc[-1], str) and _UNION_BRANCH.match(loc[-1]):
            if loc[:-1] not in unions:
                unions[loc[:-1]] = []
                lines.append(loc[:-1])  # type: ignore[arg-type]  # placeholder, filled below
            unions[loc[:-1]].append((loc[-1], err))
        else:
            lines.append((describe or _describe)(err))
    out = []
    for line in lines:
        if isinstance(line, tuple):
            branches = unions[line]
            options = " or ".join(_alternative(err, b) for b, err in branches)
            out.append(f"{'.'.join(map(str, line))} must be {options}, got {branches[0][1].get('input')!r}")
        else:
            out.append(line)
    return out


def format_validation_error(exc: ValidationError, where: str = "") -> str:
    """One line per problem, each naming the dotted key (and ``where`` it came from)."""
    prefix = f"{where}: " if where else ""
    return "\n".join(prefix + line for line in _grouped(exc.errors()))


def _valid_keys_hint(model: type[BaseModel], loc: Sequence[Any]) -> str:
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        ann = field.annotation if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return ""
        model = ann
    return f" (valid keys: {', '.join(model.model_fields)})"


def validate_config(raw: Mapping[str, Any], where: str = "") -> ExperimentConfig:
    """Validate a raw mapping into an :class:`ExperimentConfig` or raise :class:`ConfigError`."""
    try:
        return ExperimentConfig.model_validate(dict(raw))
    except ValidationError as exc:
        prefix = f"{where}: " if where else ""

        def described(e: Mapping[str, Any]) -> str:
            hint = _valid_keys_hint(ExperimentConfig, e["loc"]) if e["type"] == "extra_forbidden" else ""
            return _describe(e) + hint

        raise ConfigError("\n".join(prefix + line for line in _grouped(exc.errors(), described))) from None


def _set_dotted(raw: dict[str, Any], key: str, value: Any, origin: str, set_by: dict[str, str] | None = None,
                source: str = "") -> None:
    """Set dotted ``key`` in ``raw``. ``set_by`` (dotted key -> the override that set it) tells who
    made a section a plain value: an earlier override, else the config file ``source``, which the
    error then names."""
    parts = key.strip().split(".")
    node = raw
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            section = ".".join(parts[: i + 1])
            setter = _setter(section, set_by) if set_by is not None else None
            if setter is None and source and _is_section(section):
                raise ConfigError(f"{source}: {section} must be a section (a mapping of its settings), got "
                                  f"{child!r} ({origin} {key} sets a key inside it)")
            raise ConfigError(f"{origin} {key}: '{section}' is not a section"
                              + (f" (set by {setter})" if setter and setter != f"{origin} {key}" else ""))
        node = child
    node[parts[-1]] = value
    if set_by is not None:
        set_by[".".join(parts)] = f"{origin} {key}"


def _is_section(dotted: str) -> bool:
    """Whether the setting ``dotted`` of :class:`ExperimentConfig` holds settings of its own (a
    section such as ``generation``, or a mapping such as ``retrieval.filters``)."""
    annotation: Any = ExperimentConfig
    for part in dotted.split("."):
        fields = getattr(annotation, "model_fields", None) if isinstance(annotation, type) else None
        if not fields or part not in fields:
            return False
        annotation = fields[part].annotation
    options = [annotation, *get_args(annotation)]
    return any((isinstance(a, type) and issubclass(a, (BaseModel, dict))) or get_origin(a) in (dict, Mapping)
               for a in options)


def _setter(section: str, set_by: Mapping[str, str]) -> str | None:
    """The override that set ``section`` or a section above it (the latest), if one did."""
    parts = section.split(".")
    for n in range(len(parts), 0, -1):
        found = set_by.get(".".join(parts[:n]))
        if found is not None:
            return found
    return None


def parse_override(item: str, *, plain: bool = False) -> tuple[str, Any]:
    """``"a.b=value"`` -> ``("a.b", value parsed as YAML)``; an empty value is ``None``. ``plain``
    (an HTTP client's override): no anchors, aliases or tags (:func:`ragray.config.plain.plain_yaml`)."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects KEY=VALUE (e.g. retrieval.top_k=5), got {item!r}")
    if plain:
        return key, plain_yaml(value, key.strip()) if value.strip() else None
    try:
        parsed = yaml.safe_load(value) if value.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {key}: value {value!r} is not valid YAML ({exc})") from None
    return key, parsed


def apply_overrides(
    raw: Mapping[str, Any], overrides: Sequence[str] = (), values: Mapping[str, Any] | None = None,
    *, source: str = "",
) -> dict[str, Any]:
    """Apply ``a.b=c`` overrides (values parsed as YAML), then typed ``values`` by dotted key.
    ``source``: the file ``raw`` was read from, named when its own value is what an override
    cannot go into (``generation: 5`` with ``--set generation.model=x``)."""
    out: dict[str, Any] = _deep_copy(raw)
    set_by: dict[str, str] = {}
    for item in overrides:
        key, parsed = parse_override(item)
        _set_dotted(out, key, parsed, "--set", set_by, source)
    for key, value in (values or {}).items():
        _set_dotted(out, key, value, "option", set_by, source)
    return out


def _deep_copy(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in raw.items()}


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, with errors that name the file (and line for syntax errors)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


def load_config(
    path: str | Path | None = None,
    overrides: Sequence[str] = (),
    values: Mapping[str, Any] | None = None,
) -> ExperimentConfig:
    """Load ``path`` (or the built-in defaults), apply ``--set`` overrides and typed ``values``
    (dotted key -> value, e.g. from CLI flags), then validate.

    Relative paths in the file resolve against the file's folder; those of ``overrides`` and
    ``values`` against the working directory (:mod:`ragray.config_paths`).
    """
    raw = read_config_file(path) if path is not None else {}
    raw = anchor_cwd_paths(apply_overrides(raw, overrides, values, source=str(path) if path is not None else ""))
    return validate_config(raw, where=str(path) if path is not None else "")


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A config file's mapping with its relative paths made absolute against its folder."""
    return resolve_file_paths(read_yaml(path), Path(path).parent)
