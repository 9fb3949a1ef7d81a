"""YAML as a client of the HTTP API may write it: plain values only, refused before they expand.

A client's ``a.b=value`` override is YAML. Anchors and aliases repeat a value without sending it again
(``[&s "A"*20000, *s, *s, ...]``: 60 KB of request that expands to 200 MB in the run history), and
tags name Python types; neither has a use in a setting. :func:`plain_yaml` reads the value's events
first and refuses anchors, aliases, explicit tags and lists or mappings nested deeper than
:data:`MAX_DEPTH`, so nothing is built from a value it refuses.
"""

from __future__ import annotations

from typing import Any

import yaml

from ragray.errors import ConfigError

__all__ = ["MAX_DEPTH", "plain_yaml"]

#: lists and mappings inside one another, at most (``influence={decision: {alpha: [..]}}`` is 3)
MAX_DEPTH = 4

_NODES = (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)


def _refusal(event: yaml.Event, depth: int) -> str | None:
    """Why ``event`` (at ``depth``) is not plain YAML, else None."""
    if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
        return "YAML anchors and aliases (&name, *name) are not accepted"
    if isinstance(event, _NODES) and event.tag is not None:
        return f"YAML tags ({event.tag}) are not accepted"
    if depth > MAX_DEPTH:
        return f"lists and mappings nested more than {MAX_DEPTH} deep are not accepted"
    return None


def plain_yaml(text: str, where: str) -> Any:
    """``text`` parsed as YAML: a scalar, or lists and mappings of scalars (:class:`ConfigError`
    naming ``where`` otherwise)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            why = _refusal(event, depth)
            if why is not None:
                raise ConfigError(f"{where}: {why}; write the value out")
        return yaml.safe_load(text)
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: an integer of more than 4300 digits
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{where}: value is not valid YAML ({exc})") from None
