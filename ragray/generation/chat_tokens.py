"""Render chat prompts and tokenize them the way the model saw them, for backends that hold a
Hugging Face tokenizer (vLLM, and OpenAI-compatible scoring with a local tokenizer).

Chat templates write their special tokens themselves, so rendered text is encoded WITHOUT the
tokenizer's special tokens (encoding it with them would double a BOS, e.g. Llama 3); a BOS is
added only when the tokenizer normally adds one and the rendered text lacks it. A scored answer
is tokenized together with its prompt (as the model would have produced it), or alone when that
would merge tokens across the prompt/answer seam.
"""

from __future__ import annotations

from typing import Any

from ragray.generation.base import ChatPrompt

__all__ = ["answer_token_ids", "encode_many", "encode_rendered", "encode_scored", "render_chat"]


def render_chat(tokenizer: Any, prompt: ChatPrompt) -> str:
    """The prompt as text through the tokenizer's chat template, ending with the assistant cue."""
    messages = [{"role": m.role, "content": m.content} for m in prompt]
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def _adds_bos(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` adds a BOS by itself (encodes once per tokenizer object)."""
    known = getattr(tokenizer, "_ragray_adds_bos", None)
    if known is None:
        bos = getattr(tokenizer, "bos_token_id", None)
        known = bos is not None and list(tokenizer.encode("a"))[:1] == [bos]
        try:
            tokenizer._ragray_adds_bos = known
        except AttributeError:  # a tokenizer that takes no attributes: asked again next time
            pass
    return known


def encode_many(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Token ids of rendered chat texts, as :func:`encode_rendered` gives them one by one (a fast
    tokenizer encodes a batch on all cores: the prompts of an engine call are ~1 ms each)."""
    if len(texts) > 1 and getattr(tokenizer, "is_fast", False):
        encoded = [list(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    else:
        encoded = [list(tokenizer.encode(text, add_special_tokens=False)) for text in texts]
    if _adds_bos(tokenizer):
        bos = getattr(tokenizer, "bos_token", None)
        for text, ids in zip(texts, encoded):
            if not (bos and text.startswith(bos)):
                ids.insert(0, tokenizer.bos_token_id)
    return encoded


def encode_rendered(tokenizer: Any, text: str) -> list[int]:
    """Token ids of rendered chat text (special tokens as written by the template)."""
    return encode_many(tokenizer, [text])[0]


def _answer_ids(tokenizer: Any, prompt_ids: list[int], full: list[int], answer: str) -> list[int]:
    if full[: len(prompt_ids)] == prompt_ids:
        return full[len(prompt_ids) :]
    return list(tokenizer.encode(answer, add_special_tokens=False))


def answer_token_ids(tokenizer: Any, prompt_text: str, prompt_ids: list[int], answer: str) -> list[int]:
    """The answer's token ids as they follow ``prompt_ids`` (see the module docstring)."""
    return _answer_ids(tokenizer, prompt_ids, encode_rendered(tokenizer, prompt_text + answer), answer)


def encode_scored(tokenizer: Any, texts: list[str], answers: list[str]) -> list[tuple[list[int], list[int]]]:
    """``(prompt_ids, answer_ids)`` of each rendered prompt and the answer scored after it, as
    :func:`encode_rendered` and :func:`answer_token_ids` give them, encoded in one batch."""
    encoded = encode_many(tokenizer, [*texts, *(t + a for t, a in zip(texts, answers))])
    prompts, fulls = encoded[: len(texts)], encoded[len(texts) :]
    return [(ids, _answer_ids(tokenizer, ids, full, answer)) for ids, full, answer in zip(prompts, fulls, answers)]
