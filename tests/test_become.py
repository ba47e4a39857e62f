"""become over real sshd with a real sudo: a non-root login user whose install sits in a
root-only directory. Passwordless sudo reads it; a sudo that wants a password is an
`auth` error that says so, at once (never a prompt that hangs until the deadline)."""

from __future__ import annotations

import os
import pwd
import shlex
import subprocess

import pytest

from fleet_helpers import run_fleetcheck

pytestmark = pytest.mark.unit

LOGIN = "fcbecome"
LOCKED = "/opt/fleetcheck-locked"
KEYS = "/opt/fleetcheck-keys"  # the client key where the login user can read it
ENV = LOCKED + "/ml-env"
SUDOERS = {
    "sudo-ok": "Defaults !lecture\n%s ALL=(ALL:ALL) NOPASSWD: ALL\n" % LOGIN,
    "sudo-password": "%s ALL=(ALL:ALL) ALL\n" % LOGIN,
    "no-become": "",
}


def ensure_login_user() -> None:
    """A plain user that sshd lets in with a key: '*' in shadow is no password at all,
    where useradd's '!' would be a locked account."""
    try:
        pwd.getpwnam(LOGIN)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", LOGIN], check=True)
    subprocess.run(["usermod", "-p", "*", LOGIN], check=True)


@pytest.fixture
def become_fleet(fleet, real_venvs, tmp_path):
    ensure_login_user()
    locked = tmp_path / "locked"
    (locked / "ml-env").mkdir(parents=True)
    os.chmod(str(locked), 0o700)  # root's: the login user cannot even list it
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "authorized_keys").write_text(open(fleet.client_key + ".pub").read())
    os.chmod(str(keys), 0o755)
    hosts = []
    for name, rules in SUDOERS.items():
        sudoers = tmp_path / ("sudoers-" + name)
        sudoers.write_text(rules)
        os.chmod(str(sudoers), 0o440)
        hosts.append(fleet.add(name, mounts={
            LOCKED: str(locked), ENV: real_venvs["0.33.0"] + ":ro",
            "/etc/sudoers": str(sudoers) + ":ro", KEYS: str(keys) + ":ro"},
            # sshd reads authorized_keys as the user, who cannot enter the fleet's directory
            sshd_options={"AuthorizedKeysFile": KEYS + "/authorized_keys"}))
    fleet.start()
    return fleet, hosts


def test_become_reads_a_root_only_install_and_a_password_prompt_is_an_auth_error(
        tmp_path, become_fleet):
    fleet, (ok, password, plain) = become_fleet
    # an Ansible inventory as operators keep it: INI, group_vars, host_vars, other vars
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "[gpus]\n"
        "sudo-ok ansible_host=%s\n"
        "sudo-password ansible_host=%s\n"
        "no-become ansible_host=%s ansible_become=false\n\n"
        "[gpus:vars]\n"
        "ansible_user=%s\nansible_ssh_private_key_file=%s\nntp_server=ntp.example\n"
        % (ok.address, password.address, plain.address, LOGIN, fleet.client_key))
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpus.yml").write_text(
        "ansible_become: yes\nfleetcheck_venv: %s\ncuda_version: '12.4'\n" % ENV)
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "sudo-ok.yml").write_text("ansible_become_user: root\n")
    run = run_fleetcheck(tmp_path, str(inventory), "--known-hosts", fleet.known_hosts,
                         "--timeout", "60")
    assert run.code == 3, run.stderr

    works = run.host("sudo-ok")
    assert works["status"] == "pass", works
    assert works["vllm"]["version"] == "0.33.0"

    refused = run.host("sudo-password")
    assert refused["status"] == "error" and refused["error"]["kind"] == "auth"
    assert "password" in refused["error"]["message"]
    assert "NOPASSWD" in refused["error"]["message"]
    assert refused["duration_s"] < 30  # sudo -n fails at once; nothing waits for a prompt

    # without become the same login user cannot read the install
    blind = run.host("no-become")
    assert blind["error"] is None
    for check in blind["checks"][:3]:
        assert check["status"] == "error" and "no vllm install found" in check["message"]


def test_become_wraps_the_whole_command_and_quotes_the_user():
    from fleetcheck.inventory import Host
    from fleetcheck.wire_protocol import probe_command

    plain = Host(name="gpu1", address="gpu1", venv="/opt/env")
    hostile = Host(name="gpu1", address="gpu1", venv="/opt/env", become=True,
                   become_user="x; touch /tmp/pwned")
    words = shlex.split(probe_command(hostile.connection_settings()))
    assert words[:7] == ["sudo", "-n", "-u", "x; touch /tmp/pwned", "--", "/bin/sh", "-c"]
    assert words[7] == probe_command(plain.connection_settings()) and len(words) == 8
    bare = Host(name="g", address="g", become=True).connection_settings()
    assert shlex.split(probe_command(bare))[:4] == \
        ["sudo", "-n", "--", "/bin/sh"]
