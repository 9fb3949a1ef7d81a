#!/usr/bin/env bash
# benchmarks/bench_gpu.py on a lent GPU machine (the `device` tool's `run`) in ONE call of under
# 8 minutes: the 1B shape, then the 8B shape, each against the naive loops and the bound.
#
# That machine has torch and transformers but not all of ragray's needs, and no network; a call
# carries the working tree plus up to 8 ignored paths (64 MiB in all). So:
#   here:   bash benchmarks/gpu_bench.sh pack     # -> .gpu/bench (git-ignored, ~15 MB): wheels, SmolLM2's
#                                                 #    tokenizer, the commit
#   there:  bash benchmarks/gpu_bench.sh run      # carry=[".gpu/bench"], timeout_s ~ 540
#           writes $OUT/gpu_1b.json, $OUT/gpu_8b.json (copy them to benchmarks/results/), the CUDA
#           exactness test's $OUT/cuda_exactness.xml and the faiss-gpu smoke's $OUT/faiss_gpu.json
# GPU_BENCH_PLAN="shape:questions:deadline_s ..." overrides the plan (default "1b:24:150 8b:24:280");
# GPU_BENCH_ARGS adds bench_gpu.py arguments (e.g. "--naive-seconds 45"), GPU_BENCH_IN_FLIGHT its --in-flight;
# `run` also works on a CPU machine with ragray installed (e.g. GPU_BENCH_PLAN="tiny:4:120").
#
# A before/after comparison on ONE machine (timings of two machines, or two calls, differ by up to
# ~20%: compare within one call only):
#   here:   GPU_BENCH_BASE=<rev> bash benchmarks/gpu_bench.sh pack   # also .gpu/base: <rev>'s ragray/ and benchmarks/
#   there:  bash benchmarks/gpu_bench.sh ab   # carry=[".gpu/bench", ".gpu/base"]; bench_gpu's headline phase
#           (a 2-question warm-up, then the measured run) at <rev> and here, alternated, each in its own
#           process: $OUT/base_<i>.json, $OUT/head_<i>.json. GPU_BENCH_AB="shape:questions:pairs:first"
#           (default "8b:24:3:base"; first = base or head: which side runs first in each pair);
#           GPU_BENCH_ARGS="--profile 24" adds a profiled run to each (the device's busy share, top kernels and host ops).
#           These pairs run each tree's own bench_gpu: 75290db reuses the KV a run's generate call carried
#           into the next run's generate call of the same questions (the warm-up's 2 in the measured run, all
#           24 in the profiled one), a head start head does not take; GPU_BENCH_CALLS below compares fairly;
#           then bench_attention_gpu once ($OUT/attention.json: one scoring pass's attention, kernel by kernel;
#           GPU_BENCH_ATTENTION=0 skips it). GPU_BENCH_CALLS=N adds N rounds of benchmarks/profile_calls.py
#           per side, ABBA order ($OUT/calls_<side>_<i>.json: calls/s with the carried KV dropped before
#           each run, each model call's kernels and matrix shapes; GPU_BENCH_CALLS_ARGS e.g. "--no-profile
#           --repeats 4"); pairs may be 0. `ab` starts with the CUDA exactness test of this tree (as `run` ends).
set -uo pipefail
mode=${1:?pack, run or ab}
here=.gpu/bench
if [ "$mode" = pack ]; then  # in the repo root, with ragray's venv active
  set -e
  rm -rf "$here" && mkdir -p "$here/whl" "$here/tokenizer"
  # ragray's needs the GPU image lacks (measured on an H200, 2026-11-26: ENV.md)
  for w in pydantic==2.13.4 pydantic_core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 \
           typing_extensions==4.16.0 SQLAlchemy==2.1.9 greenlet==3.5.6 nltk==3.10.4; do
    python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$here/whl" "$w"
  done
  python -m pip wheel -q --no-deps rouge_score==0.1.2 -w "$here/whl"  # sdist only on PyPI
  tok=$(python -c "from ragray.generation.packaged import resolve_generator_model as r; print(r('smollm2'))")
  for f in tokenizer.json tokenizer_config.json chat_template.jinja special_tokens_map.json; do
    [ -f "$tok/$f" ] && cp "$tok/$f" "$here/tokenizer/"
  done
  git rev-parse --short HEAD >"$here/commit"
  if [ -n "${GPU_BENCH_BASE:-}" ]; then  # the tree to compare with (~2 MB: its results stay behind)
    rm -rf .gpu/base && mkdir -p .gpu/base
    git archive "$GPU_BENCH_BASE" ragray benchmarks | tar x -C .gpu/base --exclude benchmarks/results
    git rev-parse --short "$GPU_BENCH_BASE" >.gpu/base/commit
  fi
  (cd "$here" && tar cf whl.tar whl && rm -rf whl)
  du -sh "$here"
  exit 0
fi
[ "$mode" = run ] || [ "$mode" = ab ] || { echo "unknown mode $mode (pack, run or ab)"; exit 2; }
[ -d "$here" ] || { echo "$here is missing: run 'bash benchmarks/gpu_bench.sh pack' here first and carry it"; exit 2; }
t0=$(date +%s)
out=${OUT:-/tmp/gpu-bench-out}
mkdir -p "$out"
command -v nvidia-smi >/dev/null && nvidia-smi -L
site=/tmp/ragray-site
if ! python3 -c "import pydantic, sqlalchemy, rouge_score" 2>/dev/null; then
  rm -rf /tmp/ragray-whl "$site" && mkdir -p /tmp/ragray-whl "$site"
  tar xf "$here/whl.tar" -C /tmp/ragray-whl
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" /tmp/ragray-whl/whl/*.whl 2>&1 | tail -2
  needs="$site:"  # ragray's needs the image lacks, ahead of whichever tree runs
else
  needs=""
fi
export PYTHONPATH="$needs$PWD"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 RAGRAY_COMMIT=$(cat "$here/commit")
export RAY_USAGE_STATS_ENABLED=0
echo "setup $(( $(date +%s) - t0 )) s"
exactness() {  # the bf16 exactness check on CUDA (gpu strategy vs plain forward passes; grouped-query
  # SDPA vs transformers' repeat path), JUnit XML beside the JSONs; GPU_BENCH_TESTS=0 skips it
  [ "${GPU_BENCH_TESTS:-1}" = 0 ] || timeout 90 python3 -m pytest -q -s -p no:cacheprovider tests/generation/test_strategy.py \
    -k cuda_bf16 --junitxml "$out/cuda_exactness.xml" 2>&1 | grep -E "fused|passed|failed|skipped|Error|assert" | cut -c1-300
}
if [ "$mode" = ab ]; then
  [ -d .gpu/base ] || { echo ".gpu/base is missing: GPU_BENCH_BASE=<rev> bash benchmarks/gpu_bench.sh pack, and carry it"; exit 2; }
  exactness
  IFS=: read -r shape questions pairs first <<<"${GPU_BENCH_AB:-8b:24:3:base}"
  order="base head"; [ "$first" = head ] && order="head base"
  for i in $(seq 1 "$pairs"); do
    for side in $order; do
      if [ "$side" = base ]; then tree=$PWD/.gpu/base; commit=$(cat .gpu/base/commit)
      else tree=$PWD; commit=$(cat "$here/commit"); fi
      (cd "$tree" && RAGRAY_COMMIT=$commit PYTHONPATH="$needs$tree" timeout 150 python3 -m benchmarks.bench_gpu \
         --shape "$shape" --questions "$questions" --deadline 100 --tokenizer "$OLDPWD/$here/tokenizer" \
         --skip naive,bound,variants,default_measure ${GPU_BENCH_ARGS:-} --out "$out/${side}_$i.json" 2>&1 \
         | grep -E "^ragray|^profile|FAILED" | cut -c1-200)
      echo "$side $i done at $(( $(date +%s) - t0 )) s"
    done
  done
  if [ -n "${GPU_BENCH_CALLS:-}" ]; then  # rounds of profile_calls.py, each side in its own process, ABBA order
    for i in $(seq 1 "$GPU_BENCH_CALLS"); do
    sides=$order; [ $(( i % 2 )) = 0 ] && sides=$(echo "$order" | awk '{print $2, $1}')
    for side in $sides; do
      if [ "$side" = base ]; then tree=$PWD/.gpu/base; commit=$(cat .gpu/base/commit)
      else tree=$PWD; commit=$(cat "$here/commit"); fi
      (cd "$tree" && RAGRAY_COMMIT=$commit PYTHONPATH="$needs$tree" timeout 150 python3 "$OLDPWD/benchmarks/profile_calls.py" \
         --shape "$shape" --questions "$questions" --tokenizer "$OLDPWD/$here/tokenizer" --out "$out/calls_${side}_$i.json" \
         ${GPU_BENCH_CALLS_ARGS:-} 2>&1 | grep -E "^(warm-up|measured|profiled|generate|score|logprobs)|Error" | cut -c1-200)
      echo "calls $side $i done at $(( $(date +%s) - t0 )) s"
    done
    done
  fi
  # one scoring pass's attention, kernel by kernel (masked with K/V repeated, GQA math, folded heads)
  [ "${GPU_BENCH_ATTENTION:-1}" = 0 ] || timeout 60 python3 -m benchmarks.bench_attention_gpu --out "$out/attention.json" 2>&1 | grep -A12 '"max_abs_diff"'
  exit 0
fi
for item in ${GPU_BENCH_PLAN:-1b:24:150 8b:24:280}; do
  IFS=: read -r shape questions deadline <<<"$item"
  # shell deadline a minute past the script's own: a hung phase must not cost the rest of the call
  timeout $(( deadline + 60 )) python3 -m benchmarks.bench_gpu --shape "$shape" --questions "$questions" \
    --deadline "$deadline" --tokenizer "$here/tokenizer" --in-flight "${GPU_BENCH_IN_FLIGHT-1,8,32}" \
    ${GPU_BENCH_ARGS:-} --out "$out/gpu_$shape.json" 2>&1 \
    | grep -v -E "Loading weights|Writing model|it/s\]" | cut -c1-600
  echo "$shape done at $(( $(date +%s) - t0 )) s"
done
# attention kernels of one scoring pass (masked SDPA, FlashAttention varlen), then the exactness check
timeout 60 python3 -m benchmarks.bench_attention_gpu --out "$out/attention.json" 2>&1 | tail -12
exactness
# faiss-gpu through ragray's dense index, where the machine has it ($OUT/faiss_gpu.json says which: the
# lent machine has no faiss and cannot be given one, its wheel is over the 64 MiB a call carries)
timeout 60 python3 -m benchmarks.faiss_gpu_smoke --out "$out/faiss_gpu.json" 2>&1 | tail -2
ls -la "$out"
