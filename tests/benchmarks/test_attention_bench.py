"""bench_attention_gpu's variants compute the same attention as transformers' masked path (checked on
CPU, float32, where the GPU figures cannot be timed): a faster variant on a GPU is a candidate only
because it is the same numbers."""

import json

from benchmarks import bench_attention_gpu


def test_every_masked_variant_equals_transformers_path_on_cpu(tmp_path):
    assert bench_attention_gpu.main(["--out", str(tmp_path / "attention.json")]) == 0
    result = json.loads((tmp_path / "attention.json").read_text())
    assert set(result["max_abs_diff"]) == {"repeat_kv_masked", "gqa_masked", "folded_masked"}
    assert max(result["max_abs_diff"].values()) < 1e-6, result["max_abs_diff"]
    assert set(result["ms_per_layer"]) >= {"repeat_kv_masked", "gqa_masked", "folded_masked", "causal_no_prefix"}
