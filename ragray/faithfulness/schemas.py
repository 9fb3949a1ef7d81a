"""Arrow schemas of the ``ragray interpret`` tables; the Parquet files always carry exactly these."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["QUESTIONS_SCHEMA", "UNITS_SCHEMA", "arms_schema", "CASES_SCHEMA", "CURVES_SCHEMA", "measure_fields"]

_f64, _i32, _str, _bool = pa.float64(), pa.int32(), pa.string(), pa.bool_()
_ATTR = ("loo", "logprob", "surrogate")


def measure_fields(measures: tuple[str, ...]) -> list[tuple[str, pa.DataType]]:
    """One ``sim_<measure>`` column per configured answer comparison."""
    return [(f"sim_{m}", _f64) for m in measures]


QUESTIONS_SCHEMA = pa.schema(
    [
        ("question_id", _str), ("question", _str), ("gold_answers", pa.list_(_str)),
        ("baseline_answer", _str), ("level", _str), ("hierarchical", _bool), ("explainer", _str), ("mode", _str),
        ("n_passages", _i32), ("n_units", _i32), ("n_units_flat", _i32),
        ("cases", pa.list_(_str)),  # "<k_label>:<case>"
        ("closed_book_answer", _str), ("closed_book_sim", _f64),
        ("parametric", _bool),  # closed-book answer ≈ baseline (sim >= T)
        ("del_q_sim", _f64), ("top_passage_id", _str),
        ("move_start_sim", _f64), ("move_middle_sim", _f64), ("move_end_sim", _f64),
        ("position_sensitive", _bool),  # moving the top passage changed the answer
        ("auc_most", _f64), ("auc_least", _f64),  # deletion-curve areas (similarity vs fraction removed)
        *[(f"{kind}_{a}_{b}", _f64) for kind in ("rho", "top1")
          for i, a in enumerate(_ATTR) for b in _ATTR[i + 1 :]],
        ("explainer_calls", _i32), ("calls_requested", _i32), ("calls_generated", _i32),
        ("score_passes", _i32), ("error", _str), ("seconds", _f64),
    ]
)

UNITS_SCHEMA = pa.schema(
    [
        ("question_id", _str), ("stage", _i32), ("level", _str), ("unit_id", _str), ("unit_index", _i32),
        ("passage_id", _str), ("retrieval_rank", _i32), ("start", _i32), ("end", _i32), ("text", _str),
        ("importance", _f64), ("rank", _i32), ("bucket", _str),
        *[(f"importance_{a}", _f64) for a in _ATTR],
        ("loo_change", _f64),  # 1 − sim of the leave-one-out answer
        ("logprob_drop", _f64),  # nats lost by the baseline answer without this unit
    ]
)


def arms_schema(measures: tuple[str, ...]) -> pa.Schema:
    return pa.schema(
        [
            ("question_id", _str), ("arm", _str), ("k_label", _str), ("k", _i32), ("draw", _i32),
            ("removed_unit_ids", pa.list_(_str)), ("answer", _str),  # null: scored, not generated
            ("similarity", _f64), ("changed", _bool),
            ("logprob", _f64),  # log p(baseline answer | this context), when scored
            *measure_fields(measures),
            ("latency_s", _f64), ("prompt_tokens", _i32), ("completion_tokens", _i32), ("error", _str),
        ]
    )

CASES_SCHEMA = pa.schema(
    [
        ("question_id", _str), ("k_label", _str), ("k", _i32), ("n_units", _i32),
        ("population", pa.int64()), ("exhaustive", _bool), ("case", _str), ("reason", _str),
        ("random_mean", _f64), ("random_low", _f64), ("random_high", _f64), ("random_sd", _f64),
        ("n_random", _i32), ("rank_p_most", _f64),
        *[(f"{col}_{arm}", t) for arm in ("most", "least")
          for col, t in (("sim", _f64), ("effect", _f64), ("p", None), ("status", _str)) if t is not None],
        ("p_most_below", _f64), ("p_most_above", _f64), ("p_least_below", _f64), ("p_least_above", _f64),
        ("changed_most", _bool), ("changed_least", _bool), ("changed_random", _bool),
        ("random_changed_share", _f64),
    ]
)

CURVES_SCHEMA = pa.schema(
    [("question_id", _str), ("order", _str), ("k", _i32), ("fraction", _f64), ("similarity", _f64)]
)
