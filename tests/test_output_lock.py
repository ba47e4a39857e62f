"""Two runs writing one `--json`: the second is refused before any host, naming the run
that holds the path, and the first writes its results untouched; once it is done the
path is free again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import yaml

from fleet_helpers import ROOT, ssh_hosts
from fleetcheck.output_lock import lock_path
from waits import wait_for


def fleetcheck_run(tmp_path, inventory: str, out: str, *args: str, **popen):
    return subprocess.Popen(
        [sys.executable, "-m", "fleetcheck", "run", inventory, "--json", out, *args],
        cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=ROOT, XDG_CACHE_HOME=str(tmp_path / "cache")),
        **popen)


def test_a_second_run_on_the_same_json_is_refused_naming_the_first(tmp_path, fleet):
    stuck = fleet.add("stuck", sshd_options={"ForceCommand": "sleep 3600"})
    fleet.start()
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": ssh_hosts(fleet, [stuck])}}))
    out = str(tmp_path / "out" / "results.json")
    first = fleetcheck_run(tmp_path, str(inventory), out, "--known-hosts", fleet.known_hosts,
                           "--timeout", "120",
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        os.environ["XDG_CACHE_HOME"], saved = str(tmp_path / "cache"), os.environ.get(
            "XDG_CACHE_HOME")
        try:  # where the runs, with this XDG_CACHE_HOME, keep their locks
            lock = lock_path(out)
        finally:
            if saved is None:
                del os.environ["XDG_CACHE_HOME"]
            else:
                os.environ["XDG_CACHE_HOME"] = saved
        wait_for(lambda: os.path.exists(lock) and open(lock).read().strip() == str(first.pid),
                 60, "the first run holding %s" % lock, interval=0.1)
        second = fleetcheck_run(tmp_path, str(inventory), out, "--known-hosts",
                                fleet.known_hosts)
        _, stderr = second.communicate(timeout=60)
        assert second.returncode == 2, stderr
        assert ("fleetcheck: error: command line: field '--json': %s is being written by "
                "another fleetcheck run (pid %d)" % (out, first.pid)) in stderr
        assert first.poll() is None  # the first run goes on, untouched
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    assert first.returncode == 130
    assert json.loads(open(out).read())["hosts"][0]["name"] == "stuck"
    # the path is free again once the first run is gone
    third = fleetcheck_run(tmp_path, str(inventory), out, "--known-hosts", fleet.known_hosts,
                           "--timeout", "3")
    _, stderr = third.communicate(timeout=60)
    assert third.returncode == 3, stderr  # it ran: the stuck host timed out
    assert json.loads(open(out).read())["hosts"][0]["error"]["kind"] == "timeout"
