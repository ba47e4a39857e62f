#!/usr/bin/env bash
# The unit lane (`pytest -m unit`) as a machine without fleetcheck's services runs it: on a
# copy of this tree, as nobody, with no network but loopback, with sshd, podman, docker,
# chromium and sudo hidden, root's home (its caches, playwright's browsers) out of sight,
# and the test extras playwright, ansible-core and uv failing to import as if not
# installed. CI runs it to prove the lane needs none of them; it prints the wall time.
# Two pytest-xdist workers by default (FLEETCHECK_UNIT_WORKERS=0: one process).
# Run it as root (it builds the namespaces, then drops to nobody); arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "unit_lane.sh: run as root (it drops to nobody itself)" >&2; exit 2; }
python=$(python3 -c 'import sys; print(sys.executable)')
prefix=$(python3 -c 'import sys; print(sys.base_prefix)')
work=$(mktemp -d /tmp/fleetcheck-unit-lane-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tree" "$work/home" "$work/stage" "$work/without"
cat > "$work/without/sitecustomize.py" <<'PY'
import sys

for name in ("playwright", "ansible", "ansible_collections", "uv"):
    sys.modules[name] = None  # `import name` fails as if it were not installed
PY
tar -C . --exclude=./.git --exclude=__pycache__ --exclude=.pytest_cache -cf - . |
    tar -C "$work/tree" -xf -
: > "$work/absent" && chmod 000 "$work/absent"
chown -R 65534:65534 "$work/tree" "$work/home"
chmod 755 "$work"
export python prefix work
unshare --mount --net --pid --fork --mount-proc --propagation private bash -euo pipefail -c '
ip link set lo up
mount -t tmpfs -o mode=755 tmpfs /usr/sbin  # sshd
for name in podman docker nerdctl ctr chromium chromium-browser sudo; do
  for path in $(type -aP "$name" || true); do mount --bind "$work/absent" "$path"; done
done
in_root_home() { [ "${prefix#/root/}" != "$prefix" ]; }  # the interpreter itself lives there
if in_root_home; then mount --bind "$prefix" "$work/stage"; fi
mount -t tmpfs -o mode=755 tmpfs /root
if in_root_home; then mkdir -p "$prefix" && mount --bind "$work/stage" "$prefix"; fi
cd "$work/tree"
start=$(date +%s.%N)
status=0
setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
    env -i HOME="$work/home" PATH="$(dirname "$python"):/usr/local/bin:/usr/bin:/bin" \
    LANG=C.UTF-8 PYTHONPATH="$work/without:$work/tree" \
    FLEETCHECK_LOOPBACK_NET="${FLEETCHECK_LOOPBACK_NET:-0}" \
    "$python" -m pytest -m unit -n "${FLEETCHECK_UNIT_WORKERS:-2}" -q -p no:cacheprovider \
    "$@" || status=$?
elapsed=$("$python" -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" \
    "$start" "$(date +%s.%N)")
echo "unit lane: ${elapsed} s wall time, as nobody, without sshd, podman, chromium, network" \
    "or playwright" >&2
exit $status
' unit-lane "$@"
