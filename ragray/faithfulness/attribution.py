"""The attributions an explanation stage can ask for, by their ``faithfulness.attributions`` names.

Each is a measure of :data:`ragray.attribution.base.MEASURES` offered here (``Measure.as_explainer``)
under its own name, so this module keeps no table of names:

- ``loo``: 1 − sim(y, y′ᵢ), the answer regenerated without unit i (the ``loo`` measure: the stage's
  leave-one-out arms are generated);
- ``logprob_drop``: log p(y | all) − log p(y | all − i) (one teacher-forced pass per unit, no
  generation; ``logprob`` until 0.3.0, :mod:`ragray.config.renamed`);
- ``surrogate``: the non-negative Lasso of the random-deletion arm's answer changes on the removed
  units (the ``surrogate`` measure on answers already generated; ``Measure.fits_random_arm``).
"""

from __future__ import annotations

from ragray.attribution.base import Measure, measures

__all__ = ["attribution_order", "explainers", "fitted_on_random_arm"]


def explainers() -> dict[str, type[Measure]]:
    """``faithfulness.attributions`` name -> its measure, in the order the experiment runs and
    reports them."""
    return {m.name: m for m in measures() if m.as_explainer}


def attribution_order() -> tuple[str, ...]:
    """The attributions' names in the order the experiment runs and reports them."""
    return tuple(explainers())


def fitted_on_random_arm(name: str | None) -> bool:
    """Whether the attribution ``name`` is fitted on the random-deletion arm (no call of its own);
    as the explainer, the ranking a K is tested with is then fitted on the other K's draws only."""
    measure = explainers().get(name) if name is not None else None
    return bool(measure is not None and measure.fits_random_arm)
