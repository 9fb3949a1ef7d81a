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

__all__ = ["answer_token_ids", "encode_rendered", "render_chat"]


def render_chat(tokenizer: Any, prompt: ChatPrompt) -> str:
    """The prompt as text through the tokenizer's chat template, ending with the assistant cue."""
    messages = [{"role": m.role, "content": m.content} for m in prompt]
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def _adds_bos(tokenizer: Any) -> bool:
    bos = getattr(tokenizer, "bos_token_id", None)
    return bos is not None and list(tokenizer.encode("a"))[:1] == [bos]


def encode_rendered(tokenizer: Any, text: str) -> list[int]:
    """Token ids of rendered chat text (special tokens as written by the template)."""
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    bos = getattr(tokenizer, "bos_token", None)
    if _adds_bos(tokenizer) and not (bos and text.startswith(bos)):
        ids.insert(0, tokenizer.bos_token_id)
    return ids


def answer_token_ids(tokenizer: Any, prompt_text: str, prompt_ids: list[int], answer: str) -> list[int]:
    """The answer's token ids as they follow ``prompt_ids`` (see the module docstring)."""
    full = encode_rendered(tokenizer, prompt_text + answer)
    if full[: len(prompt_ids)] == prompt_ids:
        return full[len(prompt_ids) :]
    return list(tokenizer.encode(answer, add_special_tokens=False))
