"""The GPU engine's passes never wait for the device: every host tensor goes onto the device queued
behind the device's work (:mod:`ragray.generation.transformers.transfer`), so the host builds pass
``i + 1`` while the device runs pass ``i``, and a scoring call waits once, for its sums.

PyTorch's meta device stands in for a GPU here: the model runs on it (shapes only, no numbers), and
every copy from the host onto it is seen, with whether it was queued (``non_blocking``) or waited.
A plain ``tensor.to("cuda")`` or ``torch.tensor(..., device="cuda")`` from ordinary host memory
waits for everything queued on the device before it; on an H200 each such wait left the device
idle while the host built the next pass (stop 58's profile: 122 stream waits in a 24-question run).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ragray
from ragray.config import GenerationConfig
from ragray.generation.engine_counts import EngineCounts
from ragray.generation.transformers.engine import ScoreJob, use_ragray_attention
from ragray.generation.transformers.gpu_engine import GpuEngine

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _where() -> str:
    """The innermost frame of ragray's code on the current stack (what asked for the copy)."""
    package = str(Path(ragray.__file__).parent)
    frames = [f for f in traceback.extract_stack() if f.filename.startswith(package)]
    return f"{Path(frames[-1].filename).relative_to(package)}:{frames[-1].lineno}" if frames else "?"


@pytest.fixture
def waits(monkeypatch) -> Iterator[list[str]]:
    """Every host-to-device copy that would wait for the device, by where ragray asked for it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    found: list[str] = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = str(func.overloadpacket)
            if name in ("aten.to", "aten._to_copy", "aten.copy_"):  # aten.to: under inference mode
                given = {**dict(zip((a.name for a in func._schema.arguments), args)), **kwargs}
                source = given["src" if name == "aten.copy_" else "self"]
                target = (given["self"].device if name == "aten.copy_"
                          else given.get("device") or getattr(given.get("other"), "device", None))
                moved = source.device.type == "cpu" and target is not None and torch.device(target).type != "cpu"
                if moved and not given.get("non_blocking", False) and source.numel():  # an empty copy is none
                    found.append(_where())
            return func(*args, **kwargs)

    def on_device(make: Any) -> Any:  # torch.tensor(data, device=...) copies below the dispatcher: seen here
        def build(data: Any, *args: Any, device: Any = None, **kwargs: Any) -> Any:
            out = make(data, *args, device=device, **kwargs)
            if device is not None and torch.device(device).type != "cpu" and out.numel():
                found.append(_where())
            return out
        return build

    monkeypatch.setattr(torch, "tensor", on_device(torch.tensor))
    monkeypatch.setattr(torch, "as_tensor", on_device(torch.as_tensor))
    real_tolist = torch.Tensor.tolist  # a meta tensor has no values to read: zeros stand in
    monkeypatch.setattr(torch.Tensor, "tolist",
                        lambda self: [0.0] * self.numel() if self.is_meta else real_tolist(self))
    with Watch():
        for mode in (torch.inference_mode(False), torch.inference_mode()):  # the watch sees each kind that waits
            with mode:
                torch.ones(2).to("meta")
                torch.ones(2, device="meta").copy_(torch.ones(2))
                torch.tensor([1], device="meta")
        assert len(found) == 6, found
        found.clear()
        yield found


def _meta_engine() -> GpuEngine:
    config = transformers.LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                                      attn_implementation="sdpa")
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    use_ragray_attention(model)  # as on CUDA
    settings = {"strategy": "gpu", "tokens_per_pass": 64}  # several passes a wave
    return GpuEngine(model, torch, "meta", GenerationConfig(transformers=settings), frozenset({2}), EngineCounts(),
                     pad_id=0)


def _job(prompts: dict[int, list[int]], answer: list[int]) -> ScoreJob:
    lengths = {i: len(p) for i, p in prompts.items()}
    return ScoreJob(fulls={i: p + answer for i, p in prompts.items()}, prompt_lens=lengths, caps=lengths,
                    keep=dict.fromkeys(prompts, len(answer) + 1))


# one question's prompts: the full context and three ablations sharing its first 70 tokens (enough to
# be worth a wave of their own: MIN_REUSE_TOKENS)
HEADER = list(range(3, 73))
PROMPTS = {0: HEADER + list(range(50, 90)), 1: HEADER + list(range(60, 90)), 2: HEADER + list(range(50, 70)),
           3: HEADER + [7] * 5}


def test_a_scoring_call_queues_every_copy_and_waits_once(waits):
    engine = _meta_engine()
    with torch.inference_mode():
        sums = engine.score_sums(_job(PROMPTS, [11, 12, 13]))
    assert sorted(sums) == sorted(PROMPTS)
    counts = engine.counts.snapshot()
    assert counts["forward_passes"] >= 3  # two waves (the header's prompt, then those reusing it), cut in passes
    assert waits == [], f"copies that wait for the device: {waits}"
    assert counts["host_syncs"] == 1  # the one read of every pass's sums


def test_scoring_from_a_generate_calls_carried_kv_queues_every_copy(waits):
    """A generate call's prefill holds its prompts' KV; the scoring call then stacks it into its
    passes (the indexed KV copies of :func:`~ragray.generation.transformers.kv.stack_pieces`)."""
    engine = _meta_engine()
    with torch.inference_mode():
        held = engine.prefill.run({0: PROMPTS[0]}, {0: 0}, {0: 1}, lambda *_: None, hold=True)
        sums = engine.score_sums(_job(PROMPTS, [11, 12, 13]))
    assert list(held) == [0] and sorted(sums) == sorted(PROMPTS)
    assert waits == [], f"copies that wait for the device: {waits}"


def test_divergence_rows_get_their_targets_queued(waits):
    engine = _meta_engine()
    stored: list[int] = []
    with torch.inference_mode():
        engine.score_rows(_job(PROMPTS, [11, 12]), lambda i, lp, target: stored.append(int(target.shape[0])))
    assert stored == [2] * len(PROMPTS)
    assert waits == [], f"copies that wait for the device: {waits}"


def test_fixed_shape_decoding_waits_only_for_each_steps_tokens(waits):
    """A generate call: its prefill passes, the decoder's setup (KV stacked behind the prefill) and
    each step's picked tokens going back onto the device; the host waits only to read the picks."""
    from ragray.generation.transformers.static_decode import StaticDecoder

    engine = _meta_engine()
    engine.decoding = StaticDecoder(engine.decoder, graphs=False)  # as on CUDA, less the graph capture
    with torch.inference_mode():
        out = engine.generate({0: PROMPTS[0], 1: PROMPTS[1]}, {0: 4, 1: 4})
    assert [len(tokens) for tokens, _seconds in out.values()] == [4, 4]  # meta's picks read as 0, never the end
    assert waits == [], f"copies that wait for the device: {waits}"
