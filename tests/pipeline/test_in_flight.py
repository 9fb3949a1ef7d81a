"""Questions in flight against a loopback OpenAI-compatible server (ragray.loopback): the same
tables as one question at a time, nothing lost or sent twice under a 429 storm, and a rerun that
costs no calls."""

from __future__ import annotations

import math

import httpx
import pyarrow.parquet as pq
import pytest

from ragray.config import load_config
from ragray.loopback import LoopbackServer
from ragray.pipeline import run_influence

pytest.importorskip("uvicorn")

#: what differs between two runs of the same questions: timings
TIMED = {"seconds", "latency_s"}


def config(server, tmp_path, *overrides):
    return load_config(None, [
        "data.limit=6", "generation.backend=openai", f"generation.openai.base_url={server.base_url}",
        "generation.model=loopback", "influence.mode=loo", "metrics.embedding=false",
        "generation.openai.backoff_s=0.01", f"cache.dir={tmp_path / 'cache'}", *overrides,
    ])


def _same(v):
    return "NaN" if isinstance(v, float) and math.isnan(v) else v  # NaN (unmeasured) equals NaN here


def tables(out):
    return {name: [{k: _same(v) for k, v in row.items() if k not in TIMED}
                   for row in pq.read_table(out / f"{name}.parquet").to_pylist()]
            for name in ("questions", "passages", "calls")}


def test_in_flight_gives_the_tables_of_one_at_a_time(tmp_path):
    with LoopbackServer(latency=0.05, limit=32) as server:
        one = run_influence(config(server, tmp_path, "execution.max_questions_in_flight=1", "cache.calls=false"),
                            tmp_path / "one", progress=False)
        sequential_peak = server.stats.max_in_flight
        many = run_influence(config(server, tmp_path, "execution.max_questions_in_flight=6", "cache.calls=false"),
                             tmp_path / "many", progress=False)
    assert tables(one.out) == tables(many.out)
    assert one.summary.errors == 0 and one.summary.n_calls == 6 * 11
    assert sequential_peak <= 11 < server.stats.max_in_flight  # several questions' prompts at once


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_a_429_storm_loses_and_duplicates_nothing(tmp_path):
    # every other request (counted across all of them): 429. Which request draws the 429s depends on
    # timing, so one request may draw several in a row. At even odds per try, 9 in a row (8 retries)
    # for one of 66 requests is ~12% a run, and one full-suite run failed so; with 20 retries ~3e-5
    with LoopbackServer(latency=0.02, limit=64, throttle_every=2) as server:
        res = run_influence(config(server, tmp_path, "cache.calls=false", "generation.openai.max_retries=20"),
                            tmp_path / "storm", progress=False)
        stats = server.stats.as_dict()
    assert res.summary.errors == 0 and res.summary.n_failed_calls == 0
    assert stats["throttled"] >= stats["answered"] - 1 and stats["answered"] == 6 * 11  # each answered once
    assert stats["answered_twice"] == 0
    with LoopbackServer(latency=0.02, limit=64) as calm:
        quiet = run_influence(config(calm, tmp_path, "cache.calls=false"), tmp_path / "calm", progress=False)
    assert tables(res.out) == tables(quiet.out)


def test_a_timeout_is_recorded_on_its_question_and_the_run_goes_on(tmp_path):
    with LoopbackServer(latency=0.5, limit=64) as server:
        res = run_influence(config(server, tmp_path, "data.limit=2", "cache.calls=false",
                                   "generation.openai.timeout_s=0.1", "generation.openai.max_retries=0"),
                            tmp_path / "slow", progress=False)
    assert res.summary.errors == 2 and all("timed out" in e["error"] for e in res.summary.error_questions)


def test_a_rerun_costs_no_calls(tmp_path):
    with LoopbackServer(latency=0.02, limit=64) as server:
        first = run_influence(config(server, tmp_path), tmp_path / "first", progress=False)
        paid = server.stats.answered
        again = run_influence(config(server, tmp_path), tmp_path / "again", progress=False)
        assert server.stats.answered == paid == 6 * 11  # nothing sent the second time
    assert first.summary.cache["calls_miss"] == 66 and first.summary.cache["calls_hit"] == 0
    assert again.summary.cache["calls_hit"] == 66 and again.summary.cache["calls_miss"] == 0
    drop = {"seconds", "latency_s"}
    assert [{k: v for k, v in r.items() if k not in drop} for r in tables(first.out)["questions"]] == \
        [{k: v for k, v in r.items() if k not in drop} for r in tables(again.out)["questions"]]


def test_loopback_server_answers_like_an_endpoint():
    with LoopbackServer(latency=0.01, limit=2) as server:
        r = httpx.post(f"{server.base_url}/chat/completions", json={
            "model": "x", "messages": [{"role": "user", "content": "Passages:\n[1] The Tern sails daily\n[2] x"}]})
        assert r.json()["choices"][0]["message"]["content"] == "The Tern sails"
        s = httpx.post(f"{server.base_url}/completions", json={"prompt": [5, 6, 7], "echo": True, "logprobs": 1})
        lps = s.json()["choices"][0]["logprobs"]["token_logprobs"]
        assert lps[0] is None and len(lps) == 3 and all(v < 0 for v in lps[1:])
        assert httpx.get(f"http://127.0.0.1:{server.port}/stats").json()["answered"] == 2




def scripted_dataset(tmp_path, n=8):
    import json

    rows = []
    for i in range(n):
        passages = [{"id": f"q{i}-p{j}", "text": (f"ANSWER=w{i} " if j == i % 3 else "") + f"filler {i} {j} words"}
                    for j in range(4)]
        rows.append({"id": f"q{i}", "question": f"Question {i}?", "answers": [f"w{i}"], "passages": passages})
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("mode", ["loo", "logprob_share"])
def test_an_engine_gets_every_waiting_question_in_one_call(tmp_path, mode):
    """One in-process engine (concurrent_calls False): the questions in flight are merged into one
    engine call, each question's prompts together; the tables are those of one at a time."""
    from ragray.generation.scripted import ScriptedGenerator

    data = scripted_dataset(tmp_path)

    def cfg(n):
        return load_config(None, [f"data.path={data}", "retrieval.top_k=4", "metrics.embedding=false",
                                  f"influence.mode={mode}", f"execution.max_questions_in_flight={n}"])

    one_gen, many_gen = ScriptedGenerator(), ScriptedGenerator()
    one = run_influence(cfg(1), tmp_path / "one", generator=one_gen, progress=False)
    many = run_influence(cfg(4), tmp_path / "many", generator=many_gen, progress=False)
    assert tables(one.out) == tables(many.out)
    assert sum(many_gen.batches) == sum(one_gen.batches)  # the same prompts, fewer calls
    per_question = 5 if mode == "loo" else 1  # loo: baseline + 4 drops; logprob_share: the baseline
    # 8 questions, 4 in flight: two full waves of first calls
    assert one_gen.batches == [per_question] * 8 and many_gen.batches == [4 * per_question] * 2


def test_an_engine_prefix_cache_is_reported_in_the_run(tmp_path):
    """An engine that counts its prefix-cache hits (vLLM) has them in summary.json's cache block."""
    from types import SimpleNamespace

    from ragray.generation.scripted import ScriptedGenerator

    class Engine(ScriptedGenerator):
        def prefix_cache_stats(self):
            return SimpleNamespace(prompt_tokens=1000, cached_tokens=400)

    data = scripted_dataset(tmp_path, n=2)
    res = run_influence(load_config(None, [f"data.path={data}", "retrieval.top_k=4", "metrics.embedding=false"]),
                        tmp_path / "r", generator=Engine(), progress=False)
    assert res.summary.cache["prefix_cache_prompt_tokens"] == 1000 and res.summary.cache["prefix_cache_hit_tokens"] == 400


def test_a_failing_merged_call_fails_only_its_question(tmp_path):
    """An engine that rejects one question's prompts (too long, say) fails that question alone, as
    it would one question at a time; the others are answered."""
    from ragray.errors import BackendError
    from ragray.generation.scripted import ScriptedGenerator

    class Picky(ScriptedGenerator):
        def logprobs(self, prompts, answers):
            if any("Question 2?" in p[-1].content for p in prompts):
                raise BackendError("prompt too long")
            return super().logprobs(prompts, answers)

    data = scripted_dataset(tmp_path, n=4)

    def run(n, out):
        cfg = load_config(None, [f"data.path={data}", "retrieval.top_k=4", "metrics.embedding=false",
                                 "influence.mode=logprob_share", f"execution.max_questions_in_flight={n}"])
        return run_influence(cfg, out, generator=Picky(), progress=False)

    one, many = run(1, tmp_path / "one"), run(4, tmp_path / "many")
    assert tables(one.out) == tables(many.out)
    assert [e["question_id"] for e in many.summary.error_questions] == ["q2"]


def test_one_in_flight_serves_batch_after_batch():
    """A Ray actor keeps one InFlight (one processor built against its backend) for every batch:
    each batch goes to the engine as one wave, the next batch starts fresh."""
    from ragray.generation.base import Message
    from ragray.generation.scripted import ScriptedGenerator
    from ragray.pipeline.in_flight import InFlight

    gen = ScriptedGenerator()
    flight = InFlight(gen, 3)

    def process(word):
        return flight.backend.generate([(Message("user", f"ANSWER={word}"),)])[0].text

    assert sorted(flight.run(["a", "b", "c"], process)) == ["a", "b", "c"]
    assert sorted(flight.run(["d", "e"], process)) == ["d", "e"]
    assert gen.batches == [3, 2]


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_jsd_mode_on_an_endpoint_reads_its_top_logprobs(tmp_path):
    """influence.mode jsd through an OpenAI-compatible endpoint: every scored arm asks for the top
    20 log-probabilities; the JSD comes from them (lower bound: ragray.generation.divergence)."""
    pytest.importorskip("transformers")
    with LoopbackServer(latency=0.0, limit=64) as server:
        res = run_influence(config(server, tmp_path, "data.limit=2", "influence.mode=jsd",
                                   "generation.openai.tokenizer=smollm2"), tmp_path / "j", progress=False)
        top = server.stats.answered
    ps = pq.read_table(res.out / "passages.parquet").to_pylist()
    qs = pq.read_table(res.out / "questions.parquet").to_pylist()
    assert all(q["influence_mode"] == "jsd" and q["error"] is None for q in qs)
    assert all(p["jsd"] is not None and p["jsd"] >= 0 and p["logprob_drop"] is not None for p in ps)
    assert top > 2  # the baselines and the scored arms went to the server


def test_engine_counts_of_a_merged_call_are_shared_by_its_questions(tmp_path):
    """An engine that counts its work: with questions in flight each question's row holds its share
    of the merged calls (by prompts sent), the shares add up to what the engine did, and the
    summary's per-question passes fall with questions in flight."""
    from ragray.generation.engine_counts import EngineCounts
    from ragray.generation.scripted import ScriptedGenerator

    class Counting(ScriptedGenerator):
        def __init__(self):
            super().__init__()
            self.counts = EngineCounts()

        def engine_counts(self):
            return self.counts.snapshot()

        def generate(self, prompts):
            self.counts.add(forward_passes=1, tokens_computed=len(prompts))
            return super().generate(prompts)

        def logprobs(self, prompts, answers):
            self.counts.add(forward_passes=1, tokens_computed=len(prompts))
            return super().logprobs(prompts, answers)

    data = scripted_dataset(tmp_path)

    def run(n):
        gen = Counting()
        cfg = load_config(None, [f"data.path={data}", "retrieval.top_k=4", "metrics.embedding=false",
                                 "influence.mode=logprob_share", f"execution.max_questions_in_flight={n}"])
        res = run_influence(cfg, tmp_path / f"r{n}", generator=gen, progress=False)
        rows = pq.read_table(res.out / "questions.parquet").to_pylist()
        return gen.counts.snapshot(), rows, res.summary.engine

    total1, rows1, engine1 = run(1)
    total4, rows4, engine4 = run(4)
    for total, rows in ((total1, rows1), (total4, rows4)):
        assert sum(r["forward_passes"] for r in rows) == pytest.approx(total["forward_passes"])
        assert sum(r["tokens_computed"] for r in rows) == pytest.approx(total["tokens_computed"])
    assert total4["tokens_computed"] == total1["tokens_computed"]  # the same prompts
    assert engine4["forward_passes_per_question"] < engine1["forward_passes_per_question"]
    assert all(float(r["forward_passes"]).is_integer() for r in rows1)  # alone: whole calls


def test_calls_per_second_counts_overlapping_questions_once():
    """Known truth: 352 calls made by 32 questions in flight over a 390 s loop whose question
    seconds add up to ~11,700 s is 0.90 calls/s, not 0.03; one question at a time (summed seconds
    under the loop's wall time) and a resumed run keep the summed-seconds rate."""
    from ragray.pipeline.executors import _overlap_aware_rate
    from ragray.rows.summaries import RunSummary

    overlapped = RunSummary.from_dict({"n_questions": 32, "n_calls": 352, "calls_per_second": 352 / 11_700})
    assert _overlap_aware_rate(overlapped, 390.0, resumed=0).calls_per_second == pytest.approx(0.9026, abs=1e-4)
    assert _overlap_aware_rate(overlapped, 390.0, resumed=3) is overlapped
    alone = RunSummary.from_dict({"n_questions": 4, "n_calls": 44, "calls_per_second": 44 / 30.0})
    assert _overlap_aware_rate(alone, 35.0, resumed=0) is alone  # load time in the loop: summed rate kept
    assert _overlap_aware_rate(RunSummary.from_dict({"n_questions": 0}), 1.0, resumed=0).calls_per_second is None
