"""The generator contract: every backend (transformers, vLLM, OpenAI-compatible) must pass these.

Each backend's test module builds its generator (SmolLM2-135M-Instruct, temperature 0,
max_tokens 16) and calls :func:`check_contract`. The checks use the real model, so they assert
behaviour a working backend has, not exact strings.
"""

from __future__ import annotations

import math
from typing import Any

from ragray.generation import Generation, Generator
from ragray.generation.prompts import get_template
from ragray.types import Passage

TEMPLATE = get_template("numbered")

FACT = Passage("f", "The access code of the Harl Hill Observatory dome is 4417.", title="Observatory")
NOISE = [
    Passage(f"n{i}", text, title=title)
    for i, (title, text) in enumerate(
        [
            ("Ferries", "Kellsound Ferries run three crossings a day between Kell and Varrow."),
            ("Garden", "Tollin Botanic Garden opens at nine and closes at dusk."),
            ("Railway", "The Kell Light Railway has eleven stations and one tunnel."),
        ]
    )
]
QUESTION = "What is the access code of the Harl Hill Observatory dome?"


def ablation_prompts():
    """A baseline and its drop-one ablations: prompts that share token prefixes."""
    passages = [NOISE[0], FACT, NOISE[1], NOISE[2]]
    base = TEMPLATE.build(QUESTION, passages)
    drops = [TEMPLATE.build(QUESTION, passages[:i] + passages[i + 1 :]) for i in range(len(passages))]
    return [base, *drops]


def check_generate_shape(gen: Generator, max_tokens: int) -> list[Generation]:
    prompts = ablation_prompts()
    out = gen.generate(prompts)
    assert len(out) == len(prompts)
    for g in out:
        assert isinstance(g, Generation) and g.ok, g.error
        assert isinstance(g.text, str)
        assert g.prompt_tokens > 50 and 0 < g.completion_tokens <= max_tokens
        assert g.latency_s >= 0
    assert gen.generate([]) == []
    return out


def check_uses_context(out: list[Generation]) -> None:
    # baseline and every ablation that keeps the fact answer with the code; dropping it cannot
    assert "4417" in out[0].text, out[0].text
    assert "4417" not in out[2].text  # prompt 2 = drop of passage index 1, the fact


def check_deterministic_and_batch_invariant(gen: Generator, out: list[Generation]) -> None:
    prompts = ablation_prompts()
    again = gen.generate(prompts)
    assert [g.text for g in again] == [g.text for g in out]
    singles = [gen.generate([p])[0].text for p in prompts[:3]]
    assert singles == [g.text for g in out[:3]]


def check_score(gen: Generator) -> None:
    prompt = TEMPLATE.build(QUESTION, [NOISE[0], FACT])
    right, wrong = gen.logprobs([prompt, prompt], ["4417", "9082"])
    assert math.isfinite(right) and right < 0 and wrong < 0
    assert right > wrong + 1.0, (right, wrong)
    # without the fact the right answer becomes much less likely
    (closed,) = gen.logprobs([TEMPLATE.build(QUESTION, [NOISE[0]])], ["4417"])
    assert closed < right - 1.0, (closed, right)
    assert gen.logprobs([], []) == []


def check_divergence(gen: Generator) -> None:
    """jsd mode's call: the same log-probs as :meth:`score`; JSD 0 against itself, more when the
    fact goes than when a noise passage goes (the answer's distributions depend on the fact)."""
    if gen.divergence_problem() is not None:
        return
    passages = [NOISE[0], FACT, NOISE[1]]
    ref = TEMPLATE.build(QUESTION, passages)
    arms = [ref, TEMPLATE.build(QUESTION, [NOISE[0], NOISE[1]]), TEMPLATE.build(QUESTION, [FACT, NOISE[1]])]
    got = gen.score_divergence(ref, arms, "4417")
    assert [lp for lp, _ in got] == __import__("pytest").approx(gen.logprobs(arms, ["4417"] * 3), abs=1e-3)
    (_, same), (_, no_fact), (_, no_noise) = got
    assert abs(same) < 1e-4 and no_fact > no_noise >= 0, got
    assert gen.answer_length(ref, "4417") in (None, 4)


def check_contract(gen: Generator, max_tokens: int = 16) -> None:
    out = check_generate_shape(gen, max_tokens)
    check_uses_context(out)
    check_deterministic_and_batch_invariant(gen, out)
    check_score(gen)
    check_divergence(gen)
    assert isinstance(gen.model_id, str) and gen.model_id


def tiny_gpu_generator(*, vocab_size: int = 300, seed: int = 0) -> Any:
    """A transformers generator on the gpu engine (on CPU) over a random 2-layer grouped-query Llama
    (sdpa attention): for the engine's tests that need no tokenizer."""
    from types import SimpleNamespace

    import torch
    import transformers

    from ragray.config import GenerationConfig
    from ragray.generation.transformers.backend import TransformersGenerator

    config = transformers.LlamaConfig(vocab_size=vocab_size, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=2048, attn_implementation="sdpa")
    torch.manual_seed(seed)
    return TransformersGenerator(transformers.LlamaForCausalLM(config), SimpleNamespace(eos_token_id=2),
                                 GenerationConfig(transformers={"strategy": "gpu"}), path="tiny", device="cpu")
