"""`fleetcheck probe-bundle`: the probe as one self-contained script with its plan inside,
for engines that already reach every node (Ansible/AWX, Slurm's srun, a DaemonSet).

The script is stdlib only and runs as `python3 probe.py [--host NAME] [--venv PATH]`: the
probe modules travel inside it as source (compiled on the node; a controller-side marshal
would tie it to one Python version), served by a finder first on sys.meta_path so that
nothing on the node's path can stand in for them. It prints its facts as one JSON
document carrying the host's name (`--host`, the name given at bundle time, or the
node's hostname); `fleetcheck judge` turns such documents into results. No question is
ever asked mid-run, so shared analysis is not available on this path."""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from fleetcheck import __version__
from fleetcheck.drafter_expectations import DrafterExpectation
from fleetcheck.inventory import Host
from fleetcheck.playbook import Playbook
from fleetcheck.wire_protocol import host_plan, probe_sources

DEFAULT_BUDGET_S = 60.0

SCRIPT = '''#!/usr/bin/env python3
"""fleetcheck %(version)s probe with its plan inside (written by `fleetcheck probe-bundle`).
Reads nothing but the install and writes nothing: prints its facts as one JSON document.
Usage: python3 probe.py [--host NAME] [--venv PATH] [--python PATH]"""
import sys

PLAN = %(plan)r
HOST = %(host)r
MODULES = (
%(modules)s)


def main(argv):
    import base64, json, socket, zlib, _frozen_importlib as frozen
    options = {"--host": HOST, "--venv": None, "--python": None}
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag not in options or not args:
            sys.stderr.write("usage: python3 probe.py [--host NAME] [--venv PATH] "
                             "[--python PATH]\\n")
            return 2
        options[flag] = args.pop(0)
    sources = json.loads(zlib.decompress(base64.b64decode("".join(MODULES))).decode("utf-8"))
    code = dict((name, compile(text, name, "exec")) for name, text in sources)

    class Finder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name in code or name in ("fleetcheck", "fleetcheck.probe"):
                return frozen.ModuleSpec(name, Finder, is_package=name not in code or any(
                    other.startswith(name + ".") for other in code))

        @staticmethod
        def create_module(spec):
            return None

        @staticmethod
        def exec_module(module):
            exec(code.get(module.__name__, ""), module.__dict__)

    sys.meta_path.insert(0, Finder)
    for name in [n for n in sys.modules if n == "fleetcheck" or n.startswith("fleetcheck.")]:
        del sys.modules[name]
    from fleetcheck.probe import jsonlite
    from fleetcheck.probe.main import PROBE_VERSION, probe
    plan = json.loads(PLAN)
    if options["--venv"]:
        plan["venv"] = options["--venv"]
        plan["interpreter"] = options["--venv"].rstrip("/") + "/bin/python"
    if options["--python"]:
        plan["interpreter"] = options["--python"]
    try:
        facts = probe(plan)
    except Exception as exc:  # a probe bug still answers in JSON
        facts = {"probe_version": PROBE_VERSION, "fatal": "%%s: %%s" %% (type(exc).__name__, exc)}
    facts["host"] = options["--host"] or socket.gethostname()
    facts["bundle"] = {"fleetcheck_version": %(version)r, "playbook": %(playbook)r}
    sys.stdout.write(jsonlite.dumps(facts, sort_keys=True) + "\\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def bundle_plan(playbook: Playbook, venv: str | None, python: str | None,
                site_packages: str | None, budget_s: float,
                drafter: DrafterExpectation | None = None) -> dict[str, Any]:
    """The plan `run` sends a host with these settings (wire_protocol.host_plan, so the two never
    drift apart), minus what only a live channel can carry: shared analysis, the smoke
    load. `drafter`: --expect-drafter, over the playbook's expect.drafter."""
    host = Host(name="bundle", address="bundle", venv=venv, python=python,
                site_packages=site_packages)
    plan = host_plan(host, playbook.probe_signatures(), playbook.integrity.plan(),
                     time_budget_s=budget_s)
    plan["share_analysis"] = False
    if playbook.patches:
        plan["patches"] = playbook.patch_signatures()
    drafter = drafter or playbook.expect_drafter
    if drafter is not None:  # resolved on nodes where no server runs too
        plan["served"]["drafters"] = [drafter.repo]
    return plan


def probe_script(playbook: Playbook, host: str | None = None, venv: str | None = None,
                 python: str | None = None, site_packages: str | None = None,
                 budget_s: float = DEFAULT_BUDGET_S,
                 drafter: DrafterExpectation | None = None) -> str:
    sources = json.dumps(probe_sources(with_smoke=False)).encode("utf-8")
    packed = base64.b64encode(zlib.compress(sources, 9))
    text = packed.decode("ascii")
    lines = "".join("    %r\n" % text[i:i + 96] for i in range(0, len(text), 96))
    plan = json.dumps(bundle_plan(playbook, venv, python, site_packages, budget_s, drafter),
                      sort_keys=True)
    return SCRIPT % {"version": __version__, "plan": plan, "host": host, "modules": lines,
                     "playbook": playbook.source}
