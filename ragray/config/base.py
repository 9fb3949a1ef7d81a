"""The config's building blocks: the allowed values the CLI also offers as flags, and the frozen
:class:`Section` every section derives from."""

from __future__ import annotations




from typing import Literal, get_args


from pydantic import AfterValidator, BaseModel, ConfigDict

from ragray.catalog import check_name




# The allowed values of the settings the CLI also offers as flags: one list, so a flag's choices
# and the config's validation cannot drift apart.
Scope = Literal["auto", "per_question", "global"]
Dtype = Literal["auto", "float32", "bfloat16", "float16"]
InfluenceMode = Literal["auto", "interactions", "loo", "logprob_share", "jsd", "surrogate"]
PositionControl = Literal["none", "reversed", "shuffled"]
UsedRule = Literal["absolute", "relative", "outlier"]
Level = Literal["passage", "sentence", "token"]
FaithfulnessMode = Literal["generate", "logprob"]
Explainer = Literal["loo", "logprob_drop", "surrogate"]
Executor = Literal["local", "ray"]
SCOPES: tuple[str, ...] = get_args(Scope)
DTYPES: tuple[str, ...] = get_args(Dtype)
INFLUENCE_MODES: tuple[str, ...] = get_args(InfluenceMode)
POSITION_CONTROLS: tuple[str, ...] = get_args(PositionControl)
LEVELS: tuple[str, ...] = get_args(Level)
FAITHFULNESS_MODES: tuple[str, ...] = get_args(FaithfulnessMode)
EXPLAINERS: tuple[str, ...] = get_args(Explainer)
EXECUTORS: tuple[str, ...] = get_args(Executor)
#: the record fields ``data.columns`` / ``--columns`` may map a file's columns to
RECORD_FIELDS: tuple[str, ...] = (
    "id", "question", "answer", "answers", "passages", "gold_passage_ids", "meta",
    "latency_s", "prompt_tokens", "completion_tokens", "model",
)


def _registered(kind: str) -> AfterValidator:
    """Validator: the value must be a known ``kind`` of component (the error lists valid names).

    Names are looked up in :mod:`ragray.catalog` (and the registries plugins have loaded), so
    validating a config imports no component: the component modules import their config classes
    from here, and this module depends on none of them.
    """
    return AfterValidator(lambda name: check_name(kind, name))


def _template(name: str) -> str:
    return check_name("template", name, "generation.template")


class Section(BaseModel):
    """Base of every config section: frozen, unknown keys rejected, no infinite or NaN numbers."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _column_map(columns: dict[str, str]) -> dict[str, str]:
    unknown = [f for f in columns if f not in RECORD_FIELDS]
    if unknown:
        raise ValueError(f"data.columns: unknown record field(s) {', '.join(map(repr, unknown))}; "
                         f"valid: {', '.join(RECORD_FIELDS)}")
    empty = [f for f, col in columns.items() if not col.strip()]
    if empty:
        raise ValueError(f"data.columns: empty column name for {', '.join(map(repr, empty))}")
    taken: dict[str, str] = {}
    for field, col in columns.items():
        if col in taken:
            raise ValueError(f"data.columns: column '{col}' is mapped to both {taken[col]} and {field}")
        taken[col] = field
    return columns


