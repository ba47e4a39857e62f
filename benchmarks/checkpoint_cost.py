"""What the results checkpoints cost the controller, on N real sshd hosts holding real vLLM
installs (fleet_bench.py's layout: alternating 0.20.1 and 0.33.0 at /opt/ml-env): the run
in this process, with the CLI's own checkpoint writer, counting checkpoints and their CPU
against the process's CPU. Runs this checkout's code directly (no tool venv).

    python3 benchmarks/checkpoint_cost.py --hosts 20 50 200 --parallel 16 [--write]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import yaml  # noqa: E402

from fleetcheck.lab.wheels import real_install  # noqa: E402
from results_file import provenance, write_section  # noqa: E402
from fleetcheck.cli import Checkpoints  # noqa: E402
from fleetcheck.connectors import declarations  # noqa: E402
from fleetcheck.inventory import load_inventory  # noqa: E402
from fleetcheck.playbook import load_playbook  # noqa: E402
from fleetcheck.results import ResultsWriter  # noqa: E402
from fleetcheck.runner import RunOptions, run_fleet  # noqa: E402
from fleetcheck.lab.testhosts import LoopbackFleet  # noqa: E402
from fleetcheck.connectors.ssh import KnownHosts, SshSettings  # noqa: E402

ENV = "/opt/ml-env"


def start_fleet(count: int, workdir: str) -> tuple[LoopbackFleet, str]:
    venvs = [real_install("0.20.1"), real_install("0.33.0")]
    fleet = LoopbackFleet(os.path.join(workdir, "fleet"), first_octet=1 + count // 250)
    for i in range(count):
        fleet.add("gpu%03d" % i, mounts={ENV: venvs[i % 2]})
    fleet.start(timeout=120)
    inventory = os.path.join(workdir, "inventory.yaml")
    with open(inventory, "w") as handle:
        yaml.safe_dump({"all": {"vars": {"venv": ENV, "ansible_user": "root",
                                         "key": fleet.client_key},
                                "hosts": {h.name: {"ansible_host": h.address}
                                          for h in fleet.hosts}}}, handle, sort_keys=False)
    return fleet, inventory


def measure(fleet: LoopbackFleet, inventory: str, parallel: int) -> dict:
    hosts = load_inventory(inventory, declarations=declarations())
    playbook = load_playbook(None)
    options = RunOptions(settings=SshSettings(known_hosts=KnownHosts(fleet.known_hosts)),
                         parallel=parallel, timeout=120.0, smoke=False)
    writer = ResultsWriter(os.path.join(os.path.dirname(inventory), "results.json"))
    inner = Checkpoints(writer)
    calls, spent = [], [0.0]

    def checkpoint(partial) -> None:
        began = time.thread_time()
        inner(partial)
        spent[0] += time.thread_time() - began
        calls.append(len(partial.hosts) - len(partial.not_finished))

    cpu, wall = time.process_time(), time.monotonic()
    run = run_fleet(hosts, playbook, options, inventory, checkpoint=checkpoint)
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    assert run.complete and all(h.status in ("pass", "fail") for h in run.hosts)
    return {"hosts": len(hosts), "checkpoints": len(calls), "checkpoint_cpu_s": spent[0],
            "cpu_s": cpu, "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, nargs="+", default=[20, 50, 200])
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    lines = ["## Results checkpoints", ""] + provenance() + [
             "", "The run in one process with the CLI's checkpoint writer (after every host while "
             "that costs <= 5% of the controller's CPU).",
             "", "| hosts | checkpoints | their CPU ms | controller CPU s | share | wall s |",
             "|---|---|---|---|---|---|"]
    for count in args.hosts:
        fleet, inventory = start_fleet(count, tempfile.mkdtemp(prefix="fleetcheck-ckpt-"))
        try:
            measure(fleet, inventory, args.parallel)  # warm-up
            row = measure(fleet, inventory, args.parallel)
        finally:
            fleet.stop()
        lines.append("| %d | %d | %.1f | %.2f | %.1f%% | %.2f |" % (
            row["hosts"], row["checkpoints"], 1000 * row["checkpoint_cpu_s"], row["cpu_s"],
            100 * row["checkpoint_cpu_s"] / row["cpu_s"], row["wall_s"]))
        print(lines[-1], flush=True)
    if args.write:
        write_section("checkpoints", lines)


if __name__ == "__main__":
    main()
