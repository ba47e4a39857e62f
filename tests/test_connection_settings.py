"""What a connector is given of a host (fleetcheck/connection_settings.py): every setting
the inventory resolved for reaching it, as one frozen value built by the inventory's
host, never the inventory's model itself."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from fleetcheck.connection_settings import ConnectionSettings
from fleetcheck.connectors import declarations
from fleetcheck.inventory import read_inventory

pytestmark = pytest.mark.unit


def hosts(tmp_path, inventory: dict) -> dict:
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump(inventory))
    return {host.name: host for host in read_inventory([str(path)],
                                                       declarations=declarations()).hosts}


def test_each_connections_variables_reach_its_settings(tmp_path):
    read = hosts(tmp_path, {"all": {"hosts": {
        "gpu1": {"ansible_host": "10.0.0.5", "ansible_port": 2200, "ansible_user": "ops",
                 "ansible_ssh_private_key_file": "/keys/id", "proxy_jump": "ops@gate:22",
                 "python": "/usr/bin/python3.11", "ansible_become": True,
                 "container": "vllm", "container_engine": "podman"},
        "pod0": {"ansible_connection": "kubectl", "ansible_kubectl_pod": "vllm-0",
                 "ansible_kubectl_namespace": "inference", "venv": "/opt/env"}}}})
    ssh = read["gpu1"].connection_settings()
    assert (ssh.connection, ssh.destination, ssh.port, ssh.user, ssh.key, ssh.interpreter,
            ssh.become, ssh.container, ssh.container_engine) == (
        "ssh", "10.0.0.5", 2200, "ops", "/keys/id", "/usr/bin/python3.11", True, "vllm",
        "podman")
    assert [(hop.host, hop.user, hop.port) for hop in ssh.proxy_jump] == [("gate", "ops", 22)]
    pod = read["pod0"].connection_settings()
    assert (pod.connection, pod.destination, pod.interpreter) == (
        "kubectl", "pod0", "/opt/env/bin/python")
    assert pod.settings["kubectl_pod"] == "vllm-0"
    assert pod.settings["kubectl_namespace"] == "inference"


def test_the_settings_are_a_value_the_inventory_host_does_not_share(tmp_path):
    host = hosts(tmp_path, {"all": {"hosts": {"pod0": {
        "ansible_connection": "kubectl", "ansible_kubectl_pod": "vllm-0"}}}})["pod0"]
    settings = host.connection_settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.port = 22  # type: ignore[misc]
    host.settings["kubectl_pod"] = "vllm-1"
    assert settings.settings["kubectl_pod"] == "vllm-0"


def test_no_install_hint_is_a_connection_setting():
    assert {f.name for f in dataclasses.fields(ConnectionSettings)}.isdisjoint(
        {"venv", "site_packages", "vllm_url", "smoke", "expect_version", "groups"})
