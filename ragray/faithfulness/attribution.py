"""The attributions an explanation stage can ask for, by their ``faithfulness.attributions`` names.

Each is a measure of :data:`ragray.attribution.base.MEASURES` (one interface and one registry for
the influence run and the faithfulness experiments alike):

- ``loo``: 1 − sim(y, y′ᵢ), the answer regenerated without unit i (the ``loo`` measure: the stage's
  leave-one-out arms are generated);
- ``logprob``: log p(y | all) − log p(y | all − i) (the ``logprob_drop`` measure: one teacher-forced
  pass per unit, no generation);
- ``surrogate``: the non-negative Lasso of the random-deletion arm's answer changes on the removed
  units (the ``surrogate`` measure on answers already generated).
"""

from __future__ import annotations

__all__ = ["ATTRIBUTION_ORDER", "FITTED_ON_RANDOM_ARM", "MEASURE_OF"]

#: the methods in the order the experiment runs and reports them
ATTRIBUTION_ORDER = ("loo", "logprob", "surrogate")
#: ``faithfulness.attributions`` name -> the measure in ``MEASURES``
MEASURE_OF = {"loo": "loo", "logprob": "logprob_drop", "surrogate": "surrogate"}
#: the attributions fitted on the random-deletion arm (no call of their own); as the explainer, the
#: ranking a K is tested with is fitted on the other K's random draws only
FITTED_ON_RANDOM_ARM = frozenset({"surrogate"})
