"""`fleetcheck run` end to end over real sshd hosts holding real vLLM 0.20.1 and 0.33.0
wheels (each host sees its own install at the same path, through a mount namespace)."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.lab.testhosts import free_loopback_port
from probe_helpers import ENV, site_packages

pytestmark = pytest.mark.unit

FIX_IDS = ("dflash-layer-offset", "dflash-swa", "dflash-cache-drop")


def assert_evidence_is_on_disk(venv: str, evidence: dict) -> None:
    """Evidence can be re-checked by hand: a line that ran (or passed the argument) holds
    the start of the text; an observation of a function's return is at that function's
    def, and one of what a construction got is at that call."""
    with open(os.path.join(site_packages(venv), evidence["file"]), encoding="utf-8") as handle:
        line = handle.read().splitlines()[evidence["line"] - 1].strip()
    step = evidence.get("step") or ""
    if step == "returned" or re.fullmatch(r"shift [+-]\d+", step):
        function = evidence["text"].split(" returned ", 1)[0].rsplit(".", 1)[-1]
        assert " returned " in evidence["text"] and line.startswith("def %s(" % function), \
            (line, evidence)
    elif step == "built":
        call = re.match(r"(?:[\w.]+\s*=\s*)?([\w.]+)\(", line)
        assert call, (line, evidence)
        callee = call.group(1).rsplit(".", 1)[-1]
        # the recorder stands in for Attention: its text is what each layer got
        assert callee in evidence["text"] or (callee == "Attention" and " got " in
                                              evidence["text"]), (line, evidence)
    else:
        assert step in ("ran", "argument"), evidence
        assert line and evidence["text"].startswith(line[:40]), (line, evidence)


@pytest.fixture
def real_fleet(fleet, real_venvs):
    old = fleet.add("gpu-old", mounts={ENV: real_venvs["0.20.1"]})
    new = fleet.add("gpu-new", mounts={ENV: real_venvs["0.33.0"]})
    fleet.start()
    dead = fleet.next_address()
    inventory = {"all": {"vars": {"venv": ENV}, "children": {
        "prod": {"hosts": ssh_hosts(fleet, [old, new])},
        "lost": {"hosts": {"gpu-down": {"ansible_host": dead, "port": free_loopback_port(dead),
                                        "key": fleet.client_key}}}}}}
    return fleet, inventory


def test_real_wheels_verdicts_commits_and_evidence(tmp_path, real_fleet, real_venvs):
    fleet, inventory = real_fleet
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts, "-j", "4",
                         "--verbose")
    assert run.code == 1, run.stderr
    assert run.results["complete"] is True
    assert [h["name"] for h in run.results["hosts"]] == ["gpu-old", "gpu-new", "gpu-down"]

    old, new = run.host("gpu-old"), run.host("gpu-new")
    assert old["vllm"]["version"] == "0.20.1" and old["vllm"]["commit"] == "132765e35"
    assert new["vllm"]["version"] == "0.33.0" and new["vllm"]["commit"] == "4ba787ec9"
    assert new["vllm"]["commit_source"] == "_version.py"
    assert old["status"] == "fail" and new["status"] == "pass"
    for check_id in FIX_IDS:
        assert run.check("gpu-old", check_id)["status"] == "fail", check_id
        assert run.check("gpu-new", check_id)["status"] == "pass", check_id
        for host, venv in (("gpu-old", real_venvs["0.20.1"]), ("gpu-new", real_venvs["0.33.0"])):
            evidence = [e for e in run.check(host, check_id)["evidence"] if e["file"]]
            assert evidence, (host, check_id)
            for item in evidence:
                assert_evidence_is_on_disk(venv, item)

    offset_new = run.check("gpu-new", "dflash-layer-offset")["evidence"]
    assert {e["file"] for e in offset_new} == {
        "vllm/v1/worker/gpu_model_runner.py",
        "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"}
    # both paths, run with DFlash's ids, return each + 1; the ids they read are DFlash's
    # own (dflash_config), never DSpark's hf_config read
    returned = [e for e in offset_new if e.get("step") == "returned"]
    assert {e["file"] for e in returned} == {e["file"] for e in offset_new}, offset_new
    assert all("returned (2, 10, 18) for target_layer_ids [1, 9, 17]" in e["text"]
               for e in returned), offset_new
    reads = [e for e in offset_new if e.get("step") == "ran" and "target_layer_ids" in e["text"]]
    assert reads and all("dflash_config" in e["text"] for e in reads), offset_new
    old_evidence = run.check("gpu-old", "dflash-layer-offset")["evidence"]
    offset_old = old_evidence[0]
    assert offset_old["file"] == "vllm/v1/worker/gpu_model_runner.py"
    assert offset_old["step"] == "shift +0", offset_old
    assert "returned (1, 9, 17) for target_layer_ids [1, 9, 17]" in offset_old["text"]
    assert any(e.get("step") == "ran" and 'dflash_config.get("target_layer_ids")' in e["text"]
               for e in old_evidence), old_evidence
    assert "VLLM_USE_V2_MODEL_RUNNER=1" in run.check("gpu-new", "dflash-swa")["message"]

    down = run.host("gpu-down")
    assert down["status"] == "unreachable" and down["error"]["kind"] == "unreachable"
    assert "refused" in down["error"]["message"]
    assert {c["status"] for c in down["checks"]} == {"skip"}

    # the same verdicts in the HTML and on the terminal
    for name in ("gpu-old", "gpu-new", "gpu-down"):
        assert name in run.html and name in run.stdout
    assert "vllm/v1/worker/gpu_model_runner.py:%d" % offset_old["line"] in run.html
    assert "4ba787ec9" in run.html and "132765e35" in run.stdout
    # not a TTY: one plain progress line per host, then the recap by failure kind
    assert "] gpu-old checked" in run.stderr and "] gpu-down unreachable" in run.stderr
    assert " fail" not in run.stderr  # the status is the table's alone
    assert "Recap (hosts not passing, by kind):" in run.stdout
    assert "  unreachable (1): gpu-down" in run.stdout  # the kind once, not "unreachable: unreachable"
    assert "unreachable: unreachable" not in run.html
    assert "? unreachable</summary>" in run.html  # the host's own line in the HTML says it once too
    for host in ("gpu-old", "gpu-new"):
        for check_id in FIX_IDS:
            item = run.check(host, check_id)["evidence"][0]
            assert "%s:%d" % (item["file"], item["line"]) in run.stdout, (host, check_id)


def test_limit_selects_hosts_and_exit_codes(tmp_path, real_fleet):
    fleet, inventory = real_fleet
    only_new = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                              "--limit", "gpu-n*")
    assert only_new.code == 0, only_new.stderr
    assert [h["name"] for h in only_new.results["hosts"]] == ["gpu-new"]
    unreachable_only = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                                      "--limit", "lost,gpu-new")
    assert unreachable_only.code == 3
    bad_limit = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                               "--limit", "nope")
    assert bad_limit.code == 2 and "--limit" in bad_limit.stderr


def test_restyled_real_install_keeps_verdict_and_lookalike_does_not_fake_one(
        tmp_path, fleet, real_venvs):
    """A copy of the real 0.20.1 install patched the way PR #40898 spells the +1, spread
    over lines; and SWA look-alikes added to laguna_dflash.py (not the drafter module)."""
    copy = str(tmp_path / "patched-env")
    shutil.copytree(real_venvs["0.20.1"], copy, symlinks=True,
                    copy_function=os.link)  # hard links: fast; edited files are replaced
    site = site_packages(copy)

    def replace(rel: str, old: str, new: str) -> None:
        path = os.path.join(site, rel)
        text = open(path, encoding="utf-8").read()
        assert old in text
        os.unlink(path)  # never write through a hard link into the cached install
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text.replace(old, new))

    replace("vllm/v1/worker/gpu_model_runner.py", "            return tuple(layer_ids)\n",
            "            return tuple(\n                layer_id + 1\n"
            "                for layer_id in layer_ids\n            )\n")
    laguna = "vllm/model_executor/models/laguna_dflash.py"
    with open(os.path.join(site, laguna), "w", encoding="utf-8") as handle:
        handle.write("_DFLASH_VALID_LAYER_TYPES = {'sliding_attention'}\n"
                     "def _get_dflash_layer_types(c):\n    return c.layer_types\n"
                     "def f(a):\n    a(per_layer_sliding_window=4096)\n")
    host = fleet.add("gpu-patched", mounts={ENV: copy})
    fleet.start()
    run = run_fleetcheck(tmp_path, {"all": {"vars": {"venv": ENV},
                                            "hosts": ssh_hosts(fleet, [host])}},
                         "--known-hosts", fleet.known_hosts)
    offset = run.check("gpu-patched", "dflash-layer-offset")
    assert offset["status"] == "pass", offset
    first = offset["evidence"][0]
    assert first["step"] == "returned" and "returned (2, 10, 18)" in first["text"], first
    assert any(e.get("step") == "ran" and e["text"] == "layer_id + 1"
               for e in offset["evidence"]), offset["evidence"]
    assert "suggests not fixed" in offset["message"]  # 0.20.1 by version, fixed by code
    assert run.check("gpu-patched", "dflash-swa")["status"] == "fail"


def test_unknown_host_key_refused_under_strict_and_accept_new_writes_only_given_file(
        tmp_path, fleet, real_venvs):
    host = fleet.add("gpu-new", mounts={ENV: real_venvs["0.33.0"]}, known=False)
    fleet.start()
    inventory = {"all": {"vars": {"venv": ENV}, "hosts": ssh_hosts(fleet, [host])}}
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    strict = run_fleetcheck(tmp_path, inventory, "--known-hosts", str(empty))
    assert strict.code == 3
    error = strict.host("gpu-new")["error"]
    assert error["kind"] == "host-key" and "--host-key-policy accept-new" in error["message"]
    assert empty.read_text() == ""

    home_known = os.path.expanduser("~/.ssh/known_hosts")
    before = open(home_known).read() if os.path.exists(home_known) else None
    accepted = run_fleetcheck(tmp_path, inventory, "--known-hosts", str(empty),
                              "--host-key-policy", "accept-new")
    assert accepted.code == 0, accepted.stderr
    assert host.address in empty.read_text()
    after = open(home_known).read() if os.path.exists(home_known) else None
    assert before == after

    # the key changes (host re-imaged): refused even under accept-new
    fleet.stop()
    os.unlink(os.path.join(host.directory, "host_key"))
    from fleetcheck.lab.testhosts import keygen
    keygen(os.path.join(host.directory, "host_key"))
    fleet.start()
    changed = run_fleetcheck(tmp_path, inventory, "--known-hosts", str(empty),
                             "--host-key-policy", "accept-new")
    assert changed.code == 3
    assert changed.host("gpu-new")["error"]["kind"] == "host-key"
    assert "CHANGED" in changed.host("gpu-new")["error"]["message"]


def test_bad_inventory_exits_2_naming_file_host_and_field(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("all:\n  hosts:\n    gpu7:\n      ansible_port: many\n")
    run = run_fleetcheck(tmp_path, str(path))
    assert run.code == 2
    assert str(path) in run.stderr and "gpu7" in run.stderr and "ansible_port" in run.stderr
    assert run.results is None


def test_proxy_jump_through_a_bastion(tmp_path, fleet, real_venvs):
    """The target is reached through a bastion (direct-tcpip); both host keys are checked."""
    bastion = fleet.add("bastion")
    target = fleet.add("gpu-behind", mounts={ENV: real_venvs["0.33.0"]})
    fleet.start()
    inventory = {"all": {"vars": {"venv": ENV}, "hosts": {"gpu-behind": {
        "ansible_host": target.address, "key": fleet.client_key,
        "ansible_ssh_common_args": "-J root@%s:22" % bastion.address}}}}
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts)
    assert run.code == 0, run.host("gpu-behind")
    assert run.check("gpu-behind", "dflash-layer-offset")["status"] == "pass"
    # a bastion whose key is not known is refused like any host
    lines = [l for l in open(fleet.known_hosts) if not l.startswith(bastion.address + " ")]
    strict = tmp_path / "known_without_bastion"
    strict.write_text("".join(lines))
    refused = run_fleetcheck(tmp_path, inventory, "--known-hosts", str(strict))
    assert refused.code == 3
    assert refused.host("gpu-behind")["error"]["kind"] == "host-key"
    assert refused.host("gpu-behind")["error"]["message"].startswith(
        "via bastion 1 of 1 root@%s:22: unknown host %s " % (bastion.address, bastion.address))


def forwarding_only_to(address: str) -> dict[str, str]:
    """sshd options of a bastion that forwards to `address`:22 and nowhere else, and logs
    each forward it opens (sshd's debug line `target ADDRESS port N`)."""
    return {"AllowTcpForwarding": "yes", "PermitOpen": "%s:22" % address, "LogLevel": "DEBUG1"}


def forwards(host) -> list[str]:
    """The `target ADDRESS port N` of each forward this bastion's sshd opened."""
    with open(os.path.join(host.directory, "sshd.log"), encoding="utf-8",
              errors="replace") as handle:
        return re.findall(r"direct_tcpip: originator \S+ port \d+, (target \S+ port \d+)",
                          handle.read())


def test_proxy_jump_through_two_bastions_visits_both_then_names_the_one_down(
        tmp_path, fleet, real_venvs):
    """-J b1,b2: b1 forwards only to b2 and b2 only to the target, so the run passes
    only through both, in order (a route cut to its first hop is refused by b1); with
    b2 down the host is unreachable, and the message names b2."""
    first_address, second_address, target_address = (fleet.next_address() for _ in range(3))
    first = fleet.add("bastion1", address=first_address,
                      sshd_options=forwarding_only_to(second_address))
    second = fleet.add("bastion2", address=second_address,
                       sshd_options=forwarding_only_to(target_address))
    target = fleet.add("gpu-behind", address=target_address,
                       mounts={ENV: real_venvs["0.33.0"]})
    fleet.start()
    inventory = {"all": {"vars": {"venv": ENV}, "hosts": {"gpu-behind": {
        "ansible_host": target.address, "key": fleet.client_key,
        "ansible_ssh_common_args": "-o StrictHostKeyChecking=no "
                                   "-J root@%s,ssh://root@%s:22" % (first.address,
                                                                    second.address)}}}}
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts)
    assert run.code == 0, run.host("gpu-behind")
    assert run.check("gpu-behind", "dflash-layer-offset")["status"] == "pass"
    assert forwards(first) == ["target %s port 22" % second.address]
    assert forwards(second) == ["target %s port 22" % target.address]

    fleet.kill(second)
    down = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                          "--retries", "0")
    assert down.code == 3
    host = down.host("gpu-behind")
    assert host["status"] == "unreachable" and host["error"]["kind"] == "unreachable"
    assert host["error"]["message"] == "via bastion 2 of 2 root@%s:22: the bastion before it " \
        "could not connect to it (Connect failed)" % second.address, host["error"]["message"]


def test_an_explicit_ansible_port_22_beats_ssh_config_port(tmp_path, fleet, real_venvs):
    """ssh_config gives the host's HostName, user, key and a Port where nothing listens;
    `ansible_port: 22` (the default's value, given) must win, as `ssh -o Port=22` does."""
    host = fleet.add("gpu-cfg", mounts={ENV: real_venvs["0.33.0"]})
    fleet.start()
    closed = free_loopback_port(host.address)
    config = tmp_path / "ssh_config"
    config.write_text("Host gpu-cfg\n    HostName %s\n    Port %d\n    User root\n"
                      "    IdentityFile %s\n" % (host.address, closed, fleet.client_key))
    common = ("--known-hosts", fleet.known_hosts, "--ssh-config", str(config),
              "--retries", "0")
    explicit = run_fleetcheck(tmp_path, {"all": {"vars": {"venv": ENV}, "hosts": {
        "gpu-cfg": {"ansible_port": 22}}}}, *common)
    assert explicit.code == 0, explicit.host("gpu-cfg")
    assert explicit.host("gpu-cfg")["address"] == "gpu-cfg"
    # unset, ssh_config's Port is the one used (and so the explicit 22 above won)
    unset = run_fleetcheck(tmp_path, {"all": {"vars": {"venv": ENV}, "hosts": {
        "gpu-cfg": None}}}, *common)
    assert unset.host("gpu-cfg")["status"] == "unreachable"
    assert "root@%s:%d: connection refused" % (host.address, closed) in \
        unset.host("gpu-cfg")["error"]["message"]


def test_a_host_that_closes_stdout_and_lingers_ends_at_its_deadline(tmp_path, fleet):
    host = fleet.add("lingers", sshd_options={"ForceCommand": "exec 1>&-; sleep 3600"})
    fleet.start()
    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(fleet, [host])}},
                         "--known-hosts", fleet.known_hosts, "--timeout", "3", "--retries", "0")
    assert run.host("lingers")["error"]["kind"] == "timeout"
    assert run.results["hosts"][0]["duration_s"] < 10
