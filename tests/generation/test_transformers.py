"""The transformers backend on the packaged SmolLM2-135M-Instruct: the shared contract, exact prefix
reuse (on == off), seeded sampling, and load errors."""

from __future__ import annotations

import json
import math
import os

import pytest

from ragray.config import GenerationConfig
from ragray.errors import BackendError
from ragray.generation import GENERATORS, build_generator
from ragray.generation.transformers.backend import TransformersGenerator
from ragray.types import Passage
from tests.generation.contract import (
    FACT,
    NOISE,
    QUESTION,
    TEMPLATE,
    ablation_prompts,
    check_contract,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests/conftest.py sets them too
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

pytest.importorskip("torch")
pytest.importorskip("transformers")

MAX_TOKENS = 16


def _build(**changes: object):
    try:
        return build_generator(GenerationConfig(max_tokens=MAX_TOKENS, **changes))
    except ImportError as exc:  # the packaged model's package (ragray[generate]) is missing
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def gen():
    g = _build()  # prefix reuse on, batched decoding (the defaults)
    yield g
    g.close()


@pytest.fixture(scope="module")
def plain(gen):
    """The reference: every prompt prefilled from scratch and decoded alone (same model)."""
    return gen.with_config(GenerationConfig(max_tokens=MAX_TOKENS, transformers={
        "prefix_reuse": False, "batch_size": 1, "draft_tokens": 0, "packed_prefill": False}))


def test_registered() -> None:
    assert GENERATORS.get("transformers") is TransformersGenerator


@pytest.mark.slow
def test_contract(gen) -> None:
    assert gen.engine.prefix_reuse and gen.engine.batch_size == 16
    check_contract(gen, max_tokens=MAX_TOKENS)
    assert gen.model_id == "smollm2"
    assert gen.precision == "float32"  # the suite pins fp32 (RAGRAY_CPU_BF16=0): what runs record


@pytest.mark.slow
def test_prompts_render_with_one_bos(gen) -> None:
    prompt = ablation_prompts()[0]
    (ids,) = gen.prompt_token_ids([prompt])
    tok = gen.tokenizer
    text = tok.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in prompt], add_generation_prompt=True, tokenize=False
    )
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    assert tok.decode(ids) == text
    assert ids.count(tok.convert_tokens_to_ids("<|im_start|>")) == 3  # system, user, assistant
    assert gen.generate([prompt])[0].prompt_tokens == len(ids)


@pytest.mark.slow
def test_prefix_reuse_gives_the_plain_answers(gen, plain) -> None:
    prompts = ablation_prompts()
    ours, ref = gen.generate(prompts), plain.generate(prompts)
    assert [(g.text, g.prompt_tokens, g.completion_tokens) for g in ours] == [
        (g.text, g.prompt_tokens, g.completion_tokens) for g in ref
    ]


@pytest.mark.slow
def test_small_batches_reuse_across_groups(gen, plain) -> None:
    # 5 prompts in decode groups of 2, 2, 1: the prefix source carries over between groups
    small = gen.with_config(GenerationConfig(max_tokens=MAX_TOKENS, transformers={"batch_size": 2}))
    prompts = ablation_prompts()
    assert [g.text for g in small.generate(prompts)] == [g.text for g in plain.generate(prompts)]


@pytest.mark.slow
def test_prefix_reuse_gives_the_plain_scores(gen, plain) -> None:
    prompts = ablation_prompts()
    # the same prompt twice (full reuse), every ablation, an empty answer
    batch = [prompts[0], prompts[0], *prompts[1:], prompts[1]]
    answers = ["4417", "9082", *["The code is 4417."] * (len(prompts) - 1), ""]
    ours, ref = gen.logprobs(batch, answers), plain.logprobs(batch, answers)
    assert all(math.isfinite(s) for s in ours)
    assert ours[-1] == 0.0 == ref[-1]
    assert ours == pytest.approx(ref, abs=1e-4)


@pytest.mark.slow
def test_prefix_reuse_on_real_hotpotqa_prompts(gen, plain, shared_data, monkeypatch) -> None:
    # a HotpotQA question with its first 5 passages (~700 tokens): baseline and 3 drop-one ablations
    with (shared_data / "hotpotqa_distractor_dev.jsonl").open(encoding="utf-8") as fh:
        row = next(r for r in map(json.loads, fh) if len(r["passages"]) == 10)
    ps = [Passage(p["id"], p["text"], title=p["title"]) for p in row["passages"][:5]]
    prompts = [TEMPLATE.build(row["question"], ps)]
    prompts += [TEMPLATE.build(row["question"], ps[:i] + ps[i + 1 :]) for i in (0, 2, 4)]
    from ragray.generation.transformers import attention

    padded, spans = [], []

    def spy(*args, **kwargs):
        out = continuation(*args, **kwargs)
        padded.append(out is not None)
        return out

    def spy_packed(layer, query, key, value, pack, scale):
        spans.append(len(pack.spans))
        return packed_attention(layer, query, key, value, pack, scale)

    continuation, packed_attention = attention.continuation_attention, attention.packed_attention
    monkeypatch.setattr(attention, "continuation_attention", spy)
    monkeypatch.setattr(attention, "packed_attention", spy_packed)
    ours, ref = gen.generate(prompts), plain.generate(prompts)
    assert ours[0].prompt_tokens > 500
    assert [g.text for g in ours] == [g.text for g in ref]
    assert any(padded) and not all(padded)  # both attention paths ran (drop first / drop last)
    assert spans and set(spans) == {1, 3}  # the baseline, then the 3 ablations in one packed forward
    # the log-prob path packs the same way, also around an empty answer (scored 0, not run)
    answers = [ref[0].text] * len(prompts)
    spans.clear()
    assert gen.logprobs(prompts, answers) == pytest.approx(plain.logprobs(prompts, answers), abs=1e-4)
    assert set(spans) == {1, 3}
    answers[1] = ""
    spans.clear()
    scores = gen.logprobs(prompts, answers)
    assert scores[1] == 0.0 and scores == pytest.approx(plain.logprobs(prompts, answers), abs=1e-4)
    assert set(spans) == {1, 2}
    # random subsets (ContextCite's ablations) run in waves over their prefix trie
    masks = [[1, 0, 1, 1, 0], [0, 1, 1, 0, 1], [1, 1, 0, 1, 1], [1, 0, 1, 0, 1], [0, 1, 0, 1, 1], [1, 1, 1, 0, 0]]
    subsets = [TEMPLATE.build(row["question"], [p for p, m in zip(ps, mask) if m]) for mask in masks]
    spans.clear()
    ours = gen.logprobs(subsets, answers[:1] * len(subsets))
    assert ours == pytest.approx(plain.logprobs(subsets, answers[:1] * len(subsets)), abs=1e-4)
    layers = gen.model.config.num_hidden_layers
    assert len(spans) == 3 * layers and sum(spans) == len(masks) * layers  # 3 packed forwards (waves)


@pytest.mark.slow
def test_drafted_decoding_gives_the_one_token_answers_in_fewer_passes(gen, shared_data) -> None:
    """Greedy decoding that verifies guessed tokens (sibling answers, prompt lookup) is exact:
    HotpotQA baseline + drop-one prompts, fp32, 32 new tokens, against one token per pass."""
    with (shared_data / "hotpotqa_distractor_dev.jsonl").open(encoding="utf-8") as fh:
        row = next(r for r in map(json.loads, fh) if len(r["passages"]) == 10)
    ps = [Passage(p["id"], p["text"], title=p["title"]) for p in row["passages"][:4]]
    prompts = [TEMPLATE.build(row["question"], ps)]
    prompts += [TEMPLATE.build(row["question"], ps[:i] + ps[i + 1 :]) for i in range(4)]
    one, drafted = (
        gen.with_config(GenerationConfig(max_tokens=32, transformers={"draft_tokens": k})) for k in (0, 4)
    )
    ref, ours = one.generate(prompts), drafted.generate(prompts)
    assert [(g.text, g.completion_tokens) for g in ours] == [(g.text, g.completion_tokens) for g in ref]
    assert drafted.decode_stats["tokens"] == one.decode_stats["tokens"]
    assert drafted.decode_stats["passes"] <= 0.7 * one.decode_stats["passes"]  # 20 vs 31 here


@pytest.mark.slow
def test_sampling_is_seeded_and_batch_invariant(gen) -> None:
    prompts = ablation_prompts()[:2]
    hot = gen.with_config(GenerationConfig(max_tokens=8, temperature=1.0, seed=7))
    first, again = hot.generate(prompts), hot.generate(prompts)
    assert [g.text for g in first] == [g.text for g in again]
    # prompt i samples from its own generator (seed + i): alone it gives the same text
    assert hot.generate(prompts[:1])[0].text == first[0].text
    other = gen.with_config(GenerationConfig(max_tokens=8, temperature=1.0, seed=8))
    assert [g.text for g in other.generate(prompts)] != [g.text for g in first]
    greedy = gen.with_config(GenerationConfig(max_tokens=8))
    assert [g.text for g in greedy.generate(prompts)] != [g.text for g in first]


@pytest.mark.slow
def test_score_prefers_the_fact(gen) -> None:
    prompt = TEMPLATE.build(QUESTION, [NOISE[0], FACT])
    right, wrong = gen.logprobs([prompt, prompt], ["4417", "9082"])
    assert right > wrong + 1.0
    with pytest.raises(ValueError, match="2 prompts but 1 answers"):
        gen.logprobs([prompt, prompt], ["4417"])


def test_bad_model_path_names_it(tmp_path) -> None:
    empty = tmp_path / "empty-model-dir"
    empty.mkdir()  # an existing folder without a model: resolved as a local path
    with pytest.raises(BackendError, match="empty-model-dir"):
        build_generator(GenerationConfig(model=str(empty)))
    # not a folder: treated as a hub id, which fails offline
    with pytest.raises(BackendError, match="no-such-org/no-such-model"):
        build_generator(GenerationConfig(model="no-such-org/no-such-model"))


@pytest.mark.slow
def test_closed_generator_refuses_work(gen) -> None:
    g = gen.with_config(GenerationConfig(max_tokens=4))
    g.close()
    g.close()  # idempotent
    assert g.model is None and gen.model is not None  # closing a view leaves the original open
    with pytest.raises(BackendError, match="closed"):
        g.generate(ablation_prompts()[:1])
