"""The figures the throughput benchmarks print, on inputs whose answer is known: the prefix-cache
ceilings of benchmarks/bench_vllm_in_flight.py and the loopback server's rate."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.bench_vllm_in_flight import _block_reuse  # noqa: E402
from ragray.generation.transformers.plan import plan_prefills, prefill_token_count  # noqa: E402
from ragray.loopback import LoopbackStats  # noqa: E402

PROMPTS = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 9], [1, 2, 7], [8]]


def test_whole_block_ceiling_rounds_each_prompts_shared_prefix_down():
    # prompt 2 shares 4 tokens with prompt 1, prompt 3 shares 2, prompt 4 none
    assert _block_reuse(PROMPTS, 1) == 4 + 2
    assert _block_reuse(PROMPTS, 2) == 4 + 2
    assert _block_reuse(PROMPTS, 3) == 3 + 0
    assert _block_reuse(PROMPTS, 8) == 0


def test_exact_ceiling_is_the_tokens_the_trie_does_not_recompute():
    total = sum(map(len, PROMPTS))  # 14 tokens, 8 trie nodes
    assert total - prefill_token_count(PROMPTS, plan_prefills(PROMPTS)) == 6


def test_loopback_rate_is_answers_over_the_span_and_says_so_when_it_cannot():
    stats = LoopbackStats(answered=64, first_at=10.0, last_at=10.5)
    assert stats.as_dict()["answered_per_second"] == 128.0
    assert LoopbackStats().as_dict()["answered_per_second"] is None  # nothing answered: no rate, not 0
