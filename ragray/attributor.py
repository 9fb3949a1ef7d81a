"""One loaded model, many questions: :class:`Attributor` holds a model and ragray's settings and
offers the notebook verbs as methods.

    import ragray
    with ragray.Attributor("smollm2", top_k=5) as a:   # the model loads here, once
        r = a.attribute("When was the lighthouse first lit?", passages)
        run = a.run(df)                                 # the same model, not loaded again
        faithful = a.interpret(df, limit=5)

Each method is the module verb of the same name (:mod:`ragray.api`) with the held model and the
settings given here; a call's own keywords and ``settings`` add to those, except what would need
another model (``model``, ``backend``, ``dtype`` and every ``generation.*`` setting: make another
Attributor for that). ``close()`` (or leaving the ``with`` block) frees the model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ragray import api
from ragray.errors import InputError

__all__ = ["Attributor"]

#: keywords that choose the model: fixed when an Attributor is made
_MODEL_KEYWORDS = ("model", "backend", "dtype")


class Attributor:
    """A model loaded once and ragray's settings for it; ``.attribute()``, ``.run()``,
    ``.interpret()`` and ``.audit_retrieval()`` as the module verbs. ``model``: a name or path (the
    config's default, the packaged SmolLM2, when None), a transformers model with ``tokenizer``, or
    a ragray generator; ``config``, ``settings`` and the flag-like keywords as :func:`ragray.run`."""

    def __init__(self, model: Any = None, *, tokenizer: Any = None, config: Any = None,
                 settings: Mapping[str, Any] | None = None, progress: bool = True, **keywords: Any) -> None:
        from ragray.pipeline.generators import open_generator

        self.progress = progress  # each call's default
        if isinstance(model, (str, Path)):
            keywords["model"] = str(model)
        self.config = api._config(config, settings, keywords)
        given = api._generator(None if isinstance(model, (str, Path)) else model, tokenizer, self.config)
        self._owned = given is None  # loaded here: closed here
        self.generator = given if given is not None else open_generator(self.config)

    def _call(self, verb: Any, args: tuple[Any, ...], settings: Mapping[str, Any] | None,
              keywords: dict[str, Any]) -> Any:
        if self.generator is None:
            raise InputError("this Attributor is closed: make a new one")
        fixed = sorted({*(k for k in _MODEL_KEYWORDS if keywords.get(k) is not None),
                        *(k for k in settings or {} if k.startswith("generation."))})
        if fixed:
            raise InputError(f"{', '.join(fixed)}: this Attributor holds {self.config.generation.model} "
                             f"({self.config.generation.backend}); make another Attributor for another model")
        keywords.setdefault("progress", self.progress)
        return verb(*args, config=self.config, model=self.generator, settings=settings, **keywords)

    def attribute(self, question: str, passages: Iterable[Any], *, settings: Mapping[str, Any] | None = None,
                  **keywords: Any) -> api.Attribution:
        """Which of ``passages`` the held model's answer to ``question`` used (:func:`ragray.attribute`)."""
        return self._call(api.attribute, (question, passages), settings, keywords)

    def run(self, data: Any = None, *, settings: Mapping[str, Any] | None = None, **keywords: Any) -> api.Run:
        """Which passages each answer used (:func:`ragray.run`), with the held model."""
        return self._call(api.run, (data,), settings, keywords)

    def interpret(self, data: Any = None, *, settings: Mapping[str, Any] | None = None,
                  **keywords: Any) -> api.Run:
        """Are the explanations faithful (:func:`ragray.interpret`), with the held model."""
        return self._call(api.interpret, (data,), settings, keywords)

    def audit_retrieval(self, data: Any = None, *, settings: Mapping[str, Any] | None = None,
                        **keywords: Any) -> api.Run:
        """Is retrieval trustworthy (:func:`ragray.audit_retrieval`); the held model explains failures
        where ``audit.llm`` is on."""
        return self._call(api.audit_retrieval, (data,), settings, keywords)

    def close(self) -> None:
        """Free the model (a model given already loaded is the caller's: left as it is)."""
        gen, self.generator = self.generator, None
        if gen is not None and self._owned:
            gen.close()

    def __enter__(self) -> Attributor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        g = self.config.generation
        state = "closed" if self.generator is None else "loaded"
        return f"Attributor(model={g.model!r}, backend={g.backend!r}, {state})"
