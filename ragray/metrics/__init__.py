"""Metrics: retrieval quality, answer similarity, influence, alignment, the validity and evidence
panels, and ``stats``: the intervals and tests every figure of ragray shares (faithfulness, the
evidence panel, paired changes)."""
