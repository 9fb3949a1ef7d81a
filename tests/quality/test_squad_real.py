"""The metrics suite on real SQuAD questions with the real SmolLM2 generator (`ragray run`)."""

import pyarrow.parquet as pq
import pytest

from ragray.pipeline import run_influence
from ragray.config import load_config

pytestmark = [pytest.mark.slow, pytest.mark.realdata]


def test_squad_quality_metrics_smollm2(shared_data, tmp_path):
    config = load_config(None, [f"data.path={shared_data / 'squad_v11_dev.jsonl'}", "data.limit=2",
                                "retrieval.scope=global", "retrieval.top_k=3", "generation.max_tokens=16"])
    res = run_influence(config, tmp_path / "squad", progress=False)
    qs = pq.read_table(res.out / "questions.parquet").to_pylist()
    assert len(qs) == 2 and all(q["error"] is None for q in qs)
    for q in qs:
        assert 0 <= q["baseline_em"] <= 1 and 0 <= q["f1"] <= 1
        assert -1 <= q["grounding"] <= 1 and -1 <= q["sim_answer_gold"] <= 1 and -1 <= q["relevance"] <= 1
        assert q["hallucination"] in (0.0, 1.0) and q["recall_at_k_cosine"] in (0.0, 1.0)
        assert 0 <= q["label_noise_ratio"] <= 1 and q["label_coverage"] in (0.0, 1.0)  # one gold paragraph
        assert q["causal_noise_ratio"] is None or 0 <= q["causal_noise_ratio"] <= 1
    quality = res.summary.quality.as_dict()
    for key in ("em", "f1", "grounding", "hallucination_rate", "sim_answer_gold", "label_noise_ratio"):
        assert quality[key] is not None and -1 <= quality[key] <= 1, key
    assert quality["n"] == 2 and quality["n_with_gold"] == 2
