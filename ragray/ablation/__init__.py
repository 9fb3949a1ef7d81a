"""The ablation engine (:mod:`ragray.ablation.engine`: prompts paid once, batched, their cost
counted, measured by a scorer), the influence run's plans (which passages each call sees) and
the loop that runs them, and ``checks``: the top-k drop and LDS of every measure, on the engine's
contexts; the faithfulness experiments use the same engine."""
