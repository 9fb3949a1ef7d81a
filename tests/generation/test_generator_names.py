"""Log-probability scoring is ``Generator.logprobs``; ``score`` is answer quality (``ragray.score``).
The old name keeps working for a release, with a deprecation warning, both ways round."""

from __future__ import annotations

import pytest

from ragray.generation.base import Generation, Generator


class _New(Generator):
    name = "new"

    @classmethod
    def from_config(cls, config):
        return cls()

    @property
    def model_id(self) -> str:
        return "new"

    def generate(self, prompts):
        return [Generation("x", 1, 1, 0.0) for _ in prompts]

    def logprobs(self, prompts, answers):
        return [-1.0 * len(a) for a in answers]


def test_calling_score_warns_and_gives_the_logprobs():
    gen = _New()
    with pytest.warns(DeprecationWarning, match="call Generator.logprobs"):
        assert gen.score([()], ["abc"]) == gen.logprobs([()], ["abc"]) == [-3.0]


def test_a_generator_written_with_score_still_scores():
    with pytest.warns(DeprecationWarning, match="rename it logprobs"):
        class Old(Generator):
            name = "old"

            @classmethod
            def from_config(cls, config):
                return cls()

            @property
            def model_id(self) -> str:
                return "old"

            def generate(self, prompts):
                return []

            def score(self, prompts, answers):
                return [-2.0] * len(answers)

    assert Old().logprobs([(), ()], ["a", "b"]) == [-2.0, -2.0]


def test_overriding_score_on_a_backend_does_not_loop():
    """A subclass of a working backend that overrides the old name reaches the backend's logprobs
    (no alias: the inherited logprobs is concrete), so its super().score() cannot recurse."""
    class Sub(_New):
        def score(self, prompts, answers):
            return super().score(prompts, answers)

    with pytest.warns(DeprecationWarning):
        assert Sub().score([()], ["ab"]) == [-2.0]
