"""Measure names retired in 0.2.0, still accepted until :data:`REMOVED_IN`.

Each measure goes by its own name everywhere (its class's ``name``: the config, the CLI, the HTTP
API, the tables). Two settings used other names: ``influence.mode: generate`` is the ``loo``
measure and ``influence.mode: logprob`` the ``logprob_share`` one, while the faithfulness
experiments' ``logprob`` (``faithfulness.explainer`` / ``attributions``) is the ``logprob_drop``
one — one word for two measures. An old name is read as the new one with a :class:`FutureWarning`
(a user's setting, so shown by default) that names both and the release that removes it; the
faithfulness tables keep the old names' columns beside the new ones until then.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from pydantic import BeforeValidator

__all__ = ["OLD_AGREEMENT", "OLD_COLUMNS", "OLD_NAMES", "REMOVED_IN", "current", "current_names", "reading_old_names", "with_old_columns"]

#: the release that stops accepting the old names (and drops the old columns)
REMOVED_IN = "0.3.0"

#: setting -> old name -> the measure's name
OLD_NAMES: dict[str, dict[str, str]] = {
    "influence.mode": {"generate": "loo", "logprob": "logprob_share"},
    "faithfulness.explainer": {"logprob": "logprob_drop"},
    "faithfulness.attributions": {"logprob": "logprob_drop"},
}


def current(setting: str, value: Any, *, warn: bool = True) -> Any:
    """``value`` of ``setting`` under its measure's name (warning once per use when it was an old one);
    anything else unchanged (validation says what is wrong with it)."""
    new = OLD_NAMES[setting].get(value) if isinstance(value, str) else None
    if new is None:
        return value
    if warn:
        warnings.warn(f"{setting}: {value!r} is now {new!r}; the old name is accepted until ragray {REMOVED_IN}",
                      FutureWarning, stacklevel=2)
    return new


def current_names(setting: str, values: Any) -> Any:
    """A list setting's values under their measures' names (:func:`current` of each)."""
    if isinstance(values, (list, tuple)):
        return type(values)(current(setting, v) for v in values)
    return current(setting, values)


def reading_old_names(setting: str) -> BeforeValidator:
    """Validator of a field holding ``setting``: an old name is read as the measure's own (:func:`current_names`)."""
    return BeforeValidator(lambda value: current_names(setting, value))


#: old column -> the column it copies, in the faithfulness tables, until :data:`REMOVED_IN`
OLD_COLUMNS: dict[str, str] = {
    "importance_logprob": "importance_logprob_drop",
    "rho_loo_logprob": "rho_loo_logprob_drop", "top1_loo_logprob": "top1_loo_logprob_drop",
    "rho_logprob_surrogate": "rho_logprob_drop_surrogate", "top1_logprob_surrogate": "top1_logprob_drop_surrogate",
}


#: old key -> the key it copies, in the faithfulness summary's ``agreement``, until :data:`REMOVED_IN`
OLD_AGREEMENT: dict[str, str] = {"loo_vs_logprob": "loo_vs_logprob_drop",
                                 "logprob_vs_surrogate": "logprob_drop_vs_surrogate"}


def with_old_columns(row: Mapping[str, Any], old: Mapping[str, str] = OLD_COLUMNS) -> dict[str, Any]:
    """``row`` with the old columns or keys (``old``: old -> new) beside the new ones it holds."""
    out = dict(row)
    out.update({name: row[new] for name, new in old.items() if new in row})
    return out
