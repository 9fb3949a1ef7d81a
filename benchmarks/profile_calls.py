"""Each engine call of one bench_gpu ragray run under its own torch profiler, for any tree: where a
call's device time goes, by kernel and by operator input shape (which matrix shapes, which kernels).

bench_gpu's ``--profile`` gives one profile of a whole run; this splits it per model call
(``generate``, the scoring call) so two trees can be compared call by call. It imports ``ragray``
and ``benchmarks.bench_gpu`` from ``PYTHONPATH``, so it runs against the tree ``gpu_bench.sh ab``
puts there (the base tree too)::

    (cd .gpu/base && PYTHONPATH=$PWD python3 ../../benchmarks/profile_calls.py --shape 8b --out /tmp/b.json)
    python benchmarks/profile_calls.py --shape tiny --questions 4 --out /tmp/h.json   # CPU, this tree

The process runs a 2-question warm-up, the measured run ``--repeats`` times (calls/s and each model
call's seconds: the first as bench_gpu's headline, the others warm), then, unless ``--no-profile``,
one run with each model call profiled, and with ``--count-ops`` one run with each model call's
aten operators counted (what a call asks of the device, one launch each on a GPU: the host's share
of a call, comparable between trees on a CPU; ``--strategy gpu --layers 2``, then ``--layers 4``,
gives the per-layer count to scale to the 8B shape's 32). Before every run the KV a generate call
carried over is dropped: the tree before issue 45 (75290db) reused it in the next run's generate
call of the same questions, a head start that is not ragray's speed; with it gone both trees do
the same work.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# the operators whose device time is split by input shape (matrix products, attention)
SHAPED_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::_scaled_dot_product_cudnn_attention",
              "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_flash_attention",
              "aten::_efficient_attention_forward", "aten::_flash_attention_forward")


def call_profile(prof: Any, torch: Any, name: str, prompts: int, wall: float) -> dict[str, Any]:
    """One call's profile: its wall time, kernel time, top kernels, and the shaped operators' device time."""
    cuda = torch.autograd.DeviceType.CUDA
    kernels = [(e.key, e.device_time_total / 1e6, e.count) for e in prof.key_averages()
               if getattr(e, "device_time_total", 0) and e.device_type == cuda]
    shaped = [(e.key, str(e.input_shapes)[:160], getattr(e, "self_device_time_total", 0) / 1e6, e.count)
              for e in prof.key_averages(group_by_input_shape=True) if e.key in SHAPED_OPS]
    if not kernels:  # a CPU run: the operators' own CPU time stands in
        shaped = [(e.key, str(e.input_shapes)[:160], e.self_cpu_time_total / 1e6, e.count)
                  for e in prof.key_averages(group_by_input_shape=True) if e.key in SHAPED_OPS]
    return {"call": name, "prompts": prompts, "wall_s": round(wall, 3),
            "kernel_s": round(sum(s for _k, s, _c in kernels), 3),
            "top_kernels": [(k[:110], round(s, 4), c) for k, s, c in sorted(kernels, key=lambda x: -x[1])[:15]],
            "top_shapes": [(k, sh, round(s, 4), c) for k, sh, s, c in sorted(shaped, key=lambda x: -x[2])[:30]]}


@contextmanager
def counted_ops(torch: Any) -> Iterator[Counter[str]]:
    """The aten operators dispatched while the block runs, by name (every tensor, CPU ones too)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    counts: Counter[str] = Counter()

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            counts[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    with Count():
        yield counts


def drop_carried(gen: Any) -> None:
    """Forget the KV the last generate call carried over, in either tree's layout."""
    engine = getattr(gen, "_engine", None)
    prefill = getattr(engine, "prefill", None) or getattr(gen, "_batched", None)
    if prefill is not None and hasattr(prefill, "_carried"):
        prefill._carried = []


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="tiny")
    ap.add_argument("--questions", type=int, default=24)
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=2, help="measured runs after the warm-up")
    ap.add_argument("--no-profile", action="store_true", help="skip the profiled run")
    ap.add_argument("--count-ops", action="store_true", help="add a run with each model call's operators counted")
    ap.add_argument("--strategy", default=None, help="generation.transformers.strategy (default: the device's)")
    ap.add_argument("--layers", type=int, default=None, help="the shape with this many decoder layers")
    args = ap.parse_args(argv)
    import ragray
    import torch
    from torch.profiler import ProfilerActivity, profile

    from benchmarks import bench_gpu as bg
    from ragray.config import GenerationConfig

    try:
        from ragray.generation.transformers.backend import TransformersGenerator
    except ImportError:  # the tree before the backend became a package
        from ragray.generation.transformers_backend import TransformersGenerator
    device = "cuda" if torch.cuda.is_available() else "cpu"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    out: dict[str, Any] = {"commit": __import__("os").environ.get("RAGRAY_COMMIT"), "shape": args.shape,
                           "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "runs": []}
    with tempfile.TemporaryDirectory(prefix="ragray-model-") as folder:
        if args.layers:
            bg.SHAPES[args.shape] = {**bg.SHAPES[args.shape], "num_hidden_layers": args.layers}
        model, tok, _info = bg.build_model(args.shape, Path(folder), bg.tokenizer_dir(args.tokenizer), device)
        engine: dict[str, Any] = {"transformers": {"strategy": args.strategy}} if args.strategy else {}
        like_gpu = args.strategy == "gpu" and device == "cpu"
        if like_gpu:  # the passes and questions in flight of the 8B shape's run on a GPU (pass_layout.py's)
            engine["transformers"]["tokens_per_pass"] = getattr(bg, "GPU_TOKENS_PER_PASS", 32768)
        gen = TransformersGenerator.from_model(model, tok, GenerationConfig(model=folder, **engine), path=folder,
                                               device=device)
        names = ("generate", "logprobs" if hasattr(type(gen), "logprobs") else "score")
        profiled: list[dict[str, Any]] = []
        counted: list[dict[str, Any]] = []

        @contextmanager
        def each_call_profiled(count: bool = False) -> Iterator[dict[str, float]]:
            """``gen``'s model methods, each call under its own profiler (appended to ``profiled``),
            or with ``count`` its operators counted (appended to ``counted``); yields the seconds
            per method, profiler or counting included."""
            spent: dict[str, float] = {}

            def wrap(name: str, method: Any) -> Any:
                def call(*a: Any, **k: Any) -> Any:
                    bg.sync(device)
                    began = time.perf_counter()
                    prompts = len(a[0]) if a else 0
                    if count:
                        with counted_ops(torch) as ops:
                            result = method(*a, **k)
                        counted.append({"call": name, "prompts": prompts, "ops": sum(ops.values()),
                                        "by_op": dict(ops.most_common())})
                    else:
                        with profile(activities=activities, record_shapes=True) as prof:
                            result = method(*a, **k)
                            bg.sync(device)
                    wall = time.perf_counter() - began
                    spent[name] = round(spent.get(name, 0.0) + wall, 3)
                    if not count:
                        profiled.append(call_profile(prof, torch, name, prompts, wall))
                    return result
                return call

            for name in names:
                setattr(gen, name, wrap(name, getattr(gen, name)))
            try:
                yield spent
            finally:
                for name in names:
                    delattr(gen, name)

        settings = {"metrics.embedding": False, **getattr(bg, "WORKLOAD", {}),
                    **({"execution.max_questions_in_flight": args.questions} if like_gpu else {})}
        with tempfile.TemporaryDirectory(prefix="profile-calls-") as tmp:
            plan = [("warm-up", 2)] + [(f"measured {r + 1}", args.questions) for r in range(args.repeats)]
            plan += [] if args.no_profile else [("profiled", args.questions)]
            plan += [("counted", args.questions)] if args.count_ops else []
            for i, (label, n) in enumerate(plan):
                drop_carried(gen)
                bg.sync(device)
                began = time.perf_counter()
                # the tree's own bench_gpu times the model methods (synced at each call's end)
                with (each_call_profiled(label == "counted") if label in ("profiled", "counted")
                      else bg.timed_methods(gen, names)) as spent:
                    run = ragray.run(progress=False, model=gen,
                                     settings={**settings, "cache.dir": f"{tmp}/{i}", "data.limit": n})
                bg.sync(device)
                wall = time.perf_counter() - began
                row = {"run": label, "questions": n, "calls": int(len(run.calls)), "wall_s": round(wall, 2),
                       "calls_per_s": round(len(run.calls) / wall, 2), "engine": run.summary.get("engine"),
                       "backend_settings": run.summary.get("backend_settings"), "model_seconds": spent}
                out["runs"].append(row)
                print(label, {k: row[k] for k in ("calls", "wall_s", "calls_per_s", "model_seconds")}, flush=True)
    out["calls"], out["counted_calls"] = profiled, counted
    for c in profiled:
        print(c["call"], c["prompts"], "wall", c["wall_s"], "kernels", c["kernel_s"], flush=True)
    for c in counted:
        print(c["call"], c["prompts"], "ops", c["ops"], flush=True)
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
