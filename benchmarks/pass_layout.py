"""The gpu strategy's padded passes, one record each, in bench_gpu's 24-in-flight run (tiny shape, CPU).

Compares the pass layout of two trees (rows, width and reused prefix of each pass, per engine call)
where no GPU is at hand: at the same pass size the layout is the same on any device. Run it from the
repo root, once per tree (the base tree as ``gpu_bench.sh pack`` leaves it in .gpu/base)::

    python benchmarks/pass_layout.py . ragray.generation.transformers.batched /tmp/head.json
    python benchmarks/pass_layout.py .gpu/base ragray.generation.batched /tmp/base.json   # 75290db

Each record: ``run`` (1 the warm-up, 2 the measured run), ``call`` (gen or score, and its prompts),
``rows``, ``width``, ``prefix`` (stacked prefix columns), ``new`` (real tokens), ``reuse`` (reused
columns the rows really have). Summarised for 75290db and 9e28e3e in gpu_8b_ab_75290db.json.
"""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any


def main(tree: str, batched_module: str, out: str) -> None:
    sys.path.insert(0, str(Path(tree).resolve()))
    import ragray
    from benchmarks import bench_gpu
    from ragray.config import GenerationConfig

    try:
        from ragray.generation.transformers.backend import TransformersGenerator
    except ImportError:  # the tree before the backend became a package
        from ragray.generation.transformers_backend import TransformersGenerator
    batched = importlib.import_module(batched_module)
    log: list[dict[str, Any]] = []
    state: dict[str, Any] = {"run": 0, "call": None}
    pass_mask, prefill_run, api_run = batched._pass_mask, batched.BatchedPrefill.run, ragray.run

    def logged_mask(torch: Any, rows: Any, reuses: Any, width: int, prefix: int, **device: Any):
        # this tree: each row's start and reuse as tensors; trees before cf95932: rest lengths and reuses as lists
        news = [width - int(s) for s in rows.tolist()] if hasattr(rows, "tolist") else list(rows)
        log.append({**state, "rows": len(news), "width": width, "prefix": prefix, "new": sum(news),
                    "reuse": int(sum(reuses.tolist() if hasattr(reuses, "tolist") else reuses))})
        return pass_mask(torch, rows, reuses, width, prefix, **device)

    def named_run(self: Any, seqs: dict, caps: dict, keep: dict, consume: Any, *, hold: bool = False) -> Any:
        state["call"] = f"{'gen' if hold else 'score'}:{len(seqs)}"
        return prefill_run(self, seqs, caps, keep, consume, hold=hold)

    def counted_run(*args: Any, **kwargs: Any) -> Any:
        state["run"] += 1
        return api_run(*args, **kwargs)

    batched._pass_mask, batched.BatchedPrefill.run, ragray.run = logged_mask, named_run, counted_run
    with tempfile.TemporaryDirectory() as folder:
        model, tok, _ = bench_gpu.build_model("tiny", Path(folder), bench_gpu.tokenizer_dir(None), "cpu")
        gen = TransformersGenerator.from_model(model, tok, GenerationConfig(model=folder), path=folder, device="cpu")
        gen = gen.with_config(GenerationConfig(model=folder, transformers={"strategy": "gpu",
                                                                           "tokens_per_pass": 32768}))
        engine = bench_gpu.ragray_run(gen, 24, {"execution.max_questions_in_flight": 24})["engine"]
    print(engine)
    Path(out).write_text(json.dumps(log), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:4])
