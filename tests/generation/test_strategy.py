"""The transformers backend's device strategies: the gpu strategy (padded passes, one decoding batch
per call) gives the reference path's answers and scores, survives running out of memory unchanged,
and counts its work; ``auto`` picks by device, in one place."""

from __future__ import annotations

import os
import weakref
from pathlib import Path

import pytest

from ragray.cache.calls import CachedGenerator, CallStore
from ragray.config import ExperimentConfig, GenerationConfig
from ragray.generation.engine_counts import ENGINE_COUNTS, EngineCounts, engine_columns, engine_summary, split_counts
from ragray.generation.transformers.strategy import GPU_PLANNED_IN_FLIGHT, resolve_strategy
from ragray.generation.transformers.backend import TransformersGenerator
from ragray.pipeline.in_flight import questions_in_flight
from tests.generation.contract import FACT, NOISE, QUESTION, TEMPLATE, ablation_prompts, tiny_gpu_generator

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

MAX_TOKENS = 8  # decode steps per answer: the engines agree with the reference token for token or not


class _Held:
    """Stands for the memory a failed pass's frame holds (weak-referenceable)."""


def test_auto_is_gpu_on_cuda_and_cpu_elsewhere():
    assert resolve_strategy("auto", "cuda") == resolve_strategy("auto", "cuda:1") == "gpu"
    assert resolve_strategy("auto", "cpu") == resolve_strategy("auto", "mps") == "cpu"
    assert resolve_strategy("gpu", "cpu") == "gpu" and resolve_strategy("cpu", "cuda") == "cpu"
    with pytest.raises(ValueError, match="strategy: 'fast' is not one of auto, cpu, gpu"):
        resolve_strategy("fast", "cpu")


def test_questions_in_flight_before_the_model_loads():
    """A Ray Data batch is sized before its actor loads the model: many questions for a GPU actor."""
    plain = ExperimentConfig()
    assert questions_in_flight(plain, TransformersGenerator) == 1
    assert questions_in_flight(plain, TransformersGenerator, on_gpu=True) == GPU_PLANNED_IN_FLIGHT
    pinned = ExperimentConfig.model_validate({"generation": {"transformers": {"strategy": "cpu"}}})
    assert questions_in_flight(pinned, TransformersGenerator, on_gpu=True) == 1
    told = ExperimentConfig.model_validate({"execution": {"max_questions_in_flight": 3}})
    assert questions_in_flight(told, TransformersGenerator, on_gpu=True) == 3


def test_pass_mask_by_hand():
    """Two rows, rests right-aligned in 3 columns after 1 prefix column: row 0 reuses 1 prefix
    position and runs 2 tokens, row 1 reuses none and runs 3."""
    from ragray.generation.transformers.batched import _pass_mask

    starts, reuses = torch.tensor([3 - 2, 3 - 3]), torch.tensor([1, 0])  # where each row's own tokens begin
    mask = _pass_mask(torch, starts, reuses, width=3, prefix=1)[:, 0].int().tolist()
    assert mask[0] == [[0, 1, 0, 0],   # padding query: itself only
                       [1, 0, 1, 0],   # prefix + its first token
                       [1, 0, 1, 1]]
    assert mask[1] == [[0, 1, 0, 0],
                       [0, 1, 1, 0],
                       [0, 1, 1, 1]]


def test_passes_are_cut_where_padding_costs_more_than_a_pass():
    from ragray.generation.transformers.batched import cut_passes

    # equal rests: one pass; the budget splits it
    assert cut_passes([100] * 8, budget=10_000, overhead=50) == [(0, 8)]
    assert cut_passes([100] * 8, budget=400, overhead=50) == [(0, 4), (4, 8)]
    # long and short rests: one pass would pad 6 x 900 tokens; two passes cost one overhead more
    assert cut_passes([1000, 1000, 100, 100, 100, 100, 100, 100], budget=10_000, overhead=1024) == [(0, 2), (2, 8)]
    # a tiny spread is not worth a pass
    assert cut_passes([105, 100, 100], budget=10_000, overhead=1024) == [(0, 3)]
    assert cut_passes([5000], budget=100, overhead=10) == [(0, 1)]  # one row over the budget runs alone
    assert cut_passes([], budget=100) == []


def _held(rests: list[int], reused: list[int], cuts: list[tuple[int, int]], weight: float = 1.0) -> float:
    """The most a pass of ``cuts`` holds: rows x (longest rest + weight x longest reused prefix)."""
    return max((end - start) * (rests[start] + weight * max(reused[start:end])) for start, end in cuts)


def test_a_pass_stacking_long_prefixes_is_cut_within_its_memory():
    """Every row of a pass gets the pass's longest reused prefix: with a memory bound, rows x (width
    + weight x longest prefix) stays within it; without one (a CPU) the cut is as before."""
    from ragray.generation.transformers.batched import cut_passes

    short = [65] * 40  # the last wave's rests: an answer after a whole prompt
    prefixes = [1084] * 40
    assert cut_passes(short, budget=32_768, prefixes=prefixes) == [(0, 40)]
    cuts = cut_passes(short, budget=32_768, prefixes=prefixes, memory=20_000, prefix_weight=1.0)
    assert len(cuts) == 3 and max(end - start for start, end in cuts) == 20_000 // (65 + 1084)  # 17 rows
    assert all((end - start) * (65 + 1084) <= 20_000 for start, end in cuts)
    # 23 rows with no prefix beside two that reuse ~870 tokens (the record run's 10th pass)
    rests, reused = [110] + [106] * 23 + [100], [876] + [0] * 23 + [863]
    assert _held(rests, reused, cut_passes(rests, budget=32_768, overhead=1024)) > 12_000
    assert _held(rests, reused, cut_passes(rests, budget=32_768, overhead=1024, prefixes=reused, memory=12_000,
                                           prefix_weight=1.0)) <= 12_000
    assert cut_passes([5000], budget=100, prefixes=[9000], memory=10, prefix_weight=1.0) == [(0, 1)]  # alone


def test_a_pass_is_planned_with_the_prefix_kv_it_stacks():
    """sizes_from_free: what a pass may hold in tokens (its share and the decoding rows': they are
    never live at once; the 32,768-token cap is for speed, not memory) and what a stacked prefix
    column weighs (an 8B shape: 128 KiB of KV against 148 KiB of activations a token). At 60 GB free
    (an 80 GB GPU and its weights) the record run's widest pass (49 rows of 65 tokens after up to
    1,084 reused ones) fits whole, and so would 64 questions in flight's (~130 rows); a wave of 640
    such rows (~70 GB of stacked prefix KV in the 504-row pass the token cap alone allows) is cut
    within it."""
    from ragray.generation.transformers.batched import cut_passes
    from ragray.generation.transformers.strategy import sizes_from_free

    sizes = sizes_from_free(_8b_shape(), 60 * 10**9)
    assert sizes.tokens_per_pass == 32_768 and sizes.memory_tokens == int(0.45 * 60 * 10**9 / 151_552)
    assert sizes.prefix_weight == pytest.approx(131_072 / 151_552)
    assert sizes_from_free(_8b_shape(), 60 * 10**9, tokens_per_pass=200_000).memory_tokens == 200_000
    kw = dict(budget=sizes.tokens_per_pass, memory=sizes.memory_tokens, prefix_weight=sizes.prefix_weight)
    assert cut_passes([65] * 49, prefixes=[1084] * 49, **kw) == [(0, 49)]
    assert cut_passes([65] * 130, prefixes=[1084] * 130, **kw) == [(0, 130)]
    cuts = cut_passes([65] * 640, prefixes=[1084] * 640, **kw)
    assert cut_passes([65] * 640, budget=sizes.tokens_per_pass, prefixes=[1084] * 640) == [(0, 504), (504, 640)]
    assert len(cuts) > 2 and all((e - s) * (65 + sizes.prefix_weight * 1084) <= sizes.memory_tokens for s, e in cuts)


def test_the_gpu_engine_cuts_its_passes_within_the_memory_bound():
    """On a real gpu engine (CPU, float32): a memory bound that binds runs more, smaller passes, each
    within it, and gives the unbounded scores."""
    prefill = tiny_gpu_generator(vocab_size=512).engine.prefill
    base = list(range(3, 400))
    seqs = {0: base, **{i: base[: 40 * i] + [200 + i] * 30 for i in range(1, 9)},
            **{10 + i: base + [250 + i] * 5 for i in range(12)}}  # short rests after the whole prompt
    caps = {i: len(ids) - 1 for i, ids in seqs.items()}
    sums: dict[int, float] = {}

    def consume(indices, logits, keeps):
        for b, i in enumerate(indices):
            sums[i] = float(logits[b, -1].float().log_softmax(-1).max())

    def run(memory):
        passes = []
        original = prefill._pass

        def spy(rows, seqs_, keep, consume_):
            passes.append((len(rows), max(r.new(seqs_) for r in rows), max(r.reuse for r in rows)))
            return original(rows, seqs_, keep, consume_)

        prefill._pass, prefill.memory_tokens, prefill.prefix_weight = spy, memory, 1.0 if memory else 0.0
        sums.clear()
        with torch.inference_mode():
            prefill.run(seqs, caps, dict.fromkeys(seqs, 1), consume)
        del prefill._pass
        return passes, dict(sums)

    free, want = run(None)
    bounded, got = run(2_000)
    assert len(bounded) > len(free) and all(r * (w + p) <= 2_000 for r, w, p in bounded if r > 1)
    assert max(r * (w + p) for r, w, p in free) > 2_000  # the bound did bind
    assert got == pytest.approx(want, abs=1e-5)


def test_a_header_is_not_worth_a_wave():
    from ragray.generation.transformers.plan import rewave
    from ragray.generation.transformers.plan import Step

    steps = [Step(0, None, 0), Step(1, 0, 500), Step(2, 0, 20), Step(3, 2, 300)]
    waves = rewave(steps, min_reuse=64)
    assert [[s.index for s in w] for w in waves] == [[0, 2], [1, 3]]
    assert waves[0][1] == Step(2, None, 0) and waves[1][1] == Step(3, 2, 300)


def test_counts_are_shared_out_and_summarized():
    shares = split_counts({"forward_passes": 3, "tokens_computed": 90}, [1, 2])
    assert shares == [{"forward_passes": 1.0, "tokens_computed": 30.0}, {"forward_passes": 2.0, "tokens_computed": 60.0}]
    counts = EngineCounts()
    counts.add(forward_passes=2, tokens_computed=10)
    with pytest.raises(KeyError, match="unknown engine count 'passes'"):
        counts.add(passes=1)
    row = engine_columns(counts.snapshot(), dict.fromkeys(ENGINE_COUNTS, 0))
    assert row["forward_passes"] == 2 and engine_columns({}, {}) == dict.fromkeys(ENGINE_COUNTS)
    q = {"forward_passes": 3.0, "host_syncs": 2.0, "tokens_computed": 120.0, "tokens_minimum": 100.0,
         "padding_tokens": 12.0}
    out = engine_summary([q, {**q, "forward_passes": 1.0}, dict.fromkeys(ENGINE_COUNTS)])
    assert out["questions"] == 2 and out["forward_passes_per_question"] == 2.0
    assert out["computed_over_minimum"] == 1.2 and out["padding_share"] == 0.1
    assert engine_summary([dict.fromkeys(ENGINE_COUNTS)]) is None  # nothing counted: no block, not zeros


def _subset_prompts():
    """A baseline, its drop-one ablations and random subsets: prompts whose prefix trie has
    several waves, in one call."""
    passages = [NOISE[0], FACT, NOISE[1], NOISE[2]]
    subsets = [[0, 2], [1, 3], [0, 1, 3], [2], [1], [0, 1, 2]]
    return [*ablation_prompts(), *(TEMPLATE.build(QUESTION, [passages[i] for i in s]) for s in subsets)]


class _Reference(CachedGenerator):
    """The reference generator behind ragray's own call cache (a file of this module's): the reference
    path keeps no state between calls, and most tests below compare against the same calls
    (computing them again every time was a third of this module's time). Everything else
    (``with_config``, ``strategy``, the tokenizer) goes to the generator itself."""

    def __getattr__(self, name):
        if name == "inner":  # not set yet (during construction or copying): no loop through here
            raise AttributeError(name)
        return getattr(self.inner, name)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Every prompt prefilled from scratch and decoded alone on the cpu strategy (fp32)."""
    from ragray.generation import build_generator

    config = GenerationConfig(max_tokens=MAX_TOKENS, transformers={
        "prefix_reuse": False, "batch_size": 1, "draft_tokens": 0, "packed_prefill": False})
    try:
        g = build_generator(config)
    except ImportError as exc:
        pytest.skip(str(exc))
    kept = _Reference(g, CallStore(tmp_path_factory.mktemp("reference") / "calls.sqlite"), config)
    yield kept
    kept.close()


def _gpu(reference, **settings):
    return reference.with_config(GenerationConfig(max_tokens=MAX_TOKENS, transformers={"strategy": "gpu", **settings}))


@pytest.mark.slow
@pytest.mark.parametrize("tokens_per_pass", [200, 100_000])  # many small passes / one pass per wave
def test_gpu_strategy_gives_the_reference_answers_and_scores(reference, tokens_per_pass):
    gen = _gpu(reference, tokens_per_pass=tokens_per_pass)
    assert gen.strategy == "gpu" and reference.strategy == "cpu"
    prompts = _subset_prompts()
    ref = reference.generate(prompts)
    out = gen.generate(prompts)
    assert [g.text for g in out] == [g.text for g in ref]
    assert [g.completion_tokens for g in out] == [g.completion_tokens for g in ref]
    answer = ref[0].text
    assert gen.logprobs(prompts, [answer] * len(prompts)) == pytest.approx(
        reference.logprobs(prompts, [answer] * len(prompts)), abs=1e-4)
    mixed = [answer if i % 2 else "" for i in range(len(prompts))]  # empty answers score 0.0
    assert gen.logprobs(prompts, mixed) == pytest.approx(reference.logprobs(prompts, mixed), abs=1e-4)
    waits = gen.engine_counts()["host_syncs"]
    got, want = gen.score_divergence(prompts[0], prompts[1:], answer), reference.score_divergence(
        prompts[0], prompts[1:], answer)
    assert [x for pair in got for x in pair] == pytest.approx([x for pair in want for x in pair], abs=1e-4)
    counts = gen.engine_counts()
    assert counts["host_syncs"] - waits == 1  # every prompt's log-prob and divergence read at once
    assert counts["tokens_minimum"] > 0  # computed can be less: scoring starts from the generate call's KV
    assert counts["padding_tokens"] < counts["tokens_computed"]


@pytest.mark.slow
def test_a_scoring_call_starts_from_its_generate_calls_kv(reference):
    """The baseline prompt's KV from the generate call is carried into the next call: the scoring
    prompts (that prompt plus the answer, its ablations) reuse it, all in one wave, and score as
    a generator that computes everything again (and as the reference)."""
    prompts = ablation_prompts()
    gen, fresh = _gpu(reference, tokens_per_pass=100_000), _gpu(reference, tokens_per_pass=100_000)
    answer = gen.generate(prompts[:1])[0].text
    spent = []
    for g in (gen, fresh):
        before = g.engine_counts()
        scores = g.logprobs(prompts, [answer] * len(prompts))
        spent.append({k: g.engine_counts()[k] - before[k] for k in before})
        assert scores == pytest.approx(reference.logprobs(prompts, [answer] * len(prompts)), abs=1e-4)
    carried, again = spent
    baseline_tokens = len(reference.prompt_token_ids(prompts[:1])[0])
    real = [x["tokens_computed"] - x["padding_tokens"] for x in spent]  # one wave pads its rows more
    assert real[0] <= real[1] - (baseline_tokens - 64)
    assert carried["forward_passes"] == 1 < again["forward_passes"]


@pytest.mark.slow
def test_one_call_of_many_prompts_runs_in_few_passes_and_waits_once(reference):
    gen = _gpu(reference, tokens_per_pass=100_000)
    prompts = _subset_prompts()
    answer = reference.generate(prompts[:1])[0].text
    before = gen.engine_counts()
    gen.logprobs(prompts, [answer] * len(prompts))
    spent = {k: gen.engine_counts()[k] - before[k] for k in before}
    assert spent["forward_passes"] <= 4  # one pass per wave of the prefix trie, for 11 prompts
    assert spent["host_syncs"] == 1  # every pass's sums read at the end of the call


@pytest.mark.slow
def test_out_of_memory_halves_the_pass_and_changes_nothing(reference, monkeypatch):
    gen = _gpu(reference, tokens_per_pass=100_000)
    prompts = _subset_prompts()
    answer = reference.generate(prompts[:1])[0].text
    want = gen.logprobs(prompts, [answer] * len(prompts))
    model = gen.engine.prefill.model
    refused, failed_frames = [], []

    def small_batches_only(*args, **kwargs):
        if kwargs["input_ids"].shape[0] > 2:
            refused.append(kwargs["input_ids"].shape[0])
            activations = _Held()  # what a failed pass's frame holds (its activations)
            failed_frames.append(weakref.ref(activations))
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        # the retry runs after the failed pass's frames are gone: its memory is free for the halves
        assert all(ref() is None for ref in failed_frames), "a failed pass's frames outlive it"
        return model(*args, **kwargs)

    small_batches_only.config = model.config
    monkeypatch.setattr(gen.engine.prefill, "model", small_batches_only)
    assert gen.logprobs(prompts, [answer] * len(prompts)) == pytest.approx(want, abs=1e-5)
    shrunk = gen.engine.prefill.tokens_per_pass
    assert refused and shrunk < 100_000  # later passes start smaller
    monkeypatch.setattr(gen.engine.prefill, "model", model)  # the memory is back
    gen.logprobs(prompts[:1], [answer])
    assert gen.engine.prefill.tokens_per_pass == min(100_000, 2 * shrunk)  # each clean call doubles it back
    for _ in range(20):
        gen.logprobs(prompts[:1], [answer])
    assert gen.engine.prefill.tokens_per_pass == 100_000



@pytest.mark.slow  # over 2 s: outside the fast subset (README)
@pytest.mark.parametrize("strategy", ["cpu", "gpu"])
def test_jsd_holds_the_reference_s_vocabulary_rows_only(reference, monkeypatch, strategy):
    """jsd mode reduces each prompt's full-vocabulary log-softmax to its divergence as it arrives:
    both strategies score the reference first (the gpu strategy's plan pins it to its run's first
    wave, in a pass of its own, whatever KV the generate call carried), so no prompt's rows but the
    reference's outlive their own store (the same figures as before)."""
    prompts = _subset_prompts()
    answer = reference.generate(prompts[:1])[0].text
    gen = reference.inner if strategy == "cpu" else _gpu(reference, tokens_per_pass=200)
    want = reference.score_divergence(prompts[0], prompts[1:], answer)
    engine = gen._engine
    score_rows, held = engine.score_rows, []

    def watched(job, store):
        seen = []

        def spy(i, lp, target):
            store(i, lp, target)
            after_reference = any(j == 0 for j, _ in seen) or i == 0
            held.append((after_reference, sum(1 for j, ref in seen if j != 0 and ref() is not None)))
            seen.append((i, weakref.ref(lp)))

        score_rows(job, spy)

    monkeypatch.setattr(engine, "score_rows", watched)
    got = gen.score_divergence(prompts[0], prompts[1:], answer)
    assert [x for pair in got for x in pair] == pytest.approx([x for pair in want for x in pair], abs=1e-4)
    assert len(held) == len(prompts) and held[0][0] and all(n == 0 for _, n in held), held

@pytest.mark.slow
def test_fixed_shape_decoding_gives_the_reference_answers(reference, monkeypatch):
    """static_decode (CUDA graphs on a GPU): the same tokens as the reference, eagerly on CPU, with
    rows finishing at different steps; with CUDA's attention choices too."""
    from ragray.generation.transformers import attention

    prompts = _subset_prompts()[:4]  # answers of 18 and 24 tokens
    long = 32  # room for answers to end at their own end-of-turn token
    plain = reference.with_config(GenerationConfig(max_tokens=long, transformers=reference.config.transformers))
    ref = plain.generate(prompts)
    gen = reference.with_config(GenerationConfig(max_tokens=long, transformers={"strategy": "gpu", "static_decode": True}))
    assert gen.engine.decoding.name == "static" and not gen.engine.drafting
    out = gen.generate(prompts)
    assert [g.text for g in out] == [g.text for g in ref]
    assert [g.completion_tokens for g in out] == [g.completion_tokens for g in ref]
    assert len({g.completion_tokens for g in ref}) > 1  # rows did finish at different steps
    monkeypatch.setattr(attention, "_on_cuda", lambda query: True)
    assert [g.text for g in gen.generate(prompts)] == [g.text for g in ref]


@pytest.mark.slow
def test_the_cuda_attention_choices_give_the_same_numbers(reference, monkeypatch):
    """On CUDA ragray's attention folds single-query decoding steps (each cached key/value read once)
    and leaves padded passes to transformers' path: run those choices here, against the reference."""
    from ragray.generation.transformers import attention

    monkeypatch.setattr(attention, "_on_cuda", lambda query: True)
    gen = _gpu(reference, tokens_per_pass=100_000, draft_tokens=0)  # one-token decoding steps
    prompts = _subset_prompts()
    ref = reference.generate(prompts)
    assert [g.text for g in gen.generate(prompts)] == [g.text for g in ref]
    answer = ref[0].text
    assert gen.logprobs(prompts, [answer] * len(prompts)) == pytest.approx(
        reference.logprobs(prompts, [answer] * len(prompts)), abs=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_bf16_scores_match_plain_forward_passes(tmp_path):
    """On CUDA in bf16: the gpu strategy's scores against one plain forward pass per prompt, within
    bf16 rounding (0.05 nats + 2% of the score), on a random-weight Llama."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from ragray.generation.packaged import resolve_generator_model

    carried = Path(__file__).resolve().parents[2] / ".gpu" / "bench" / "tokenizer"  # gpu_bench.sh pack
    try:
        tok_dir = str(carried) if carried.is_dir() else resolve_generator_model("smollm2")
    except Exception as exc:  # noqa: BLE001 - a GPU machine without the packaged model
        pytest.skip(str(exc))
    cfg = LlamaConfig(vocab_size=49152, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=4096)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(tok_dir).save_pretrained(tmp_path)
    gen = TransformersGenerator.from_config(GenerationConfig(model=str(tmp_path), device="cuda", max_tokens=8))
    assert gen.strategy == "gpu" and gen.precision == "bfloat16"
    prompts = _subset_prompts()
    answer = gen.generate(prompts[:1])[0].text or "4417"
    got = gen.logprobs(prompts, [answer] * len(prompts))
    for prompt, value in zip(prompts, got):
        from ragray.generation.chat_tokens import answer_token_ids, encode_rendered, render_chat

        text = render_chat(gen.tokenizer, prompt)
        ids = encode_rendered(gen.tokenizer, text)
        target = answer_token_ids(gen.tokenizer, text, ids, answer)
        with torch.inference_mode():
            logits = gen.model(input_ids=torch.tensor([ids + target], device="cuda")).logits[0].float()
        lp = torch.log_softmax(logits[len(ids) - 1 : -1], -1).gather(1, torch.tensor(target, device="cuda")[:, None])
        assert value == pytest.approx(float(lp.sum()), abs=0.05 + 0.02 * abs(float(lp.sum())))
    gen.close()


def test_a_call_tokenizes_in_one_batch_as_one_by_one(reference):
    """encode_scored / encode_many (one batch per engine call) give the ids the one-prompt helpers
    give, for prompts with and without passages and answers that merge or not across the seam."""
    from ragray.generation.chat_tokens import answer_token_ids, encode_many, encode_rendered, encode_scored, render_chat

    tok = reference.tokenizer
    texts = [render_chat(tok, p) for p in ablation_prompts()]
    answers = ["Paris", " Paris.", "42", "x" * 3, "\n- a list"][: len(texts)] + ["Paris"] * max(0, len(texts) - 5)
    one_by_one = []
    for text, answer in zip(texts, answers):
        ids = encode_rendered(tok, text)
        one_by_one.append((ids, answer_token_ids(tok, text, ids, answer)))
    assert encode_scored(tok, texts, answers) == one_by_one
    assert encode_many(tok, texts) == [ids for ids, _ in one_by_one]


@pytest.mark.slow
def test_out_of_memory_in_decoding_halves_the_group_and_changes_nothing(reference, monkeypatch):
    """A decoding batch that runs out of device memory is split in halves and retried: the same
    answers; the next calls decode in smaller groups, and clean calls double the size back."""
    prompts = _subset_prompts()
    want = [g.text for g in reference.generate(prompts)]
    gen = _gpu(reference, tokens_per_pass=100_000, static_decode=False, draft_tokens=0)
    engine = gen.engine
    planned = engine.sizes.decode_rows
    assert engine.batch_size == planned >= len(prompts)
    decode, refused, failed_frames = engine.decoder.one_token, [], []

    def small_batches_only(cache, mask, lengths, *args):
        if len(lengths) > 3:
            refused.append(len(lengths))
            state = _Held()  # what a failed group's frame holds
            failed_frames.append(weakref.ref(state))
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        assert all(ref() is None for ref in failed_frames), "a failed group's frames outlive it"
        return decode(cache, mask, lengths, *args)

    monkeypatch.setattr(engine.decoder, "one_token", small_batches_only)
    assert [g.text for g in gen.generate(prompts)] == want
    assert refused[0] == len(prompts) and engine.batch_size <= 3
    shrunk = engine.batch_size
    monkeypatch.setattr(engine.decoder, "one_token", decode)  # the memory is back
    assert [g.text for g in gen.generate(prompts[:1])] == want[:1]
    assert engine.batch_size == min(planned, 2 * shrunk)
    for _ in range(8):
        gen.generate(prompts[:1])
    assert engine.batch_size == planned and gen.resolved_settings()["decode_rows"] == planned


@pytest.mark.slow
def test_a_generate_call_holds_the_kv_of_a_bounded_run_of_prompts(reference, monkeypatch):
    """The KV a generate call keeps for decoding is bounded by plan_tokens: a call of more prompt
    tokens goes in runs (neighbours in the prefix trie together), each prefilled and decoded
    before the next; the answers do not change."""
    prompts = _subset_prompts()
    want = [g.text for g in reference.generate(prompts)]
    gen = _gpu(reference, tokens_per_pass=100_000)
    lengths = [len(ids) for ids in gen.prompt_token_ids(prompts)]
    budget = 3 * max(lengths)
    sizes = gen.engine.sizes.__class__(**{**gen.engine.sizes.__dict__, "plan_tokens": budget})
    monkeypatch.setattr(gen.engine, "_read_sizes", lambda: sizes)
    run, held = gen.engine.prefill.run, []

    def counted(seqs, *args, hold=False):
        if hold:
            held.append(sum(map(len, seqs.values())))
        return run(seqs, *args, hold=hold)

    monkeypatch.setattr(gen.engine.prefill, "run", counted)
    assert [g.text for g in gen.generate(prompts)] == want
    assert len(held) > 1 and max(held) <= budget and sum(held) == sum(lengths)


@pytest.mark.slow
def test_two_jsd_questions_at_once_take_turns_in_the_engine(reference):
    """score_divergence calls are not merged across questions: two at once wait for each other
    (one call inside an engine at a time) and give what each gives alone."""
    import threading

    gen = reference.with_config(GenerationConfig(max_tokens=MAX_TOKENS))
    prompts = ablation_prompts()
    answers = ["Tern", "the night ferry"]
    alone = [gen.score_divergence(prompts[0], prompts[1:], a) for a in answers]
    inside, most = [0], [0]
    score_rows = gen.engine.score_rows

    def watched(*args):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        try:
            threading.Event().wait(0.05)  # long enough for the other thread to try to enter
            return score_rows(*args)
        finally:
            inside[0] -= 1

    gen.engine.score_rows = watched
    got: dict[int, list] = {}
    threads = [threading.Thread(target=lambda j=j: got.__setitem__(j, gen.score_divergence(prompts[0], prompts[1:],
                                                                                           answers[j])))
               for j in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1
    for j in range(2):
        assert [x for pair in got[j] for x in pair] == pytest.approx([x for pair in alone[j] for x in pair], abs=1e-5)


def test_every_generator_on_one_model_runs_one_call_at_a_time():
    """The API builds a generator per call on a kept model (with_config) and on a model handed in
    (each a new engine): calls from two notebook threads still take turns on the model, whichever
    generator and engine they come through; another model has a lock of its own."""
    import threading

    import transformers
    from types import SimpleNamespace

    from ragray.api import _generator

    config = transformers.LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048)
    model, other = transformers.LlamaForCausalLM(config), transformers.LlamaForCausalLM(config)
    tok = SimpleNamespace(eos_token_id=2, decode=lambda ids, skip_special_tokens: " ".join(map(str, ids)))
    kept = TransformersGenerator(model, tok, GenerationConfig(), path="tiny", device="cpu")
    gens = [kept.with_config(GenerationConfig(max_tokens=4)),
            kept.with_config(GenerationConfig(transformers={"strategy": "gpu"})),
            _generator(model, tok, ExperimentConfig()), _generator(model, tok, ExperimentConfig())]
    assert len({id(g.engine) for g in [kept, *gens]}) == 5  # five engines, one lock
    assert all(g.engine.lock is kept.engine.lock for g in gens)
    assert _generator(other, tok, ExperimentConfig()).engine.lock is not kept.engine.lock

    inside, most = [0], [0]

    def watched(engine):
        real = engine.generate

        def generate(seqs, budgets):
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            try:
                threading.Event().wait(0.05)  # long enough for another thread to try to enter
                return real(seqs, budgets)
            finally:
                inside[0] -= 1

        engine.generate = generate

    answers: list[str] = []
    for g in gens:
        watched(g.engine)
        g.prompt_token_ids = lambda prompts: [[1, 5, 7, 9] for _ in prompts]  # no chat template here
    threads = [threading.Thread(target=lambda g=g: answers.extend(x.text for x in g.generate(ablation_prompts()[:2])))
               for g in gens]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(answers) == 8 and most[0] == 1


def test_every_way_of_building_a_generator_gets_its_engine_and_prepared_model():
    """The constructor, from_model and a model handed to the API all choose the engine in one place
    (make_engine) and prepare the model the same way."""
    import transformers
    from types import SimpleNamespace

    from ragray.api import _generator
    from ragray.config import ExperimentConfig
    from ragray.generation.transformers.attention import GQA_ATTENTION
    from ragray.generation.transformers.cpu_engine import CpuEngine
    from ragray.generation.transformers.gpu_engine import GpuEngine

    def tiny():
        config = transformers.LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                                          attn_implementation="sdpa")
        return transformers.LlamaForCausalLM(config)

    tok = SimpleNamespace(eos_token_id=2)
    built = [
        TransformersGenerator(tiny(), tok, GenerationConfig(), path="tiny", device="cpu"),
        TransformersGenerator.from_model(tiny(), tok, GenerationConfig(), path="tiny", device="cpu"),
        _generator(tiny(), tok, ExperimentConfig()),
    ]
    for gen in built:
        assert isinstance(gen.engine, CpuEngine) and gen.strategy == "cpu"
        assert gen.model.config._attn_implementation == GQA_ATTENTION  # ragray's attention, same numbers
        assert all(getattr(m, "_ragray_row_chunked", False) for m in gen.model.modules()
                   if type(m).__name__.endswith(("RMSNorm", "MLP")))
    gpu = TransformersGenerator(tiny(), tok, GenerationConfig(transformers={"strategy": "gpu"}), path="tiny", device="cpu")
    assert isinstance(gpu.engine, GpuEngine) and gpu.strategy == "gpu"


def _8b_shape():
    from types import SimpleNamespace

    text = SimpleNamespace(num_hidden_layers=32, num_key_value_heads=8, head_dim=128, hidden_size=4096,
                           num_attention_heads=32, intermediate_size=14336)
    return SimpleNamespace(config=SimpleNamespace(get_text_config=lambda decoder: text),
                           dtype=SimpleNamespace(itemsize=2))  # an 8B shape in bf16


def test_a_gpu_shared_through_ray_is_planned_at_its_share(monkeypatch):
    """An actor given half or a quarter of a GPU (fractional num_gpus) sizes its passes, held KV and
    decoding rows from its share of the device less what it holds (its weights), not from all the
    memory free; blocks PyTorch's allocator holds unused count as free (they are the process's)."""
    from types import SimpleNamespace

    from ragray.generation.transformers import strategy

    gib = 1 << 30
    cuda = SimpleNamespace(mem_get_info=lambda device: (60 * gib, 80 * gib),
                           memory_allocated=lambda device: 16 * gib,  # the weights
                           memory_reserved=lambda device: 18 * gib)  # 2 GiB cached, unused
    fake_torch = SimpleNamespace(cuda=cuda, device=lambda name: name)
    model = _8b_shape()
    whole = strategy.gpu_sizes(model, fake_torch, "cuda")
    monkeypatch.setattr("ragray.worker.gpu_share", lambda: 0.5)
    half = strategy.gpu_sizes(model, fake_torch, "cuda")
    monkeypatch.setattr("ragray.worker.gpu_share", lambda: 0.25)
    quarter = strategy.gpu_sizes(model, fake_torch, "cuda")
    assert (whole.free_bytes, half.free_bytes, quarter.free_bytes) == (62 * gib, 24 * gib, 4 * gib)
    assert quarter.plan_tokens < half.plan_tokens < whole.plan_tokens
    assert quarter.decode_rows < half.decode_rows < whole.decode_rows
    monkeypatch.setattr("ragray.worker.gpu_share", lambda: 0.1)  # less than its weights: the smallest sizes
    assert strategy.gpu_sizes(model, fake_torch, "cuda").decode_rows == 1


@pytest.mark.slow
def test_each_call_plans_with_the_memory_free_then(reference, monkeypatch):
    """The gpu engine re-reads the free memory at each call: less free, smaller decoding groups (the
    same answers); more free, the sizes grow again; questions in flight stay as sized at load. A
    generate call frees the carried KV before it reads; a scoring call reads with it held."""
    from ragray.generation.transformers import gpu_engine, strategy

    prompts = _subset_prompts()
    want = [g.text for g in reference.generate(prompts)]
    gib = 1 << 30
    free, readings, engines = [8 * gib], [], []

    def sizes(model, torch, device, **kw):
        readings.append(len(engines[0].prefill._carried) if engines else None)
        return strategy.sizes_from_free(model, free[0], **kw)

    monkeypatch.setattr(gpu_engine, "gpu_sizes", sizes)
    gen = _gpu(reference, static_decode=False, draft_tokens=0)
    engine, in_flight = gen.engine, gen.engine.questions_in_flight
    engines.append(engine)
    planned = engine.batch_size
    assert planned >= len(prompts) and engine.prefill.tokens_per_pass > 4096
    decode, groups = engine.decoder.one_token, []

    def counted(cache, mask, lengths, *args):
        groups.append(len(lengths))
        return decode(cache, mask, lengths, *args)

    monkeypatch.setattr(engine.decoder, "one_token", counted)
    free[0] = gib // 2  # another process took the memory
    assert [g.text for g in gen.generate(prompts)] == want
    assert engine.batch_size < planned and max(groups) == engine.batch_size < len(prompts)
    assert engine.prefill.tokens_per_pass < 4096 and engine.questions_in_flight == in_flight
    free[0], groups[:] = 8 * gib, []
    assert [g.text for g in gen.generate(prompts)] == want
    assert engine.batch_size == planned and groups == [len(prompts)]
    gen.logprobs(prompts, [want[0]] * len(prompts))
    assert readings[-2] == 0 and readings[-1] > 0  # generate: carried KV freed; scoring: held


@pytest.mark.slow
def test_cuda_graphs_come_back_after_a_failed_capture(reference, monkeypatch):
    """A failed CUDA graph capture decodes eagerly (the same answers) and is tried again after 1, 2,
    4, ... decode runs, not given up for good; a capture that works resets the wait."""
    prompts = _subset_prompts()[:1]  # 14 decode runs: one short prompt, 6 tokens each
    short = GenerationConfig(max_tokens=6, transformers=reference.config.transformers)
    want = [g.text for g in reference.with_config(short).generate(prompts)]
    gen = reference.with_config(GenerationConfig(max_tokens=6, transformers={"strategy": "gpu", "static_decode": True}))
    static = gen.engine.decoding
    static.graphs = True  # as on CUDA; the capture itself is simulated below
    failing = [True]

    def capture(step):
        if failing[0]:
            raise RuntimeError("CUDA out of memory during capture (simulated)")
        return step  # a replay that runs the step: the same numbers

    monkeypatch.setattr(static, "_capture", capture)
    tries = []
    for run in range(10):
        before = static.captures
        assert [g.text for g in gen.generate(prompts)] == want
        tries += [run] * (static.captures - before)
    assert tries == [0, 2, 5]  # waits of 1, 2, then 4 runs
    failing[0] = False  # the wait of 4 ran out at run 9: run 10 tries, and it works
    assert [g.text for g in gen.generate(prompts)] == want
    assert static.captures == 4 and static._backoff == 1
    for _ in range(3):
        assert [g.text for g in gen.generate(prompts)] == want
    assert static.captures == 7  # every run captures again


def test_a_model_with_sliding_window_layers_runs_one_row_at_a_time_and_says_which(caplog):
    """Sliding-window layers cannot cut or re-stack their KV: the CPU engine turns prefix reuse and
    batching off, and its warning names the model."""
    import logging
    from types import SimpleNamespace

    import transformers

    from ragray.generation.transformers.cpu_engine import CpuEngine

    config = transformers.Qwen2Config(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, use_sliding_window=True,
                                      sliding_window=16, max_window_layers=0, name_or_path="tiny/sliding-qwen2")
    model = transformers.Qwen2ForCausalLM(config)
    with caplog.at_level(logging.WARNING, logger="ragray"):
        gen = TransformersGenerator(model, SimpleNamespace(eos_token_id=2), GenerationConfig(), path="tiny",
                                    device="cpu")
    assert isinstance(gen.engine, CpuEngine) and not gen.engine.prefix_reuse and gen.engine.batch_size == 1
    assert "tiny/sliding-qwen2 has non-global attention layers" in caplog.text


# -- the engine's parts: every prefill with every decoder; memory counted in bytes held -----------

PREFILLS = ["packed", "padded", "single"]
DECODERS = {"eager": {"static_decode": False, "draft_tokens": 0}, "drafted": {"static_decode": False, "draft_tokens": 4},
            "static": {"static_decode": True}}


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
@pytest.mark.parametrize("strategy", ["cpu", "gpu"])
@pytest.mark.parametrize("prefill", PREFILLS)
def test_every_prefill_with_every_decoder_gives_the_reference_answers_and_scores(reference, strategy, prefill):
    """The parts combine freely: each prefill with each decoder (the gpu strategy's sizes; with the
    eager one under the cpu strategy's) gives the reference's answers, and each prefill under either
    strategy its log-probabilities and divergences."""
    prompts = _subset_prompts()
    ref = reference.generate(prompts)
    # the decoders under the gpu strategy's sizes (its decoding groups); under the cpu strategy's
    # the prefill's passes differ, the decoding does not: one decoder there (a test's time, CI's budget)
    decoders = DECODERS if strategy == "gpu" else {"eager": DECODERS["eager"]}
    for decoder, settings in decoders.items():
        gen = reference.with_config(GenerationConfig(max_tokens=MAX_TOKENS, transformers={
            "strategy": strategy, "prefill": prefill, **settings}))
        engine = gen.engine
        assert (engine.name, engine.prefill.name, engine.decoding.name) == (strategy, prefill, decoder)
        assert gen.resolved_settings()["prefill"] == prefill and gen.resolved_settings()["decoder"] == decoder
        out = gen.generate(prompts)
        assert [g.text for g in out] == [g.text for g in ref], (prefill, decoder)
        assert [g.completion_tokens for g in out] == [g.completion_tokens for g in ref]
    answer = ref[0].text
    answers = [answer if i % 3 else "" for i in range(len(prompts))]  # empty answers score 0.0
    assert gen.logprobs(prompts, answers) == pytest.approx(reference.logprobs(prompts, answers), abs=1e-4)
    got, want = (g.score_divergence(prompts[0], prompts[1:], answer) for g in (gen, reference))
    assert [x for pair in got for x in pair] == pytest.approx([x for pair in want for x in pair], abs=1e-4)


def test_kv_bytes_counts_each_storage_once():
    """A padded pass's rows share its cache (held whole while any row is); a prompt's reused prefix
    shares its parent's storage; views of one buffer are one buffer."""
    from ragray.generation.transformers.kv import BatchRow, kv_bytes

    pass_cache = [(torch.zeros(3, 2, 10, 4), torch.zeros(3, 2, 10, 4))]  # 3 rows of a pass, one layer
    one = 2 * 3 * 2 * 10 * 4 * 4
    rows = [((BatchRow(pass_cache, b), 0, 10),) for b in range(3)]
    assert kv_bytes(rows[:1]) == kv_bytes(rows) == one
    own = [(torch.zeros(1, 2, 7, 4), torch.zeros(1, 2, 7, 4))]
    child = ((BatchRow(pass_cache, 0), 0, 5), (own, 0, 7))  # a reused prefix, then its own tokens
    assert kv_bytes([*rows, child]) == one + 2 * 2 * 7 * 4 * 4
    buffer = torch.zeros(1, 2, 16, 4)
    views = [((([(buffer[:, :, :8], buffer[:, :, :8])]), 0, 8),), ((([(buffer[:, :, :12], buffer)]), 0, 12),)]
    assert kv_bytes(views) == buffer.numel() * 4
    assert kv_bytes([]) == 0


def _bytes_bounded(gen, monkeypatch, **bounds):
    """``gen``'s engine planning with the given byte bounds (the other sizes as read)."""
    from dataclasses import replace

    engine = gen.engine
    sizes = replace(engine.sizes, **bounds)
    monkeypatch.setattr(engine, "_read_sizes", lambda: sizes)
    return engine


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_held_kv_beyond_the_plans_bytes_comes_off_what_a_pass_may_hold(reference, monkeypatch):
    """Before each wave the padded prefill measures the bytes of KV the call holds (a wave-0 pass's
    whole cache, while a later wave reuses it); what exceeds the plan's bytes comes off the pass's
    memory: a later wave then runs in more, smaller passes. The scores do not change."""
    prompts = _subset_prompts()
    answer = reference.generate(prompts[:1])[0].text
    want = reference.logprobs(prompts, [answer] * len(prompts))
    passes = {}
    for name, plan_bytes in (("room", 1 << 40), ("tight", 0)):
        gen = _gpu(reference, tokens_per_pass=100_000)
        engine = _bytes_bounded(gen, monkeypatch, memory_tokens=1_000_000, plan_bytes=plan_bytes)
        engine.prefill.activation_bytes = 1  # each held byte takes a token off the pass's memory
        before = gen.engine_counts()["forward_passes"]
        assert gen.logprobs(prompts, [answer] * len(prompts)) == pytest.approx(want, abs=1e-4)
        passes[name] = gen.engine_counts()["forward_passes"] - before
        assert engine.prefill.held_bytes > 0  # what the last wave counted: the KV of earlier waves
    assert passes["room"] <= 4 < passes["tight"]  # one pass per wave / the later waves one row a pass


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_decoding_groups_fit_the_decoding_bytes(reference, monkeypatch):
    """A decoding group's stacked cache (rows x (longest prompt + the room decoding appends) x a
    token's KV bytes) stays within the decoding budget: the same answers in more, smaller groups."""
    from ragray.generation.transformers.strategy import kv_bytes_per_token

    prompts = _subset_prompts()
    want = [g.text for g in reference.generate(prompts)]
    gen = _gpu(reference, tokens_per_pass=100_000, static_decode=False, draft_tokens=0)
    per_token = kv_bytes_per_token(gen.engine.model)
    longest = max(len(ids) for ids in gen.prompt_token_ids(prompts))
    engine = _bytes_bounded(gen, monkeypatch, decode_bytes=3 * (longest + MAX_TOKENS) * per_token,
                            kv_token_bytes=per_token)
    decode, groups = engine.decoder.one_token, []

    def counted(cache, mask, lengths, *args):
        groups.append(len(lengths))
        assert len(lengths) * (mask.shape[1] + MAX_TOKENS) <= 3 * (longest + MAX_TOKENS)  # the bytes bound
        return decode(cache, mask, lengths, *args)

    monkeypatch.setattr(engine.decoder, "one_token", counted)
    assert [g.text for g in gen.generate(prompts)] == want
    # the rows bound would take every prompt in one group; the bytes bound cut them
    assert engine.batch_size >= len(prompts) and len(groups) > 1 and sum(groups) == len(prompts)


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_a_generate_calls_kv_is_carried_only_within_the_plans_bytes(reference, monkeypatch):
    prompts = ablation_prompts()[:2]
    for plan_bytes, carried in ((1 << 40, 2), (1, 0)):
        gen = _gpu(reference, tokens_per_pass=100_000)
        engine = _bytes_bounded(gen, monkeypatch, plan_bytes=plan_bytes)
        gen.generate(prompts)
        assert len(engine.prefill._carried) == carried
