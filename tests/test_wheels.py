"""The real-wheel cache (fleetcheck/lab/wheels.py) is shared by concurrent runs: a lock
holder's work is complete before another process gets the lock."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from fleetcheck.lab import wheels

pytestmark = pytest.mark.unit


def test_a_second_process_waits_for_the_lock_holder(tmp_path, monkeypatch):
    monkeypatch.setattr(wheels, "CACHE", str(tmp_path))
    done = tmp_path / "done"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from fleetcheck.lab import wheels\n"
        "wheels.CACHE = sys.argv[1]\n"
        "with wheels.cache_lock('wheel-x'):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(0.5)\n"
        "    open(sys.argv[2], 'w').write('complete')\n"), str(tmp_path), str(done)],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    assert holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    with wheels.cache_lock("wheel-x"):
        assert done.read_text() == "complete"
        assert time.monotonic() - started > 0.2
    assert holder.wait(timeout=10) == 0
