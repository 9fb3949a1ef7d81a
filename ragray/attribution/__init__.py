"""Attributions: how much each passage (or unit) of a context did for an answer, behind one interface.

``base`` the :class:`~ragray.attribution.base.Measure` interface, the :class:`Evidence` every
measure reads and the one registry ``MEASURES``; ``design`` the contexts a question scores;
``subsets`` random subsets; ``interactions`` the default (an interaction-aware fit: substitutes,
complements, a per-question noise bar); ``measures`` drop-one, JSD, the surrogate and the controls
read as measures; ``linear`` the Lasso the surrogates fit.
"""
