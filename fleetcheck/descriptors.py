"""The descriptors a run needs for the hosts it has in flight, and the soft RLIMIT_NOFILE
raised to fit, before any host is contacted: a run that would run out of descriptors
mid-way must be refused up front, not turn into hundreds of per-host errors."""

from __future__ import annotations

import os
import resource

# Measured (benchmarks/fleet_bench.py --descriptors, /proc/PID/fd of the controller): an
# SSH host in flight holds 3, its socket and the pipe paramiko makes a channel waitable
# with (behind a bastion too: the socket is the bastion's, the target's transport runs
# over a channel); a local host holds its command's 3 pipes.
PER_HOST = 3
# Beyond what is open at start: outputs, known_hosts and key files, the agent's socket,
# the extra pipes a local host holds while its command starts.
SPARE = 64


def open_descriptors() -> int:
    """Descriptors this process holds now (0 where the system cannot list them)."""
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            return max(0, len(os.listdir(listing)) - 1)  # less the listing's own
        except OSError:
            continue
    return 0


def descriptors_needed(in_flight: int) -> int:
    return open_descriptors() + PER_HOST * in_flight + SPARE


def fit_limit(needed: int) -> int:
    """Raise the soft limit to the hard one when `needed` is more than the soft limit
    allows (children, such as local hosts' commands, inherit it); the soft limit in
    force afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return needed
    if needed <= soft:
        return soft
    # an unlimited hard limit is still capped by the kernel (Linux: fs.nr_open), so the
    # need itself is the fallback
    for target in ((hard,) if hard != resource.RLIM_INFINITY else ()) + (needed,):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            break
        except (ValueError, OSError):
            continue
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def shortfall(parallel: int, hosts: int) -> str | None:
    """None when the descriptors for min(parallel, hosts) hosts at once fit (after the soft
    limit was raised as far as allowed); else what to tell the user."""
    in_flight = min(parallel, hosts)
    needed = descriptors_needed(in_flight)
    limit = fit_limit(needed)
    if limit >= needed:
        return None
    who = "-j %d needs" % parallel if in_flight == parallel else \
        "%d hosts at once (-j %d) need" % (in_flight, parallel)
    remedy = "raise `ulimit -n` or lower -j" if in_flight > 1 else "raise `ulimit -n`"
    return "%s ~%d descriptors; the limit is %d: %s" % (who, needed, limit, remedy)
