"""Each measure names itself once: in its class (``name = "..."``), registered under that name.

What else needs a measure's names reads them from the classes (``measure_for_mode``,
``control_names``, ``planners``, the faithfulness ``explainers``); the lists that live in layers
below the measures (the config's choices, which cannot import a component; the evidence panel's
columns, in ``metrics``, below ``attribution``) are checked here against what the classes declare.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

from ragray.attribution.base import MEASURES, control_names, measure_for_mode, measures

RAGRAY = Path(__file__).resolve().parents[2] / "ragray"


def _definitions(name: str) -> list[str]:
    """Where a measure named ``name`` is defined: ``name = "<name>"`` (a class attribute) or
    ``MEASURES.register("<name>")`` in a module that registers measures (a scorer of the engine's
    own registry may share a name: ``jsd`` scores the arms the ``jsd`` measure reads)."""
    pattern = re.compile(rf'^\s+name = "{re.escape(name)}"$|MEASURES\.register\("{re.escape(name)}"\)')
    files = [p for p in sorted(RAGRAY.rglob("*.py")) if "MEASURES.register" in p.read_text(encoding="utf-8")]
    return [f"{p.relative_to(RAGRAY)}:{n}" for p in files
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1) if pattern.search(line)]


def test_each_measure_s_name_is_defined_once_in_its_class():
    found = measures()
    assert len(found) == len({m.name for m in found}) == len(MEASURES.names()) >= 11
    for m in found:
        (where,) = _definitions(m.name)  # once, and nowhere a second time
        assert where.startswith("attribution/"), where
        assert MEASURES.get(m.name) is m


def test_no_table_of_measure_names_is_left():
    """The tables that named measures beside the classes are gone for good."""
    gone = re.compile(r"\b(MODE_MEASURES|MEASURE_OF|CONTROL_NAMES|ATTRIBUTION_ORDER|FITTED_ON_RANDOM_ARM)\b")
    hits = [f"{p.relative_to(RAGRAY)}:{n}" for p in sorted(RAGRAY.rglob("*.py"))
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1) if gone.search(line)]
    assert not hits, hits


def test_the_lists_below_the_measures_agree_with_what_the_measures_declare():
    from ragray.config.base import Explainer, InfluenceMode
    from ragray.faithfulness.attribution import attribution_order
    from ragray.metrics.evidence import ATTRIBUTIONS, CONTROLS

    modes = [m.name for m in measures() if m.as_influence]  # a mode is its measure's name
    assert set(typing.get_args(InfluenceMode)) == {"auto", *modes}
    assert all(measure_for_mode(mode).name == mode for mode in modes)
    assert typing.get_args(Explainer) == attribution_order()
    assert all(explainer in {m.name for m in measures()} for explainer in attribution_order())


def test_an_old_measure_name_is_read_as_the_new_one_until_the_release_that_drops_it():
    """``logprob`` named two measures (the influence mode's share, the explainer's drop) and
    ``generate`` the ``loo`` measure; each old name maps to a measure's own name, with a warning."""
    import pytest

    from ragray.config import load_config
    from ragray.config.renamed import OLD_COLUMNS, OLD_NAMES, REMOVED_IN, with_old_columns

    names = {m.name for m in measures()}
    assert all(new in names for olds in OLD_NAMES.values() for new in olds.values())
    changelog = (RAGRAY.parent / "CHANGELOG.md").read_text(encoding="utf-8")
    assert REMOVED_IN == "0.3.0" and f"until **{REMOVED_IN}**" in changelog.split("### Deprecated", 1)[1]
    with pytest.warns(FutureWarning, match=rf"influence.mode: 'generate' is now 'loo'; .* until ragray {REMOVED_IN}"):
        assert load_config(None, ["influence.mode=generate"]).influence.mode == "loo"
    with pytest.warns(FutureWarning, match="faithfulness.attributions: 'logprob' is now 'logprob_drop'"):
        fc = load_config(None, ["faithfulness.attributions=[loo,logprob]", "faithfulness.explainer=loo"]).faithfulness
    assert fc.attributions == ("loo", "logprob_drop")
    row = with_old_columns({"importance_logprob_drop": 0.5, "rho_loo_logprob_drop": 0.25})
    assert row["importance_logprob"] == 0.5 and row["rho_loo_logprob"] == 0.25 and "top1_loo_logprob" not in row
    assert set(OLD_COLUMNS.values()) <= {f.name for cls in _faithfulness_rows() for f in dataclasses.fields(cls)}


def _faithfulness_rows() -> tuple[type, ...]:
    from ragray.rows.faithfulness import FaithfulnessQuestionRow, UnitRow

    return FaithfulnessQuestionRow, UnitRow
    assert CONTROLS == tuple(control_names())
    # the evidence panel's attribution columns: the printed influence, and each measure's column
    # the checks report beside it (every one reading the scored contexts, not regenerated answers)
    checked = [m.column for m in measures() if not m.control and not m.needs_generated_arms and m.name != "interactions"]
    assert ATTRIBUTIONS == ("influence", *checked)
