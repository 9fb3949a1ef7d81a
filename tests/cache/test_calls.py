"""The persistent call cache: a repeated call is never paid twice, and an entry is never served
for another model, prompt, answer or sampling setting."""

from __future__ import annotations

import math
import threading

import pytest

from ragray.cache.calls import CachedGenerator, CallStore
from ragray.config import GenerationConfig
from ragray.generation.base import Message
from ragray.generation.scripted import ScriptedGenerator


class Paid(ScriptedGenerator):
    """A scripted model that counts what reaches it, with a settable identity, worth caching."""

    cacheable = True

    def __init__(self, model="m1", fail_on=None):
        super().__init__(fail_on=fail_on)
        self.model = model
        self.scored: list[tuple] = []

    @property
    def model_id(self):
        return self.model

    def logprobs(self, prompts, answers):
        self.scored += list(zip(prompts, answers))
        return [float("nan") if "NAN" in p[-1].content else -float(len(a)) for p, a in zip(prompts, answers)]


def prompt(text):
    return (Message("user", text),)


def cached(inner, store, **gen):
    return CachedGenerator(inner, store, GenerationConfig(**gen))


@pytest.fixture()
def store(tmp_path):
    return CallStore(tmp_path / "calls.sqlite")


def test_a_repeated_call_is_answered_from_the_file(store):
    first = cached(Paid(), store)
    ps = [prompt("ANSWER=tern one"), prompt("ANSWER=puffin two")]
    a = first.generate(ps)
    assert first.stats.as_dict() == {"calls_hit": 0, "calls_miss": 2, "calls_uncached": 0}
    again = Paid()
    b = cached(again, store).generate(ps)  # a new process would open the same file
    assert again.calls == [] and [g.text for g in b] == [g.text for g in a] == ["tern", "puffin"]
    assert all(g.latency_s == 0.0 for g in b)  # a hit took no time
    mixed = Paid()
    out = cached(mixed, store).generate([ps[1], prompt("ANSWER=gull three"), ps[0]])
    assert mixed.batches == [1] and [g.text for g in out] == ["puffin", "gull", "tern"]  # misses only, in order


@pytest.mark.parametrize("change", [
    {"model": "m2"}, {"max_tokens": 16}, {"seed": 1},
])
def test_never_served_for_another_model_or_sampling(store, change):
    ps = [prompt("ANSWER=tern")]
    cached(Paid(), store).generate(ps)
    model = change.pop("model", "m1")
    other = Paid(model)
    cached(other, store, **change).generate(ps)
    assert other.batches == [1]  # asked again


def test_never_served_for_another_prompt_or_answer(store):
    gen = cached(Paid(), store)
    gen.generate([prompt("ANSWER=tern")])
    inner = Paid()
    cached(inner, store).generate([prompt("ANSWER=tern ")])  # one space more is another prompt
    assert inner.batches == [1]
    gen.logprobs([prompt("q")], ["tern"])
    scorer = Paid()
    again = cached(scorer, store)
    assert again.logprobs([prompt("q"), prompt("q")], ["tern", "gull"]) == [-4.0, -4.0]
    assert scorer.scored == [(prompt("q"), "gull")]  # the answer is part of the key


def test_sampled_calls_failures_and_nan_scores_are_not_kept(store):
    hot = Paid()
    gen = cached(hot, store, temperature=0.7)
    gen.generate([prompt("ANSWER=tern")])
    gen.generate([prompt("ANSWER=tern")])
    assert hot.batches == [1, 1] and gen.stats.calls_uncached == 2  # a sampled answer is not a function of its key
    failing = cached(Paid(fail_on="tern"), store)
    assert not failing.generate([prompt("ANSWER=tern")])[0].ok
    retry = Paid()
    assert cached(retry, store).generate([prompt("ANSWER=tern")])[0].ok and retry.batches == [1]
    cached(Paid(), store).logprobs([prompt("NAN")], ["x"])
    later = Paid()
    assert math.isnan(cached(later, store).logprobs([prompt("NAN")], ["x"])[0]) and len(later.scored) == 1


def test_a_backend_that_can_score_is_probed_once(store):
    class Probed(Paid):
        probes = 0

        def scoring_problem(self):
            type(self).probes += 1
            return None

    cached(Probed(), store).scoring_problem()
    cached(Probed(), store).scoring_problem()
    assert Probed.probes == 1


def test_many_threads_and_stores_write_one_file(tmp_path):
    path = tmp_path / "calls.sqlite"

    def work(i):
        gen = cached(Paid(), CallStore(path))
        gen.generate([prompt(f"ANSWER=w{j}") for j in range(i, i + 20)])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(CallStore(path)) == 27  # w0 .. w26, each once


def test_a_prompt_asked_by_two_threads_at_once_is_sent_once(store):
    class Slow(Paid):
        def generate(self, prompts):
            import time

            time.sleep(0.2)
            return super().generate(prompts)

    inner = Slow()
    gen = cached(inner, store)
    ps = [prompt("ANSWER=tern"), prompt("ANSWER=gull")]
    out = []
    threads = [threading.Thread(target=lambda: out.append(gen.generate(ps))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(inner.batches) == 2 and len(out) == 4
    assert all([g.text for g in o] == ["tern", "gull"] for o in out)
    assert gen.stats.calls_miss == 2 and gen.stats.calls_hit == 6
