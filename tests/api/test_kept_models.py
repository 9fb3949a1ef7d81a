"""One model load per process: the API keeps a loaded model and reuses it (``ragray.clear_models``)."""

import pytest

import ragray
from ragray.errors import InputError
from ragray.generation import kept
from ragray.generation.kept import kept_models
from ragray.generation.scripted import ScriptedGenerator
from ragray.generation.transformers.backend import TransformersGenerator

PASSAGES = ["Kell has a lighthouse.", "The ferry to Kell is the Tern ANSWER=tern"]


class Shared(ScriptedGenerator):
    """A scripted model that shares itself like a loaded transformers model does."""

    closed = 0

    def __init__(self, config=None):
        super().__init__()
        self.config = config

    def with_config(self, config):
        return self

    def close(self):
        type(self).closed += 1


@pytest.fixture()
def loads(monkeypatch):
    ragray.clear_models()
    seen = []

    def from_config(cls, config):
        seen.append(config)
        return Shared(config)

    monkeypatch.setattr(TransformersGenerator, "from_config", classmethod(from_config))
    yield seen
    ragray.clear_models()


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_two_attribute_calls_load_the_model_once(loads, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = ragray.attribute("Which ferry sails to Kell?", PASSAGES, answers="tern", progress=False)
    second = ragray.attribute("Which ferry sails to Kell?", PASSAGES, answers="tern", progress=False,
                              settings={"generation.max_tokens": 16})  # decoding options do not define the load
    assert len(loads) == 1 and first.answer == second.answer == "tern"
    assert kept_models() == ["transformers:smollm2 (auto, auto)"]
    ragray.run([{"question": "Which ferry sails to Kell?", "passages": PASSAGES}], progress=False)
    assert len(loads) == 1  # ragray.run shares it too
    ragray.attribute("Which ferry sails to Kell?", PASSAGES, dtype="float32", progress=False)
    assert len(loads) == 2  # another dtype is another load
    assert ragray.clear_models() == 2 and Shared.closed >= 2 and kept_models() == []
    ragray.attribute("Which ferry sails to Kell?", PASSAGES, progress=False)
    assert len(loads) == 3  # freed: the next call loads again
    ragray.clear_models()
    ragray.audit_retrieval("demo", limit=2, progress=False)
    assert len(loads) == 3 and kept_models() == []  # an audit without its LLM steps loads no model



@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_bad_input_fails_before_the_model_loads(loads, tmp_path, monkeypatch, capsys):
    """A model loads when the first question needs it: a missing dataset, a bad row, a run folder
    that is refused or a finished run resumed costs no load (seconds on a laptop, minutes for a
    large model on a GPU). The CLI goes through the same call."""
    from ragray.adapters.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="dataset not found: nowhere.jsonl"):
        ragray.run("nowhere.jsonl", progress=False)
    with pytest.raises(InputError, match="dataset not found"):
        ragray.interpret("nowhere.jsonl", progress=False)
    with pytest.raises(InputError, match="dataset not found"):
        ragray.audit_retrieval("nowhere.jsonl", progress=False, settings={"audit.llm": True})
    (tmp_path / "bad.jsonl").write_text('{"id": "q1", "question": " ", "passages": []}\n')
    with pytest.raises(InputError, match="bad.jsonl:1: 'question' is empty"):
        ragray.run(str(tmp_path / "bad.jsonl"), progress=False)
    assert main(["run", "--dataset", "nowhere.jsonl", "--no-progress"]) == 2
    assert "dataset not found" in capsys.readouterr().err and loads == []
    ragray.run("demo", limit=1, out=tmp_path / "r", progress=False)
    assert len(loads) == 1
    ragray.clear_models()
    with pytest.raises(InputError, match="already holds a run"):
        ragray.run("demo", limit=1, out=tmp_path / "r", progress=False)
    finished = ragray.run("demo", limit=1, out=tmp_path / "r", resume=True, progress=False)
    assert len(loads) == 1 and kept_models() == [] and len(finished.questions) == 1  # nothing left to run
    ragray.run("demo", limit=2, out=tmp_path / "r2", progress=False)
    assert len(loads) == 2  # a question to run: the model loads

@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_engine_settings_share_the_weights_and_two_models_at_most_stay_loaded(loads, tmp_path, monkeypatch, caplog):
    import gc
    import weakref

    monkeypatch.chdir(tmp_path)
    ask = dict(question="Which ferry sails to Kell?", passages=PASSAGES, progress=False)
    ragray.attribute(**ask)
    # the engine's strategy and sizes build a new engine on the same weights: not a second copy
    ragray.attribute(**ask, settings={"generation.transformers.batch_size": 4,
                                      "generation.transformers.strategy": "gpu"})
    assert len(loads) == 1
    first = weakref.ref(next(iter(kept._KEPT.values())))
    ragray.attribute(**ask, dtype="float32")
    ragray.attribute(**ask)  # used again: now the most recent
    assert len(loads) == 2 and kept_models() == ["transformers:smollm2 (float32, auto)",
                                                 "transformers:smollm2 (auto, auto)"]
    closed = Shared.closed
    with caplog.at_level("INFO", logger="ragray.generation.kept"):
        ragray.attribute(**ask, dtype="bfloat16")  # a third: the one used longest ago is let go
    assert len(loads) == 3 and kept_models() == ["transformers:smollm2 (auto, auto)",
                                                 "transformers:smollm2 (bfloat16, auto)"]
    assert "let go of the kept model transformers:smollm2 (float32, auto)" in caplog.text
    assert Shared.closed == closed  # not closed (a call may still run on it): freed once no one holds it
    gc.collect()
    assert first() is not None  # the first model was used most recently but one: still kept
    ragray.attribute(**ask, dtype="float32")
    assert len(loads) == 4  # let go: loaded again
    gc.collect()
    assert first() is None  # (auto, auto) was let go this time, and nothing else held it


@pytest.mark.slow
def test_a_kept_model_serves_both_engines_on_one_copy_of_its_weights():
    """The packaged SmolLM2, kept once: a call with the gpu strategy's engine runs on the same
    weights as a call at defaults (the cpu engine on CPU), with the same log-probs."""
    from ragray.config import GenerationConfig
    from ragray.generation.base import Message
    from ragray.generation.kept import clear_models, kept_generator

    clear_models()
    try:
        plain = kept_generator(GenerationConfig(device="cpu"))
        gpu = kept_generator(GenerationConfig(device="cpu", transformers={"strategy": "gpu", "batch_size": 4}))
        assert kept_models() == ["transformers:smollm2 (auto, cpu)"]
        assert plain.strategy == "cpu" and gpu.strategy == "gpu" and plain._model is gpu._model
        prompt = [(Message("system", "Answer briefly."), Message("user", "Which ferry sails to Kell? The Tern sails to Kell."))]
        a, b = plain.logprobs(prompt, ["The Tern"]), gpu.logprobs(prompt, ["The Tern"])
        assert a == pytest.approx(b, abs=1e-4)
    finally:
        clear_models()
