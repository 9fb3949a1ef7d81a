"""ragray on one GPU against the naive loops and the machine's limit, in one process and one call.

A random-weight Llama of a given shape (speed does not depend on the weights) with SmolLM2's
tokenizer runs, on the demo set (k = 10, log-prob influence, ragray's defaults otherwise, the
embedding metrics off: their encoder is not on the GPU machine). Log-prob influence (one generate
and k drop-one scorings per question, :data:`WORKLOAD`) is the work the naive loops do and the GPU
record was measured on; the default measure (``interactions``: 2(k + 1) contexts per question, each
passage also kept alone) runs as its own phase, ``ragray_default_measure``, counted in contexts:

- ``ragray``: ``ragray.run`` with the model loaded once at defaults (``strategy: auto``, questions
  in flight sized from free memory); calls/s = calls / wall seconds after a warm-up of 2 questions;
  the engine counts from ``summary.json``; variants: the cpu strategy, no drafted decoding;
- ``ragray_default_measure``: the same at ragray's default measure: contexts/s (every scored
  context: drop-one, kept-alone, full and empty) and seconds per question;
- ``naive_logprob``: per question one HF ``generate`` and k separate full forward passes scoring the
  baseline answer (full-vocabulary log-softmax, as the GPU probe measured it), and ``naive_lean``:
  the same with logits only at the answer positions (a stronger naive loop);
- ``seed_loop``: k + 1 HF ``generate`` calls per question (the generate-mode loop ragray started from);
- ``bound``: the model's prefill tokens/s on one large batch, as calls/s for the run's mean prompt
  (no reuse) and for the exact-reuse minimum of tokens per call; a batched decoding step against
  the weights' bytes over the GPU's memory bandwidth.

``--in-flight 1,8,32`` adds the engine counts of the gpu strategy at those questions in flight
(its shape, measurable on a CPU: there with the pass size it picks on an 80 GB GPU). Every phase checks the deadline; the JSON
is written after each. Usage (the GPU wrapper: ``benchmarks/gpu_bench.sh``)::

    python -m benchmarks.bench_gpu --shape 8b --questions 24 --deadline 400 --out benchmarks/results/gpu_8b.json
    python -m benchmarks.bench_gpu --shape tiny --questions 4 --in-flight 1,8,32 --out /tmp/gpu_tiny.json  # CPU
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import machine_info, save_result  # noqa: E402

SHAPES = {
    "tiny": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2),
    "135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                 num_key_value_heads=3),  # SmolLM2-135M's shape: the CPU bar, on a CPU
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8),
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")
# HBM bandwidth by GPU name (vendor figures, bytes/s): the decoding step's bound
BANDWIDTH = {"H200": 4.8e12, "H100 SXM": 3.35e12, "H100 80GB HBM3": 3.35e12, "H100 PCIe": 2.0e12, "H100": 3.35e12,
             "A100": 2.0e12}
WARMUP_QUESTIONS = 2
#: the work every ragray phase does unless it says otherwise, that of the naive loops and of the GPU
#: record of 2026-11-26 (34.6 calls/s): log-prob influence, one generate and k drop-one scorings per
#: question (the default measure since then scores twice the contexts), on the template's prompts
#: (the demo set's unanswerable questions now add a decline instruction, ~19 tokens a prompt)
# the whole answer scored, as the naive loops score it and the recorded 34.6 calls/s was measured
WORKLOAD = {"influence.mode": "logprob_share", "generation.decline": "never", "influence.answer_span": "full"}
# the pass size the gpu strategy picks for an 8B model on an 80 GB GPU (strategy.gpu_sizes), used for
# its engine counts on a CPU
GPU_TOKENS_PER_PASS = 32768


class Clock:
    def __init__(self, deadline: float) -> None:
        self.start, self.deadline = time.time(), deadline

    def left(self) -> float:
        return self.deadline - (time.time() - self.start)


def tokenizer_dir(given: str | None) -> Path:
    """SmolLM2's tokenizer files: ``given``, else the packaged model's (converted on first use)."""
    if given:
        return Path(given)
    from ragray.generation.packaged import resolve_generator_model

    return Path(resolve_generator_model("smollm2"))


def build_model(shape: str, folder: Path, tokenizer: Path, device: str) -> tuple[Any, Any, dict[str, Any]]:
    """A random-weight Llama of ``shape`` on ``device`` and SmolLM2's tokenizer; ``folder`` gets the
    model's config and the tokenizer (the weights stay in memory: writing 16 GB costs ~30 s of a
    short GPU call, and ragray keys its cache by the folder's files)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    began = time.time()
    cfg = LlamaConfig(vocab_size=49152, bos_token_id=1, eos_token_id=2, pad_token_id=2, max_position_embeddings=8192,
                      tie_word_embeddings=False, **SHAPES[shape])
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    params = sum(p.numel() for p in model.parameters())
    model.config.save_pretrained(folder)
    for name in TOKENIZER_FILES:
        if (tokenizer / name).is_file():
            shutil.copy(tokenizer / name, folder / name)
    tok = AutoTokenizer.from_pretrained(folder)
    return model, tok, {"parameters": params, "build_s": round(time.time() - began, 1)}


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


@contextmanager
def timed_methods(gen: Any, names: tuple[str, ...] = ("generate", "logprobs", "score_divergence")) -> Iterator[dict]:
    """Seconds and calls spent in ``gen``'s model methods while the block runs (the device synced
    at each method's end, so the time is the GPU's too): where a run's time goes."""
    spent: dict[str, dict[str, float]] = {}
    device = getattr(gen, "device", "cpu")

    def wrap(name: str, method: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                sync(device)
                row = spent.setdefault(name, {"calls": 0, "prompts": 0, "seconds": 0.0})
                row["calls"] += 1
                row["prompts"] += len(args[0]) if args and hasattr(args[0], "__len__") else 0
                row["seconds"] = round(row["seconds"] + time.perf_counter() - began, 3)
        return timed

    originals = {n: getattr(gen, n) for n in names if hasattr(gen, n)}
    for name, method in originals.items():
        setattr(gen, name, wrap(name, method))
    try:
        yield spent
    finally:
        for name in originals:
            delattr(gen, name)


# kernel families by name (CUDA kernel names of cuBLAS/CUTLASS, SDPA's kernels, copies)
KERNEL_FAMILIES = (("gemm", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "sm90_")),
                   ("attention", ("fmha", "flash", "attention", "efficient")),
                   ("copy", ("copy", "memcpy", "memset", "cat", "index", "gather", "scatter")))


def profiled_run(gen: Any, questions: int, settings: dict[str, Any]) -> dict[str, Any]:
    """One ``ragray.run`` under torch's profiler: the device's busy share of the wall time, kernel
    time by family, the top kernels and the host's top operators (where a run's time goes)."""
    import ragray
    import torch
    from torch.profiler import ProfilerActivity, profile

    with tempfile.TemporaryDirectory(prefix="bench-gpu-prof-") as tmp:
        base = {"metrics.embedding": False, "cache.dir": tmp, "data.limit": questions, **WORKLOAD, **settings}
        sync(gen.device)
        began = time.perf_counter()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gen.device.startswith("cuda") else [])
        with profile(activities=activities) as prof:
            run = ragray.run(progress=False, model=gen, settings=base)
            sync(gen.device)
        wall = time.perf_counter() - began
    events = prof.key_averages()
    kernels = [(e.key, e.device_time_total / 1e6, e.count) for e in events
               if getattr(e, "device_time_total", 0) and e.device_type == torch.autograd.DeviceType.CUDA]
    families: dict[str, float] = {}
    for name, seconds, _count in kernels:
        low = name.lower()
        family = next((f for f, words in KERNEL_FAMILIES if any(w in low for w in words)), "other")
        families[family] = round(families.get(family, 0.0) + seconds, 3)
    busy = sum(seconds for _n, seconds, _c in kernels)
    host = sorted(((e.key, e.self_cpu_time_total / 1e6, e.count) for e in events), key=lambda x: -x[1])[:15]
    return {"questions": questions, "calls": int(len(run.calls)), "wall_s": round(wall, 2),
            "kernel_s": round(busy, 3), "device_busy_share": round(busy / wall, 3), "kernel_families_s": families,
            "top_kernels": [(n[:120], round(s, 3), c) for n, s, c in sorted(kernels, key=lambda x: -x[1])[:20]],
            "top_host_ops": [(n[:80], round(s, 3), c) for n, s, c in host]}


def ragray_run(gen: Any, questions: int, settings: dict[str, Any]) -> dict[str, Any]:
    """``ragray.run`` on the demo set with a loaded generator: a warm-up, then the measured run
    (with the seconds spent in the model's methods, and the device's peak memory)."""
    import ragray

    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        base = {"metrics.embedding": False, "cache.dir": tmp, **WORKLOAD, **settings}
        ragray.run(progress=False, model=gen, settings={**base, "data.limit": WARMUP_QUESTIONS})
        base["cache.dir"] = str(Path(tmp) / "measured")  # nothing answered from the warm-up's cache
        device = getattr(gen, "device", "cpu")
        sync(device)
        peak = _reset_peak(device)
        began = time.perf_counter()
        with timed_methods(gen) as spent:
            run = ragray.run(progress=False, model=gen, settings={**base, "data.limit": questions})
        sync(device)
        wall = time.perf_counter() - began
    calls = run.calls.to_pandas()
    summary = run.summary
    # every scored context: the calls (full context, each passage left out) and the subsets
    # (each passage kept alone, the empty context) of the default measure
    contexts = len(calls) + (len(run.subsets) if "subsets" in run.tables else 0)
    return {
        "questions": int(len(run.questions)),
        "calls": int(len(calls)),
        "contexts": int(contexts),
        "wall_s": round(wall, 2),
        "calls_per_s": round(len(calls) / wall, 2),
        "contexts_per_s": round(contexts / wall, 2),
        "seconds_per_question": round(wall / max(1, len(run.questions)), 3),
        "states": summary.get("states"),
        "influence_mode": summary.get("influence_mode"),
        "precision": summary.get("precision"),
        "backend_settings": summary.get("backend_settings"),
        "engine": summary.get("engine"),
        "model_seconds": spent,
        "peak_memory_gb": peak(),
        "mean_prompt_tokens": float(calls["prompt_tokens"].mean()),
        "_passages": run.passages.to_pandas()[["question_id", "retrieval_rank", "title", "text"]].to_dict("records"),
        "_questions": run.questions.to_pandas()[["question_id", "question", "baseline_answer"]].to_dict("records"),
    }


def _reset_peak(device: str) -> Callable[[], float | None]:
    """Reset the device's peak-memory counter; the returned function reads it (GB; None on CPU)."""
    import torch

    if not device.startswith("cuda"):
        return lambda: None
    torch.cuda.reset_peak_memory_stats()
    return lambda: round(torch.cuda.max_memory_allocated() / 1e9, 2)


def demo_prompts(result: dict[str, Any]) -> list[tuple[list[Any], str]]:
    """Per question of a ragray run: its prompts (all passages, then each one left out) and answer."""
    from ragray.generation.prompts import get_template
    from ragray.config import GenerationConfig
    from ragray.types import Passage

    template = get_template(GenerationConfig().template)
    out = []
    for q in result["_questions"]:
        rows = sorted((p for p in result["_passages"] if p["question_id"] == q["question_id"]), key=lambda p: p["retrieval_rank"])
        passages = [Passage(f"p{p['retrieval_rank']}", p["text"], title=p["title"] or "") for p in rows]
        variants = [passages] + [passages[:i] + passages[i + 1 :] for i in range(len(passages))]
        out.append(([template.build(q["question"], v) for v in variants], q["baseline_answer"]))
    return out


@contextmanager
def plain_model(model: Any) -> Iterator[Any]:
    """``model`` as transformers made it while the naive loops run: ragray's attention function and
    row-blocked norms/MLPs (set up for its strategy when it loaded) taken off, then put back."""
    impl = model.config._attn_implementation
    chunked = {m: m.forward for m in model.modules() if getattr(m, "_ragray_row_chunked", False)}
    for m in chunked:
        del m.forward
    model.set_attn_implementation("sdpa")
    try:
        yield model
    finally:
        model.set_attn_implementation(impl)
        for m, forward in chunked.items():
            m.forward = forward


def naive_loops(gen: Any, prompts: list[tuple[list[Any], str]], clock: Clock, max_tokens: int,
                budget_s: float) -> dict[str, Any]:
    """The three naive loops over the same prompts (on the plain model), each until its share of
    ``budget_s``."""
    with plain_model(gen.model):
        return _naive_loops(gen, prompts, clock, max_tokens, budget_s)


def _naive_loops(gen: Any, prompts: list[tuple[list[Any], str]], clock: Clock, max_tokens: int,
                 budget_s: float) -> dict[str, Any]:
    import torch

    from ragray.generation.chat_tokens import answer_token_ids, encode_rendered, render_chat

    model, tok, device = gen.model, gen.tokenizer, gen.device
    out: dict[str, Any] = {}
    for name, share in (("naive_logprob", 0.3), ("naive_lean", 0.3), ("seed_loop", 0.4)):
        began, calls, done = time.perf_counter(), 0, 0
        for variants, _answer in prompts:
            if time.perf_counter() - began > budget_s * share or clock.left() < 30:
                break
            ids = [encode_rendered(tok, render_chat(tok, p)) for p in variants]
            with torch.inference_mode():
                first = torch.tensor([ids[0]], device=device)
                gen_ids = model.generate(input_ids=first, attention_mask=torch.ones_like(first),
                                         max_new_tokens=max_tokens, do_sample=False)
                answer = tok.decode(gen_ids[0, len(ids[0]):], skip_special_tokens=True).strip() or "x"
                calls += 1
                for prompt, p_ids in zip(variants[1:], ids[1:]):
                    x = torch.tensor([p_ids], device=device)
                    if name == "seed_loop":
                        model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=max_tokens,
                                       do_sample=False)
                    else:
                        text = render_chat(tok, prompt)
                        target = answer_token_ids(tok, text, p_ids, answer)
                        full = torch.tensor([p_ids + target], device=device)
                        if name == "naive_lean":
                            logits = model(input_ids=full, logits_to_keep=len(target) + 1).logits[0, :-1]
                        else:
                            logits = model(input_ids=full).logits[0, len(p_ids) - 1 : -1]
                        # the answer's log-probability stays on the device: the loop waits once
                        # per question (as the GPU probe's loop did), not after every forward
                        torch.log_softmax(logits.float(), -1).gather(
                            1, torch.tensor(target, device=device)[:, None]).sum()
                    calls += 1
            sync(device)
            done += 1
        seconds = time.perf_counter() - began
        out[name] = {"questions": done, "calls": calls, "seconds": round(seconds, 2),
                     "calls_per_s": round(calls / seconds, 2) if calls else None}
        print(name, out[name], flush=True)
    return out


def bounds(gen: Any, prompt_tokens: float, minimum_per_call: float | None, device_name: str) -> dict[str, Any]:
    """Prefill tokens/s on one large batch; a batched decoding step against the bandwidth bound."""
    import torch

    model, device = gen.model, gen.device
    big = device.startswith("cuda")
    batch, length = (8, 1024) if big else (2, 256)
    out: dict[str, Any] = {}
    with torch.inference_mode():
        x = torch.randint(10, 49000, (batch, length), device=device)
        model(input_ids=x, logits_to_keep=1)
        sync(device)
        began = time.perf_counter()
        for _ in range(3):
            model(input_ids=x, logits_to_keep=1)
        sync(device)
        per = (time.perf_counter() - began) / 3
        rate = batch * length / per
        params = sum(p.numel() for p in model.parameters())
        out["prefill"] = {"batch": batch, "length": length, "tokens_per_s": round(rate, 1),
                          "tflops": round(2 * params * rate / 1e12, 1)}
        out["calls_per_s_no_reuse"] = round(rate / prompt_tokens, 2)
        if minimum_per_call:
            out["calls_per_s_exact_reuse"] = round(rate / minimum_per_call, 2)
        rows = 32 if big else 4
        prompt = torch.randint(10, 49000, (rows, length), device=device)
        cache = model(input_ids=prompt, use_cache=True).past_key_values
        step = torch.randint(10, 49000, (rows, 1), device=device)
        for i in range(2):  # warm-up: the first steps at a new shape pick kernels and grow the cache
            model(input_ids=step, past_key_values=cache, use_cache=True,
                  cache_position=torch.tensor([length + i], device=device))
        sync(device)
        began = time.perf_counter()
        for i in range(2, 10):
            model(input_ids=step, past_key_values=cache, use_cache=True,
                  cache_position=torch.tensor([length + i], device=device))
        sync(device)
        ms = (time.perf_counter() - began) / 8 * 1000
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        bandwidth = next((v for k, v in BANDWIDTH.items() if k in device_name), None)
        out["decode_step"] = {"rows": rows, "context": length, "ms": round(ms, 2), "weight_gb": round(weight_bytes / 1e9, 2),
                              "bandwidth_bound_ms": round(weight_bytes / bandwidth * 1000, 2) if bandwidth else None}
    return out


def failed(result: dict[str, Any], phase: str, save: Callable[[], None]) -> None:
    """Record the exception being handled under ``<phase>_error`` (the JSON keeps what ran)."""
    import traceback

    text = traceback.format_exc()
    print(f"{phase} FAILED:\n{text}", flush=True)
    result[f"{phase}_error"] = text[-6000:]
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        pass
    save()


def derive(result: dict[str, Any]) -> None:
    """The ratios the acceptance reads: ragray against each naive loop and each bound."""
    if "ragray" not in result:
        return
    naive = (result.get("naive_logprob") or {}).get("calls_per_s")
    lean = (result.get("naive_lean") or {}).get("calls_per_s")
    rate = result["ragray"]["calls_per_s"]
    result["x_naive_logprob"] = round(rate / naive, 2) if naive else None
    result["x_naive_lean"] = round(rate / lean, 2) if lean else None
    bound = result.get("bound", {})
    for key in ("calls_per_s_no_reuse", "calls_per_s_exact_reuse"):
        if bound.get(key):
            result[f"share_of_{key.removeprefix('calls_per_s_')}_bound"] = round(rate / bound[key], 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    ap.add_argument("--packaged", action="store_true",
                    help="the packaged SmolLM2-135M-Instruct at ragray's defaults (dtype auto) instead of a random shape")
    ap.add_argument("--questions", type=int, default=24)
    ap.add_argument("--deadline", type=float, default=400.0, help="seconds for everything (the JSON is kept)")
    ap.add_argument("--out", default=None, help="result JSON (default benchmarks/results/gpu_<shape>.json)")
    ap.add_argument("--tokenizer", default=None, help="SmolLM2's tokenizer folder (default: the packaged model's)")
    ap.add_argument("--in-flight", default="", help="e.g. 1,8,32: the gpu strategy's engine counts at those")
    ap.add_argument("--skip", default="", help="comma list of phases to skip: variants,naive,bound,default_measure")
    ap.add_argument("--profile", type=int, default=0, help="questions of one extra run under torch's profiler")
    ap.add_argument("--variants", default="", help="comma list of variants to run (default: all): "
                    "other_strategy,no_drafts,static_decode,eager_decode,pass_16k,pass_64k")
    ap.add_argument("--naive-seconds", type=float, default=90.0,
                    help="time for the three naive loops together (each stops after its share)")
    args = ap.parse_args(argv)
    import torch
    import transformers

    from ragray.config import GenerationConfig
    from ragray.generation.transformers.backend import TransformersGenerator

    clock = Clock(args.deadline)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    device_name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    out_path = Path(args.out or Path(__file__).parent / "results" / f"gpu_{args.shape}.json")
    skip = set(filter(None, args.skip.split(",")))
    result: dict[str, Any] = {
        "benchmark": "bench_gpu", "shape": args.shape, "shape_config": SHAPES[args.shape], "device": device_name,
        "machine": machine_info(("torch", "transformers")), "torch": torch.__version__,
        "transformers": transformers.__version__, "questions": args.questions,
        "note": "random-weight Llama, SmolLM2 tokenizer; demo set, k=10, log-prob influence, embedding metrics off",
    }

    def save() -> None:
        derive(result)
        result["total_s"] = round(time.time() - clock.start, 1)
        save_result(out_path, result)

    with tempfile.TemporaryDirectory(prefix="ragray-model-") as folder:
        if args.packaged:
            gen = TransformersGenerator.from_config(GenerationConfig())
            folder = GenerationConfig().model
            result["shape"] = "smollm2-135m (packaged, trained)"
            result["model"] = {"parameters": sum(p.numel() for p in gen.model.parameters())}
        else:
            model, tok, result["model"] = build_model(args.shape, Path(folder), tokenizer_dir(args.tokenizer), device)
            # what TransformersGenerator.from_config does after loading the files, at default settings
            gen = TransformersGenerator.from_model(model, tok, GenerationConfig(model=folder), path=folder,
                                                   device=device)
        print("model", result["model"], flush=True)
        save()
        try:
            main_run = ragray_run(gen, args.questions, {})
        except Exception:  # noqa: BLE001 - recorded: the naive loops and the bound still run
            failed(result, "ragray", save)
            gen = gen.with_config(GenerationConfig(model=folder, transformers={"strategy": "cpu"}))
            main_run = ragray_run(gen, args.questions, {})
            result["ragray_fallback"] = "the cpu strategy (the default one failed: see ragray_error)"
        prompts = demo_prompts(main_run)
        result["ragray"] = {k: v for k, v in main_run.items() if not k.startswith("_")}
        print("ragray", result["ragray"], flush=True)
        save()
        if "naive" not in skip and clock.left() > 60:
            result.update(naive_loops(gen, prompts, clock, GenerationConfig().max_tokens,
                                      budget_s=min(args.naive_seconds, clock.left() / 2)))
            save()
        if "bound" not in skip and clock.left() > 20:
            engine = main_run["engine"] or {}
            minimum = engine.get("tokens_minimum_total")
            try:
                result["bound"] = bounds(gen, main_run["mean_prompt_tokens"],
                                         minimum / main_run["calls"] if minimum else None, device_name)
                print("bound", result["bound"], flush=True)
            except Exception:  # noqa: BLE001
                failed(result, "bound", save)
            save()
        if "default_measure" not in skip and clock.left() > 60:
            try:  # ragray's default measure (interactions): what a user's run costs per question
                v = ragray_run(gen, args.questions, {"influence.mode": "auto", "generation.decline": "auto"})
                result["ragray_default_measure"] = {k: x for k, x in v.items() if not k.startswith("_")}
                print("default measure", result["ragray_default_measure"], flush=True)
            except Exception:  # noqa: BLE001 - recorded; the other phases still run
                failed(result, "ragray_default_measure", save)
            save()
        other = "cpu" if gen.strategy == "gpu" else "gpu"
        variants = {"other_strategy": {"strategy": other},
                    "eager_decode": {"static_decode": False},
                    "eager_no_drafts": {"static_decode": False, "draft_tokens": 0},
                    "static_decode": {"static_decode": True},
                    "pass_16k": {"tokens_per_pass": 16384},
                    "pass_64k": {"tokens_per_pass": 65536}}
        chosen = [v for v in args.variants.split(",") if v] or list(variants)
        for name in chosen:
            settings = variants[name]
            if "variants" in skip or clock.left() < 75:
                break
            n = max(WARMUP_QUESTIONS + 1, args.questions // 3) if name == "other_strategy" else args.questions
            try:
                v = ragray_run(gen.with_config(GenerationConfig(model=folder, transformers=settings)), n, {})
            except Exception:  # noqa: BLE001 - recorded; the other phases still run
                failed(result, f"ragray_{name}", save)
                continue
            result[f"ragray_{name}"] = {"settings": settings, **{k: x for k, x in v.items() if not k.startswith("_")}}
            print(name, result[f"ragray_{name}"], flush=True)
            save()
        if args.profile and clock.left() > 45:
            try:
                result["profile"] = profiled_run(gen, args.profile, {})
                print("profile", result["profile"], flush=True)
            except Exception:  # noqa: BLE001
                failed(result, "profile", save)
            save()
        counted = gen if gen.strategy == "gpu" else gen.with_config(GenerationConfig(
            model=folder, transformers={"strategy": "gpu", "tokens_per_pass": GPU_TOKENS_PER_PASS}))
        for n in filter(None, args.in_flight.split(",")):
            if clock.left() < 60:
                break
            v = ragray_run(counted, int(n), {"execution.max_questions_in_flight": int(n)})
            result.setdefault("in_flight", {})[n] = {"calls_per_s": v["calls_per_s"], "engine": v["engine"]}
            print("in flight", n, v["engine"], flush=True)
            save()
        result["total_s"] = round(time.time() - clock.start, 1)
        save()
        gen.close()
    print(json.dumps({k: result.get(k) for k in ("device", "shape", "x_naive_logprob", "x_naive_lean",
                                                 "share_of_no_reuse_bound", "share_of_exact_reuse_bound")}))
    print("wrote", out_path)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    raise SystemExit(main())
