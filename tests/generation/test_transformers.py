"""The transformers backend on the packaged SmolLM2-135M-Instruct: the shared contract, exact prefix
reuse (on == off), seeded sampling, and load errors."""

from __future__ import annotations

import json
import math
import os

import pytest

from tests.generation.contract import (
    FACT,
    NOISE,
    QUESTION,
    TEMPLATE,
    ablation_prompts,
    check_contract,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ragray.config import GenerationConfig  # noqa: E402
from ragray.errors import BackendError  # noqa: E402
from ragray.generation import GENERATORS, build_generator  # noqa: E402
from ragray.generation.transformers_backend import TransformersGenerator  # noqa: E402
from ragray.types import Passage  # noqa: E402

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
def plain():
    """The reference: every prompt prefilled from scratch and decoded alone."""
    g = _build(transformers={"prefix_reuse": False, "batch_size": 1})
    yield g
    g.close()


def test_registered() -> None:
    assert GENERATORS.get("transformers") is TransformersGenerator


@pytest.mark.slow
def test_contract(gen) -> None:
    assert gen.prefix_reuse and gen.batch_size == 16
    check_contract(gen, max_tokens=MAX_TOKENS)
    assert gen.model_id == "smollm2"


@pytest.mark.slow
def test_prompts_render_with_one_bos(gen) -> None:
    prompt = ablation_prompts()[0]
    (ids,) = gen.prompt_token_ids([prompt])
    tok = gen._tok
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
def test_prefix_reuse_gives_the_plain_scores(gen, plain) -> None:
    prompts = ablation_prompts()
    # the same prompt twice (full reuse), every ablation, an empty answer
    batch = [prompts[0], prompts[0], *prompts[1:], prompts[1]]
    answers = ["4417", "9082", *["The code is 4417."] * (len(prompts) - 1), ""]
    ours, ref = gen.score(batch, answers), plain.score(batch, answers)
    assert all(math.isfinite(s) for s in ours)
    assert ours[-1] == 0.0 == ref[-1]
    assert ours == pytest.approx(ref, abs=1e-4)


@pytest.mark.slow
def test_prefix_reuse_on_real_hotpotqa_prompts(gen, plain, shared_data) -> None:
    # ~1.5k-token prompts: the baseline and three drop-one ablations (first, middle, last passage)
    with (shared_data / "hotpotqa_distractor_dev.jsonl").open(encoding="utf-8") as fh:
        row = next(r for r in map(json.loads, fh) if len(r["passages"]) == 10)
    ps = [Passage(p["id"], p["text"], title=p["title"]) for p in row["passages"]]
    prompts = [TEMPLATE.build(row["question"], ps)]
    prompts += [TEMPLATE.build(row["question"], ps[:i] + ps[i + 1 :]) for i in (0, 5, 9)]
    ours, ref = gen.generate(prompts), plain.generate(prompts)
    assert ours[0].prompt_tokens > 1000
    assert [g.text for g in ours] == [g.text for g in ref]


@pytest.mark.slow
def test_sampling_is_seeded_and_batch_invariant() -> None:
    prompts = ablation_prompts()[:3]
    hot = _build(temperature=1.0, seed=7)
    try:
        first, again = hot.generate(prompts), hot.generate(prompts)
        assert [g.text for g in first] == [g.text for g in again]
        # prompt i samples from its own generator (seed + i): alone it gives the same text
        assert hot.generate(prompts[:1])[0].text == first[0].text
    finally:
        hot.close()
    other = _build(temperature=1.0, seed=8)
    try:
        assert [g.text for g in other.generate(prompts)] != [g.text for g in first]
    finally:
        other.close()


@pytest.mark.slow
def test_score_prefers_the_fact(gen) -> None:
    prompt = TEMPLATE.build(QUESTION, [NOISE[0], FACT])
    right, wrong = gen.score([prompt, prompt], ["4417", "9082"])
    assert right > wrong + 1.0
    with pytest.raises(ValueError, match="2 prompts but 1 answers"):
        gen.score([prompt, prompt], ["4417"])


def test_bad_model_path_names_it(tmp_path) -> None:
    empty = tmp_path / "empty-model-dir"
    empty.mkdir()  # an existing folder without a model: resolved as a local path
    with pytest.raises(BackendError, match="empty-model-dir"):
        build_generator(GenerationConfig(model=str(empty)))
    # not a folder: treated as a hub id, which fails offline
    with pytest.raises(BackendError, match="no-such-org/no-such-model"):
        build_generator(GenerationConfig(model="no-such-org/no-such-model"))


@pytest.mark.slow
def test_closed_generator_refuses_work() -> None:
    g = _build()
    g.close()
    g.close()  # idempotent
    with pytest.raises(BackendError, match="closed"):
        g.generate(ablation_prompts()[:1])
