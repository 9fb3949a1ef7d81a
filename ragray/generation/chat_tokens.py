"""Render chat prompts and tokenize them the way the model saw them, for backends that hold a
Hugging Face tokenizer (vLLM, and OpenAI-compatible scoring with a local tokenizer).

Chat templates write their special tokens themselves, so rendered text is encoded WITHOUT the
tokenizer's special tokens (encoding it with them would double a BOS, e.g. Llama 3); a BOS is
added only when the tokenizer normally adds one and the rendered text lacks it. A scored answer
is tokenized together with its prompt (as the model would have produced it), or alone when that
would merge tokens across the prompt/answer seam.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ragray.generation.base import ChatPrompt

__all__ = ["answer_token_ids", "encode_many", "encode_rendered", "encode_scored", "render_chat"]

T = TypeVar("T")


def render_chat(tokenizer: Any, prompt: ChatPrompt) -> str:
    """The prompt as text through the tokenizer's chat template, ending with the assistant cue."""
    messages = [{"role": m.role, "content": m.content} for m in prompt]
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def _known(tokenizer: Any, name: str, find: Callable[[], T]) -> T:
    """A fact about ``tokenizer`` found once per tokenizer object (kept on it as ``name``)."""
    known = getattr(tokenizer, name, None)
    if known is None:
        known = find()
        try:
            setattr(tokenizer, name, known)
        except AttributeError:  # a tokenizer that takes no attributes: found again next time
            pass
    return known


def _adds_bos(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` adds a BOS by itself."""
    bos = getattr(tokenizer, "bos_token_id", None)
    return _known(tokenizer, "_ragray_adds_bos",
                  lambda: bos is not None and list(tokenizer.encode("a"))[:1] == [bos])


def _plain(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Token ids of texts with no special tokens and no BOS added (a fast tokenizer encodes a batch
    on all cores: the prompts of an engine call are ~1 ms each)."""
    if len(texts) > 1 and getattr(tokenizer, "is_fast", False):
        return [list(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    return [list(tokenizer.encode(text, add_special_tokens=False)) for text in texts]


def encode_many(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Token ids of rendered chat texts, as :func:`encode_rendered` gives them one by one."""
    encoded = _plain(tokenizer, texts)
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


def _split_tokens(tokenizer: Any) -> tuple[str, ...]:
    """The added tokens the tokenizer splits its input at before anything else, matched as
    written: special, not normalized, eating no whitespace, not whole-word only (a chat template's
    ``<|im_start|>``, ``<|start_header_id|>``...). Empty where the tokenizer says nothing of them."""
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return _known(tokenizer, "_ragray_split_tokens", lambda: tuple(
        t.content for t in added.values() if getattr(t, "special", False) and t.content
        and not (getattr(t, "normalized", True) or getattr(t, "lstrip", True)
                 or getattr(t, "rstrip", True) or getattr(t, "single_word", True))))


def _tail(text: str, splits: tuple[str, ...]) -> str | None:
    """What follows ``text``'s last split token (a chat prompt's ``assistant\\n``); None without one."""
    ends = [at + len(token) for token in splits if (at := text.rfind(token)) >= 0]
    return text[max(ends):] if ends else None


def encode_scored(tokenizer: Any, texts: list[str], answers: list[str]) -> list[tuple[list[int], list[int]]]:
    """``(prompt_ids, answer_ids)`` of each rendered prompt and the answer scored after it, as
    :func:`encode_rendered` and :func:`answer_token_ids` give them, encoded in one batch.

    The tokenizer splits its input at a chat template's special tokens before anything else, so
    a prompt followed by its answer encodes as the prompt's ids up to its last special token, then
    the text after it (``assistant\\n`` and the answer) on its own. Each long prompt is encoded once,
    not twice (with and without its answer), and each answer once per call: half the host time
    of a scoring call's tokenization, which the device waits for. The first prompt's ids are
    checked against encoding the whole text; a tokenizer that does not split so (or a prompt with
    no special token) is encoded whole, as before."""
    prompts = encode_many(tokenizer, texts)
    splits = _split_tokens(tokenizer)
    tails = [_tail(text, splits) if splits else None for text in texts]
    pieces = sorted({piece for tail, answer in zip(tails, answers) if tail is not None
                     for piece in (tail, tail + answer)})
    piece_ids = dict(zip(pieces, _plain(tokenizer, pieces)))
    fulls: list[list[int] | None] = []
    for ids, tail, answer in zip(prompts, tails, answers):
        head = len(ids) - len(piece_ids[tail]) if tail is not None else -1
        exact = tail is not None and head >= 0 and ids[head:] == piece_ids[tail]
        fulls.append(ids[:head] + piece_ids[tail + answer] if exact else None)
    first = next((i for i, full in enumerate(fulls) if full is not None), None)
    if first is not None and encode_rendered(tokenizer, texts[first] + answers[first]) != fulls[first]:
        fulls = [None] * len(texts)  # this tokenizer merges across its special tokens: whole texts
    whole = [i for i, full in enumerate(fulls) if full is None]
    for i, full in zip(whole, encode_many(tokenizer, [texts[i] + answers[i] for i in whole])):
        fulls[i] = full
    return [(ids, _answer_ids(tokenizer, ids, full, answer))  # type: ignore[arg-type]
            for ids, full, answer in zip(prompts, fulls, answers)]
