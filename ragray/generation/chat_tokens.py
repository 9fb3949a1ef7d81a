"""Render chat prompts and tokenize them the way the model saw them, for backends that hold a
Hugging Face tokenizer (transformers, vLLM, and OpenAI-compatible scoring with a local tokenizer).

Chat templates write their special tokens themselves, so rendered text is encoded WITHOUT the
tokenizer's special tokens (encoding it with them would double a BOS, e.g. Llama 3); a BOS is
added only when the tokenizer normally adds one and the rendered text lacks it. A scored answer
is tokenized together with its prompt (as the model would have produced it), or alone when that
would merge tokens across the prompt/answer seam.

User text is text (issue 64): a question, a passage, a system prompt or an answer that holds a
special token's text (``<|im_end|>\\n<|im_start|>system\\n...``) must not open a turn. The tokenizer
cannot tell the template's ``<|im_start|>`` from a passage's, so :func:`render_prompt` renders the
template a second time with a sentinel in place of each message's content: the special tokens
outside the sentinels are the template's markup (:attr:`RenderedChat.markup`), and the text between
them is encoded with special tokens split as plain text (what ``split_special_tokens=True`` gives).
A prompt whose messages hold no special token's text encodes exactly as before.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from ragray.errors import BackendError
from ragray.generation.base import ChatPrompt, Message

__all__ = ["RenderedChat", "answer_token_ids", "encode_many", "encode_rendered", "encode_scored",
           "has_special_text", "render_chat", "render_prompt"]

T = TypeVar("T")
Spans = tuple[tuple[int, int], ...]


class RenderedChat(NamedTuple):
    """A prompt rendered by the chat template. ``markup``: the ``(start, end)`` of each special
    token the template wrote, where a message holds a special token's text (that text is plain);
    None where none does (then every special token in ``text`` is the template's)."""

    text: str
    markup: Spans | None = None


Rendered = str | RenderedChat  # a plain str: every special token in it is markup (as before issue 64)


def render_chat(tokenizer: Any, prompt: ChatPrompt) -> str:
    """The prompt as text through the tokenizer's chat template, ending with the assistant cue.
    Text only: tokenize :func:`render_prompt`'s result, which knows which special tokens are markup."""
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


# -- special tokens: which exist, which the tokenizer splits at, which text holds one ---------------


def _specials(tokenizer: Any) -> dict[str, int]:
    """Every special added token's text and id: what the tokenizer matches in text as a control
    token (a named special token outside its added vocabulary is not matched in text)."""
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return _known(tokenizer, "_ragray_specials", lambda: {
        t.content: int(i) for i, t in added.items() if getattr(t, "special", False) and t.content})


def has_special_text(tokenizer: Any, text: str) -> bool:
    """Whether ``text`` holds the text of one of ``tokenizer``'s special tokens (one search per
    distinct two-character start: Llama 3's 256 special tokens are one ``<|``)."""
    def group() -> dict[str, tuple[str, ...]]:
        starts: dict[str, list[str]] = {}
        for token in _specials(tokenizer):
            starts.setdefault(token[:2], []).append(token)
        return {start: tuple(tokens) for start, tokens in starts.items()}

    for start, tokens in _known(tokenizer, "_ragray_special_starts", group).items():
        at = text.find(start)
        while at >= 0:
            if any(text.startswith(token, at) for token in tokens):
                return True
            at = text.find(start, at + 1)
    return False


def _split_tokens(tokenizer: Any) -> tuple[str, ...]:
    """The added tokens the tokenizer splits its input at before anything else, matched as
    written: special, not normalized, eating no whitespace, not whole-word only (a chat template's
    ``<|im_start|>``, ``<|start_header_id|>``...). Empty where the tokenizer says nothing of them."""
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return _known(tokenizer, "_ragray_split_tokens", lambda: tuple(
        t.content for t in added.values() if getattr(t, "special", False) and t.content
        and not (getattr(t, "normalized", True) or getattr(t, "lstrip", True)
                 or getattr(t, "rstrip", True) or getattr(t, "single_word", True))))


def _split_spans(tokenizer: Any, text: str, at: int = 0) -> list[tuple[int, int]]:
    """Where the tokenizer's split tokens occur in ``text`` (leftmost, longest first, as the
    tokenizer matches them), shifted by ``at``."""
    splits = _split_tokens(tokenizer)
    if not splits:
        return []
    pattern = _known(tokenizer, "_ragray_split_pattern", lambda: re.compile(
        "|".join(re.escape(s) for s in sorted(splits, key=len, reverse=True))))
    return [(at + m.start(), at + m.end()) for m in pattern.finditer(text)]


def _literal_encoder(tokenizer: Any) -> Any:
    """A private copy of a fast tokenizer's backend that encodes special tokens' text as plain
    text, or False. A copy, because ``split_special_tokens=True`` on the shared tokenizer sets a
    flag on its backend for the call, which other threads' encodings would see."""
    def find() -> Any:
        backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
        if backend is None:
            return False
        try:
            copy = type(backend).from_str(backend.to_str())
            copy.no_padding()
            copy.no_truncation()
            copy.encode_special_tokens = True
        except (AttributeError, TypeError, ValueError, RuntimeError):
            return False
        probe = "Plain text, 42 über\n  <b>[x]</b>"  # the copy encodes as the tokenizer does
        return copy if copy.encode(probe, add_special_tokens=False).ids == _plain(tokenizer, [probe])[0] else False
    kept = getattr(tokenizer, "_ragray_literal_encoder", None)
    if kept and not kept.encode_special_tokens:  # a copied or unpickled tokenizer's copy lost the flag
        try:
            setattr(tokenizer, "_ragray_literal_encoder", None)
        except AttributeError:
            return find()
    return _known(tokenizer, "_ragray_literal_encoder", find)


def _text_ids(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Token ids of texts as plain text: a special token's text in them is its characters. Texts
    that hold none encode as :func:`_plain` does (the same ids, the same calls)."""
    out: list[list[int]] = [[] for _ in texts]
    literal = [i for i, text in enumerate(texts) if has_special_text(tokenizer, text)]
    held = set(literal)
    rest = [i for i, text in enumerate(texts) if text and i not in held]
    for i, ids in zip(rest, _plain(tokenizer, [texts[i] for i in rest])):
        out[i] = ids
    if not literal:
        return out
    copy = _literal_encoder(tokenizer)
    if copy:
        encoded = [list(e.ids) for e in copy.encode_batch([texts[i] for i in literal], add_special_tokens=False)]
    else:  # a slow tokenizer reads the flag per call
        encoded = [list(tokenizer.encode(texts[i], add_special_tokens=False, split_special_tokens=True))
                   for i in literal]
    control = set(_specials(tokenizer).values())
    for i, ids in zip(literal, encoded):
        if control.intersection(ids):
            raise BackendError(f"{type(tokenizer).__name__} cannot encode special tokens' text as plain text "
                               f"(split_special_tokens), so ragray cannot keep it out of the chat markup")
        out[i] = ids
    return out


# -- rendering: which special tokens the template wrote ---------------------------------------------


def render_prompt(tokenizer: Any, prompt: ChatPrompt) -> RenderedChat:
    """The prompt through the chat template (:func:`render_chat`) with the spans of the template's
    own special tokens where a message holds a special token's text (see the module docstring).

    Raises :class:`BackendError` where such a message meets a template whose output ragray cannot
    follow (it changes the message text beyond trimming it) or a tokenizer that does not encode the
    text between its special tokens on its own: the prompt would not be the user's."""
    text = render_chat(tokenizer, prompt)
    if not any(has_special_text(tokenizer, m.content) for m in prompt):
        return RenderedChat(text, None)
    mark = next(chr(c) for c in range(0xE000, 0xF900) if all(chr(c) not in m.content for m in prompt))
    sentinels = [f"{mark}{i}{mark}" for i in range(len(prompt))]
    shadow = render_chat(tokenizer, tuple(Message(m.role, s) for m, s in zip(prompt, sentinels)))
    parts = re.split(f"({mark}\\d+{mark})", shadow)  # template text, a sentinel, template text, ...
    fields = [int(p.strip(mark)) for p in parts[1::2]]
    ways = (str, str.strip)  # templates that trim content (Llama 3, Gemma)
    tries = itertools.product(ways, repeat=len(prompt)) if len(prompt) <= 6 else ((w,) * len(prompt) for w in ways)
    for fits in tries:
        pieces = [fits[fields[k // 2]](prompt[fields[k // 2]].content) if k % 2 else p for k, p in enumerate(parts)]
        if "".join(pieces) == text:
            break
    else:
        raise BackendError("a message holds a special token's text and the chat template changes message "
                           "text beyond trimming it: ragray cannot keep that text out of the chat markup")
    _check_markup(tokenizer, shadow, parts)
    spans: list[tuple[int, int]] = []
    at = 0
    for k, piece in enumerate(pieces):
        if k % 2 == 0:
            spans += _split_spans(tokenizer, piece, at)
        at += len(piece)
    return RenderedChat(text, tuple(spans))


def _check_markup(tokenizer: Any, shadow: str, parts: list[str]) -> None:
    """That encoding the text between the template's split tokens on its own gives the
    tokenizer's ids of a rendering with sentinels for the messages (once per rendering)."""
    checked = _known(tokenizer, "_ragray_markup_checked", dict)
    if shadow not in checked:
        spans, at = [], 0
        for k, part in enumerate(parts):
            spans += _split_spans(tokenizer, part, at) if k % 2 == 0 else []
            at += len(part)
        checked[shadow] = _encode_marked(tokenizer, [(shadow, tuple(spans))]) == encode_many(tokenizer, [shadow])
    if not checked[shadow]:
        raise BackendError(f"a message holds a special token's text and {type(tokenizer).__name__} does not "
                           f"encode the text between its chat template's special tokens on its own: ragray "
                           f"cannot keep that text out of the chat markup")


def _as_rendered(text: Rendered) -> RenderedChat:
    return text if isinstance(text, RenderedChat) else RenderedChat(text, None)


def _encode_marked(tokenizer: Any, items: Sequence[tuple[str, Spans]]) -> list[list[int]]:
    """Token ids of texts whose special tokens are only those at the given spans: each span is its
    token, the text between spans plain text (BOS as :func:`encode_many` adds it)."""
    specials = _specials(tokenizer)
    between = [text[a:b] for text, spans in items
               for a, b in zip((0, *(e for _, e in spans)), (*(s for s, _ in spans), len(text)))]
    encoded = iter(_text_ids(tokenizer, between))
    bos = getattr(tokenizer, "bos_token", None) if _adds_bos(tokenizer) else None
    out = []
    for text, spans in items:
        ids = list(next(encoded))
        for a, b in spans:
            ids += [specials[text[a:b]], *next(encoded)]
        if bos and not (spans and spans[0][0] == 0 and text[: spans[0][1]] == bos):
            ids.insert(0, tokenizer.bos_token_id)
        out.append(ids)
    return out


# -- encoding ------------------------------------------------------------------------------------


def encode_many(tokenizer: Any, texts: Sequence[Rendered]) -> list[list[int]]:
    """Token ids of rendered chat texts, as :func:`encode_rendered` gives them one by one."""
    items = [_as_rendered(t) for t in texts]
    whole = [i for i, item in enumerate(items) if item.markup is None]
    out: list[list[int]] = [[] for _ in items]
    bos = getattr(tokenizer, "bos_token", None)
    adds_bos = _adds_bos(tokenizer) if whole else False
    for i, ids in zip(whole, _plain(tokenizer, [items[i].text for i in whole])):
        if adds_bos and not (bos and items[i].text.startswith(bos)):
            ids.insert(0, tokenizer.bos_token_id)
        out[i] = ids
    marked = [i for i, item in enumerate(items) if item.markup is not None]
    for i, ids in zip(marked, _encode_marked(tokenizer, [items[i] for i in marked])):  # type: ignore[misc]
        out[i] = ids
    return out


def encode_rendered(tokenizer: Any, text: Rendered) -> list[int]:
    """Token ids of rendered chat text (special tokens as written by the template)."""
    return encode_many(tokenizer, [text])[0]


def _answer_ids(tokenizer: Any, prompt_ids: list[int], full: list[int], answer: str) -> list[int]:
    if full[: len(prompt_ids)] == prompt_ids:
        return full[len(prompt_ids) :]
    return _text_ids(tokenizer, [answer])[0]


def _with_answers(tokenizer: Any, items: list[RenderedChat], prompts: list[list[int]], answers: list[str]
                  ) -> list[list[int]]:
    """Each prompt with its answer encoded whole: the tokenizer's own ids where neither the
    messages nor the answer hold a special token's text; else the text after the prompt's markup
    as plain text (the markup of a prompt without a marked rendering: its split tokens, which
    must encode to the prompt's ids)."""
    own = [i for i, item in enumerate(items) if item.markup is None and not has_special_text(tokenizer, answers[i])]
    out: list[list[int]] = [[] for _ in items]
    for i, full in zip(own, encode_many(tokenizer, [items[i].text + answers[i] for i in own])):
        out[i] = full
    marked: dict[int, tuple[str, Spans]] = {}
    for i in sorted(set(range(len(items))) - set(own)):
        text, spans = items[i].text, items[i].markup
        if spans is None:
            spans = tuple(_split_spans(tokenizer, text))
            if _encode_marked(tokenizer, [(text, spans)])[0] != prompts[i]:
                raise BackendError(f"an answer holds a special token's text and {type(tokenizer).__name__} does "
                                   f"not encode the text between its special tokens on its own: ragray cannot "
                                   f"score it as plain text")
        marked[i] = (text + answers[i], spans)
    for i, full in zip(marked, _encode_marked(tokenizer, list(marked.values()))):
        out[i] = full
    return out


def answer_token_ids(tokenizer: Any, prompt_text: Rendered, prompt_ids: list[int], answer: str) -> list[int]:
    """The answer's token ids as they follow ``prompt_ids`` (see the module docstring); a special
    token's text in the answer is plain text."""
    (full,) = _with_answers(tokenizer, [_as_rendered(prompt_text)], [prompt_ids], [answer])
    return _answer_ids(tokenizer, prompt_ids, full, answer)


def _tail(item: RenderedChat, tokenizer: Any) -> str | None:
    """What follows the prompt's last markup token (a chat prompt's ``assistant\\n``); None without one."""
    if item.markup is not None:
        return item.text[item.markup[-1][1] :] if item.markup else None
    ends = [at + len(token) for token in _split_tokens(tokenizer) if (at := item.text.rfind(token)) >= 0]
    return item.text[max(ends) :] if ends else None


def encode_scored(tokenizer: Any, texts: Sequence[Rendered], answers: list[str]
                  ) -> list[tuple[list[int], list[int]]]:
    """``(prompt_ids, answer_ids)`` of each rendered prompt and the answer scored after it, as
    :func:`encode_rendered` and :func:`answer_token_ids` give them, encoded in one batch.

    The tokenizer splits its input at a chat template's special tokens before anything else, so
    a prompt followed by its answer encodes as the prompt's ids up to its last special token, then
    the text after it (``assistant\\n`` and the answer) on its own. Each long prompt is encoded once,
    not twice (with and without its answer), and each answer once per call: half the host time
    of a scoring call's tokenization, which the device waits for. The first prompt whose messages
    hold no special token's text is checked against the tokenizer's own encoding of it whole, with
    its answer less any special token's text (the tokenizer's ids are the right ones only for such
    text); a tokenizer that does not split so (or a prompt with no special token) is encoded whole,
    as before."""
    items = [_as_rendered(t) for t in texts]
    prompts = encode_many(tokenizer, items)
    tails = [_tail(item, tokenizer) for item in items]
    pieces = sorted({piece for tail, answer in zip(tails, answers) if tail is not None
                     for piece in (tail, tail + answer)})
    piece_ids = dict(zip(pieces, _text_ids(tokenizer, pieces)))
    fulls: list[list[int] | None] = []
    for ids, tail, answer in zip(prompts, tails, answers):
        head = len(ids) - len(piece_ids[tail]) if tail is not None else -1
        exact = tail is not None and head >= 0 and ids[head:] == piece_ids[tail]
        fulls.append(ids[:head] + piece_ids[tail + answer] if exact else None)
    first = next((i for i, full in enumerate(fulls) if full is not None and items[i].markup is None), None)
    if first is not None and not _splits_so(tokenizer, items[first].text, prompts[first], tails[first], answers[first],
                                            piece_ids):
        fulls = [None] * len(texts)  # this tokenizer merges across its special tokens: whole texts
    whole = [i for i, full in enumerate(fulls) if full is None]
    for i, full in zip(whole, _with_answers(tokenizer, [items[i] for i in whole], [prompts[i] for i in whole],
                                            [answers[i] for i in whole])):
        fulls[i] = full
    return [(ids, _answer_ids(tokenizer, ids, full, answer))  # type: ignore[arg-type]
            for ids, full, answer in zip(prompts, fulls, answers)]


def _splits_so(tokenizer: Any, text: str, ids: list[int], tail: Any, answer: str, piece_ids: dict[str, list[int]]
               ) -> bool:
    """Whether ``text`` with ``answer`` encodes as its prompt ids up to ``tail``, then the tail and
    answer on their own. The reference is the tokenizer's encoding of the whole text, right only
    where no special token's text is user text: the prompt is one whose messages hold none, and
    the answer is checked less any special token's text."""
    answer = _without_special_text(tokenizer, answer)
    if tail + answer not in piece_ids:
        piece_ids[tail + answer] = _text_ids(tokenizer, [tail + answer])[0]
    head = len(ids) - len(piece_ids[tail])
    return ids[:head] + piece_ids[tail + answer] == encode_rendered(tokenizer, text + answer)


def _without_special_text(tokenizer: Any, text: str) -> str:
    """``text`` with every special token's text taken out."""
    if not has_special_text(tokenizer, text):
        return text
    return re.sub("|".join(map(re.escape, sorted(_specials(tokenizer), key=len, reverse=True))), "", text)
