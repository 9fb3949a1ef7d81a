"""Row-chunked norms and MLPs give the model's own numbers."""

from __future__ import annotations

import pytest

from ragray.generation.transformers.row_chunks import chunk_rows, row_chunked

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _tiny_llama(dtype):
    config = transformers.LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(dtype).eval()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_chunked_rmsnorm_is_bit_equal(dtype) -> None:
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    dt = getattr(torch, dtype)
    norm = LlamaRMSNorm(576).to(dt)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = (torch.randn(1, 1000, 576, generator=torch.Generator().manual_seed(1)) * 3).to(dt)
    ref = norm(x)
    out = row_chunked(norm.forward, rows=128)(x)
    assert out.shape == ref.shape and out.dtype == ref.dtype and torch.equal(out, ref)
    heads = x.view(1, 1000, 9, 64)  # a per-head norm: rows of the last dimension anywhere
    head_norm = LlamaRMSNorm(64).to(dt)
    assert torch.equal(row_chunked(head_norm.forward, rows=100)(heads), head_norm(heads))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_chunk_norms_leaves_the_model_output_unchanged(dtype) -> None:
    model = _tiny_llama(getattr(torch, dtype))
    ids = torch.randint(0, 300, (1, 700), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        ref, few = model(input_ids=ids).logits, model(input_ids=ids[:, :5]).logits
        assert chunk_rows(model, norm_rows=64, mlp_rows=128) == 2 * 3 + 1  # 2 norms + MLP per layer, final norm
        assert chunk_rows(model) == 0  # wrapped once
        out = model(input_ids=ids).logits
        one = model(input_ids=ids[:, :5]).logits  # few rows: the original path
    assert torch.equal(one, few)
    if dtype == "float32":
        assert torch.equal(out, ref)
    else:  # the MLP's bf16 GEMMs may block their reduction differently for 128 rows
        torch.testing.assert_close(out, ref, rtol=0.02, atol=0.02)


def test_a_model_handed_in_keeps_the_process_threads() -> None:
    """ragray sets torch's threads only for a model it loads; a user's model (a notebook's) leaves them."""
    from types import SimpleNamespace

    from ragray.config import GenerationConfig
    from ragray.generation.transformers.backend import TransformersGenerator

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gen = TransformersGenerator(_tiny_llama(torch.float32), SimpleNamespace(eos_token_id=2), GenerationConfig(),
                                    path="tiny", device="cpu")
        assert torch.get_num_threads() == 1 and gen.device == "cpu"
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("strategy", ["cpu", "gpu"])
def test_close_releases_the_weights(strategy) -> None:
    """After close() nothing of the generator holds the model (the gpu strategy's padded prefill and
    decoders included), so its memory can go."""
    import gc
    import weakref
    from types import SimpleNamespace

    from ragray.config import GenerationConfig
    from ragray.generation.transformers.backend import TransformersGenerator

    gen = TransformersGenerator(_tiny_llama(torch.float32), SimpleNamespace(eos_token_id=2),
                                GenerationConfig(transformers={"strategy": strategy}), path="tiny", device="cpu")
    assert gen.strategy == strategy
    weights = weakref.ref(gen.model)
    gen.close()
    gc.collect()
    assert weights() is None and gen.model is None
