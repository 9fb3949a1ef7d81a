"""vLLM's engine options per device: ``auto`` on CUDA and on CPU, explicit values kept."""

import pytest

from ragray.config import VLLMConfig
from ragray.errors import ConfigError
from ragray.generation.vllm_options import VLLMEngineOptions, resolve_vllm_options, weights_bytes

GiB = 2**30


def test_cpu_auto_is_todays_cpu_setting():
    got = resolve_vllm_options(VLLMConfig(), "cpu", weights=16 * GiB, gpu_bytes=None, gpus=0)
    assert got == VLLMEngineOptions(enforce_eager=True, kv_cache_gb=1.0, tensor_parallel_size=1)
    assert got.engine_kwargs() == {"enforce_eager": True, "tensor_parallel_size": 1, "kv_cache_memory_bytes": GiB}


@pytest.mark.parametrize(("weights_gb", "gpu_gb", "gpus", "tp"), [
    (16, 80, 1, 1),     # an 8B model in bf16 on one H100
    (16, 24, 8, 2),     # ... on 24 GB cards: 24 x 0.85 x 0.75 = 15.3 GB usable each, so two
    (140, 80, 8, 4),    # a 70B model in bf16 over four 80 GB GPUs
    (None, 80, 8, 1),   # a hub id: its size is unknown here
])
def test_cuda_auto_uses_cuda_graphs_a_memory_sized_cache_and_as_few_gpus_as_fit(weights_gb, gpu_gb, gpus, tp):
    weights = None if weights_gb is None else weights_gb * GiB
    got = resolve_vllm_options(VLLMConfig(), "cuda", weights=weights, gpu_bytes=gpu_gb * GiB, gpus=gpus)
    assert got == VLLMEngineOptions(enforce_eager=False, kv_cache_gb=None, tensor_parallel_size=tp)
    assert got.engine_kwargs() == {"enforce_eager": False, "tensor_parallel_size": tp}  # vLLM sizes the cache


def test_a_model_that_needs_more_gpus_than_the_process_sees_names_the_settings():
    with pytest.raises(ConfigError, match=r"need 4 GPUs of 80 GiB .* this process sees 1; .*execution.num_gpus"):
        resolve_vllm_options(VLLMConfig(), "cuda", weights=140 * GiB, gpu_bytes=80 * GiB, gpus=1)
    with pytest.raises(ConfigError, match="do not fit 8 GPUs"):
        resolve_vllm_options(VLLMConfig(), "cuda", weights=900 * GiB, gpu_bytes=80 * GiB, gpus=8)


def test_explicit_values_are_used_as_given():
    cfg = VLLMConfig(enforce_eager=True, kv_cache_gb=4.0, tensor_parallel_size=2)
    assert resolve_vllm_options(cfg, "cuda", weights=16 * GiB, gpu_bytes=80 * GiB, gpus=2) == \
        VLLMEngineOptions(True, 4.0, 2)
    assert resolve_vllm_options(VLLMConfig(kv_cache_gb=None, enforce_eager=False), "cpu") == \
        VLLMEngineOptions(False, None, 1)


def test_weights_are_the_model_folders_weight_files(tmp_path):
    (tmp_path / "model-00001.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / "model-00002.safetensors").write_bytes(b"x" * 500)
    (tmp_path / "tokenizer.json").write_bytes(b"x" * 4000)
    assert weights_bytes(str(tmp_path)) == 1500
    assert weights_bytes("org/model-on-the-hub") is None
