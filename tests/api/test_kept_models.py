"""One model load per process: the API keeps a loaded model and reuses it (``ragray.clear_models``)."""

import pytest

import ragray
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
