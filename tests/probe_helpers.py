"""What several test modules share (test modules never import each other): recorded
facts and facts decoded from a test's JSON, the decoded-equals-sent comparison, linked
copies of real installs, the stand-in vLLM server and waiting for it, TCP listeners on
loopback that decide what a connection gets, and an Ansible INI inventory with
group_vars and host_vars. (The probe run on a tree: fleetcheck.lab.local_probe.)"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import textwrap
import threading

from fleetcheck.facts import Facts
from fleetcheck.facts_decoder import decode_facts
from waits import wait_listening  # noqa: F401 (the tests import it from here)


# The static interpreters' playbook (key-offset, value-source and decision finders): the
# packaged playbook's verdicts come from running the code (probe/executor.py); these tests
# hold the static readers to what they were written to find while they remain in the tree.
STATIC_PLAYBOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                               "static-playbook.yaml")


def static_probe_tree(venv: str) -> Facts:
    """The probe's facts of `venv` with the static playbook's signatures."""
    from fleetcheck.lab.local_probe import probe_tree
    from fleetcheck.playbook import load_playbook
    return probe_tree(venv, load_playbook(STATIC_PLAYBOOK).probe_signatures())


def judged_tree(tmp_path, files: dict, check_id: str):
    """(facts, result) of a synthetic 0.33.0 install (the fixed release's fix sites, with
    `files` dedented over them) probed and judged by check `check_id`."""
    from fleetcheck.checks.fixes import judge_fix
    from fleetcheck.lab.local_probe import probe_tree
    from fleetcheck.lab.synthetic import FIXED, write_install
    from fleetcheck.playbook import load_playbook
    contents = dict(FIXED)
    contents.update({rel: textwrap.dedent(text) for rel, text in files.items()})
    venv = str(tmp_path / "env")
    write_install(venv, "0.33.0", contents)
    facts = probe_tree(venv, load_playbook(STATIC_PLAYBOOK).probe_signatures())
    check = next(c for c in load_playbook(STATIC_PLAYBOOK).checks if c.id == check_id)
    return facts, judge_fix(check, facts, None)

# where every loopback test host sees its vLLM install (a mount namespace per host)
ENV = "/opt/ml-env"
STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standin_vllm.py")


FACTS_FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "facts")


def findings(facts: Facts, check_id: str) -> dict:
    return facts.signatures[check_id].findings


def recorded(version: str) -> dict:
    """A real probe's recorded answer (tests/fixtures/facts/vllm-VERSION.json), as JSON."""
    with open(os.path.join(FACTS_FIXTURES, "vllm-%s.json" % version), encoding="utf-8") as handle:
        return json.load(handle)["facts"]


def assert_holds(typed, raw, path: str = "facts") -> None:
    """The decoded facts hold exactly what the JSON said: every key of it is a described
    field (classes marked OPEN, a host's own files, excepted) of the same value and JSON
    type, lists, maps and objects compared through, and every field the JSON left out or
    sent as null reads as None or empty."""
    if dataclasses.is_dataclass(typed):
        assert raw is None or isinstance(raw, dict), (path, raw)
        raw = raw or {}
        keys = {(f.metadata.get("key") or f.name): f.name for f in dataclasses.fields(typed)}
        unknown = set(raw) - set(keys)
        assert not unknown or getattr(typed, "OPEN", False), (path, sorted(unknown))
        for key, name in keys.items():
            assert_holds(getattr(typed, name), raw.get(key), "%s.%s" % (path, key))
    elif isinstance(typed, list):
        assert raw is None or isinstance(raw, list), (path, raw)
        assert len(typed) == len(raw or []), path
        for index, (item, sent) in enumerate(zip(typed, raw or [])):
            assert_holds(item, sent, "%s[%d]" % (path, index))
    elif isinstance(typed, dict):
        assert raw is None or isinstance(raw, dict), (path, raw)
        assert set(typed) == set(raw or {}), path
        for key, item in typed.items():
            assert_holds(item, raw[key], "%s.%s" % (path, key))
    else:
        assert typed == raw and type(typed) is type(raw), (path, typed, raw)


def facts_of(raw: dict) -> Facts:
    """Facts as a check gets them, from JSON a test wrote or edited (decoded as at the
    wire; probe_version added when the test left it out)."""
    return decode_facts(json.loads(json.dumps(dict({"probe_version": 1}, **raw))))


def linked_copy(source: str, target: str) -> str:
    """A copy of an install made of hard links: fast, and an edited file is replaced (see
    rewrite), never written through into the cached original."""
    shutil.copytree(source, target, symlinks=True, copy_function=os.link)
    return target


def rewrite(path: str, data: bytes) -> None:
    os.unlink(path)
    with open(path, "wb") as handle:
        handle.write(data)


def site_packages(venv: str) -> str:
    lib = os.path.join(venv, "lib")
    return os.path.join(lib, sorted(os.listdir(lib))[0], "site-packages")


def edited_copy(source: str, target: str, edits: dict) -> str:
    """A linked copy of a real install with {rel: [(old, new), ...]} applied; each `old`
    must be in the file (so a test cannot silently edit nothing)."""
    linked_copy(source, target)
    site = site_packages(target)
    for rel, replacements in edits.items():
        path = os.path.join(site, rel)
        data = open(path, "rb").read().decode("utf-8") if os.path.exists(path) else ""
        for old, new in replacements:
            assert old in data, (rel, old)
            data = data.replace(old, new, 1)
        if os.path.exists(path):
            rewrite(path, data.encode("utf-8"))
        else:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(data)
    return target


class LoopbackListener:
    """A TCP listener made by the test on a loopback address; subclasses decide what a
    connection gets."""

    def __init__(self, address: str):
        self.sock = socket.socket()
        self.sock.bind((address, 0))
        self.sock.listen(16)
        self.address, self.port = self.sock.getsockname()
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(conn)
            self.handle(conn)

    def handle(self, conn: socket.socket) -> None:
        """Say nothing: no SSH banner ever comes."""

    def close(self) -> None:
        self.sock.close()
        for conn in self.connections:
            conn.close()




INI = """\
# a fleet as Ansible writes it: ungrouped hosts first
bastion ansible_host=127.0.0.5 rack=r0

[dc1]
gpu[01:04].dc1 cuda_version="12.4" gpu_count=8
gpu05.dc1:2222 ansible_user=ops   # inline comment

[dc1:vars]
venv=/opt/dc1-env
ansible_port=2200
ntp_server=ntp.dc1.example
ansible_become=true
labels={'tier': 'gold', 'ids': [1, 2]}

[canary]
gpu02.dc1

[canary:vars]
venv=/opt/canary-group
ansible_user=canary
ansible_group_priority=5

[gpus:children]
dc1
dc2
canary

[dc2]
node[a:c] ansible_python_interpreter=/usr/bin/python3
node[08:10:2]

[dc2:vars]
vllm_url=http://127.0.0.1:8001
enabled=True
; another comment style

[all:vars]
venv=/root/ml-env
ansible_user=root
fleetcheck_timeout=45
"""


def write(path, text: str) -> str:
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), "w", encoding="utf-8") as handle:
        handle.write(textwrap.dedent(text))
    return str(path)


def ini_inventory(root) -> str:
    """hosts.ini with group_vars (a file, a directory of files, a file with no extension)
    and host_vars, overriding each other at every documented place."""
    path = write(root / "hosts.ini", INI)
    write(root / "group_vars" / "all.yml", "site_packages: /opt/all-sp\nunrelated: [1, 2]\n"
                                           "ansible_user: from-group-vars-all\n")
    write(root / "group_vars" / "dc2" / "00-base.yml", "venv: /opt/dc2-env\nrack: r2\n")
    write(root / "group_vars" / "dc2" / "10-override.yaml", "venv: /opt/dc2-override\n")
    write(root / "group_vars" / "dc2" / "backup.yml~", "venv: /never\n")
    write(root / "group_vars" / "dc2" / ".hidden.yml", "venv: /never\n")
    write(root / "group_vars" / "dc2" / "notes.txt", "venv: /never\n")
    write(root / "group_vars" / "dc1", "ansible_port: 2201\nproxy_jump: ops@bastion:22\n")
    write(root / "group_vars" / "nosuchgroup.yml", "venvv: /never-read\n")
    write(root / "host_vars" / "gpu01.dc1.yml", "ansible_host: 127.0.0.11\nnote: first\n")
    write(root / "host_vars" / "nodeb.json", json.dumps({"ansible_port": 2022}))
    write(root / "host_vars" / "gpu03.dc1" / "a.yml", "fleetcheck_venv: /opt/ns-venv\n")
    write(root / "host_vars" / "gpu03.dc1" / "b.yml", "ansible_become_user: vllm\n")
    return path


# the real 0.33.0 V1 runner, the line of it that holds DFlash's +1, and that line without it
RUNNER = "vllm/v1/worker/gpu_model_runner.py"
FIXED_LINE = b'i + 1 for i in (dflash_config.get("target_layer_ids") or [])'
UNFIXED_LINE = b'i for i in (dflash_config.get("target_layer_ids") or [])'


def comparable(host: dict) -> list:
    """A host's checks without timings (which differ run to run)."""
    out = []
    for check in host["checks"]:
        details = {k: v for k, v in check["details"].items() if k != "elapsed_s"}
        out.append([check["id"], check["status"], check["message"], check["evidence"],
                    details])
    return out
