"""Inventories: Ansible's layout and precedence (checked against ansible-inventory itself),
host ranges, --limit, and errors that name the file, the host or group, and the field."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from fleetcheck.input_error import InputError, InputErrors
from fleetcheck import inventory
from fleetcheck.connectors import declarations
from fleetcheck.inventory import JumpHop, apply_limit
from fleetcheck.inventory.hostnames import expand_host_pattern
from fleetcheck.smoke_settings import check_override

pytestmark = pytest.mark.unit

def load_inventory(source, **options):
    """The inventory with every connection's declared variables, as the CLI reads it."""
    return inventory.load_inventory(source, declarations=declarations(), **options)


NESTED = {
    "all": {
        "vars": {"venv": "/root/ml-env", "ansible_user": "ops"},
        "hosts": {"bastion": {"ansible_host": "127.0.0.5"}},
        "children": {
            "dc1": {
                "vars": {"venv": "/opt/dc1-env", "ansible_port": 2222},
                "hosts": {"gpu[01:03].dc1": None},
                "children": {"canary": {"hosts": {"gpu02.dc1": {"venv": "/opt/canary"}},
                                        "vars": {"ansible_user": "canary"}}},
            },
            "dc2": {"hosts": {"node[a:c]": {"ansible_python_interpreter": "/usr/bin/python3"}}},
        },
    }
}


def write(tmp_path, data, name="inv.yaml"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


def test_groups_vars_and_ranges(tmp_path):
    hosts = {h.name: h for h in load_inventory(write(tmp_path, NESTED))}
    assert sorted(hosts) == sorted(["bastion", "gpu01.dc1", "gpu02.dc1", "gpu03.dc1",
                                    "nodea", "nodeb", "nodec"])
    assert hosts["gpu01.dc1"].venv == "/opt/dc1-env" and hosts["gpu01.dc1"].port == 2222
    assert hosts["gpu02.dc1"].venv == "/opt/canary" and hosts["gpu02.dc1"].user == "canary"
    assert hosts["gpu02.dc1"].groups == ["canary", "dc1"]
    assert hosts["nodeb"].venv == "/root/ml-env" and hosts["nodeb"].python == "/usr/bin/python3"
    assert hosts["bastion"].address == "127.0.0.5" and hosts["bastion"].user == "ops"
    assert hosts["gpu01.dc1"].interpreter == "/opt/dc1-env/bin/python"


@pytest.mark.ansible
def test_matches_ansible_inventory(tmp_path):
    """ansible-inventory is the oracle for membership and merged vars."""
    path = write(tmp_path, NESTED)
    ansible = shutil.which("ansible-inventory")
    assert ansible, "ansible-core must be installed (test extra)"
    proc = subprocess.run([ansible, "-i", path, "--list"], capture_output=True, text=True,
                          check=True)
    oracle = json.loads(proc.stdout)
    hostvars = oracle["_meta"]["hostvars"]
    ours = {h.name: h for h in load_inventory(path)}
    assert sorted(hostvars) == sorted(ours)
    for name, host in ours.items():
        assert hostvars[name].get("venv") == host.venv, name
        assert hostvars[name].get("ansible_user") == host.user, name
        assert hostvars[name].get("ansible_port") == host.port, name
        assert hostvars[name].get("ansible_host") == host.address, name
        for group in host.groups:
            members = oracle[group].get("hosts", [])
            assert name in members or any(name in oracle.get(child, {}).get("hosts", [])
                                          for child in oracle[group].get("children", [])), group


@pytest.mark.parametrize("pattern, expected", [
    ("gpu[01:03].dc1", ["gpu01.dc1", "gpu02.dc1", "gpu03.dc1"]),
    ("node[a:c]", ["nodea", "nodeb", "nodec"]),
    ("h[1:7:3]", ["h1", "h4", "h7"]),
    ("r[1:2]-s[a:b]", ["r1-sa", "r1-sb", "r2-sa", "r2-sb"]),
    ("plain", ["plain"]),
])
def test_host_ranges(pattern, expected):
    assert expand_host_pattern(pattern, "inv.yaml") == expected


@pytest.mark.parametrize("data, needles", [
    ({"all": {"hosts": {"gpu1": {"venvv": "/x"}}}}, ["host 'gpu1'", "field 'venvv'",
                                                     "did you mean venv?"]),
    ({"all": {"hosts": {"gpu1": {"ansible_become": "maybe"}}}},
     ["host 'gpu1'", "field 'ansible_become'", "boolean"]),
    ({"all": {"hosts": {"gpu1": {"ansible_become": True, "ansible_become_method": "su"}}}},
     ["field 'ansible_become_method'", "only sudo"]),
    ({"all": {"hosts": {"gpu1": {"ansible_port": "22x"}}}}, ["host 'gpu1'", "field 'ansible_port'"]),
    ({"all": {"children": {"dc1": {"hostz": {}}}}}, ["group 'dc1'", "field 'hostz'"]),
    ({"all": {"hosts": {"gpu[5:1]": None}}}, ["host 'gpu[5:1]'", "expands to no hosts"]),
    ({"all": {"hosts": {"gpu1": {"venv": "relative/env"}}}}, ["field 'venv'", "absolute path"]),
    ({"all": {"hosts": {"gpu1": {"venv": "/x\n; touch /tmp/pwned"}}}}, ["field 'venv'", "control"]),
    # a bidi override would show the path reversed on a terminal
    ({"all": {"hosts": {"gpu1": {"venv": "/opt/\u202eenv"}}}}, ["field 'venv'", "control"]),
    ({"all": {"hosts": {"gpu\u202e1": None}}}, ["control characters"]),
    ({"all": {"hosts": {"gpu1": {"connection": "telnet"}}}}, ["field 'connection'"]),
    ({"all": {"hosts": {"gpu1": {"ansible_ssh_common_args": "-o ProxyCommand='nc %h %p'"}}}},
     ["field 'ansible_ssh_common_args'", "ProxyJump", "ProxyCommand"]),
    ({"all": {"hosts": {"gpu1": {"ansible_ssh_common_args": "-p 2222"}}}},
     ["field 'ansible_ssh_common_args'", "'-p'"]),
    ({"all": {"hosts": {"gpu1": {"vllm_url": "http://[::1"}}}},
     ["host 'gpu1'", "field 'vllm_url'", "is not a URL"]),
    # a route that cannot be followed exactly is refused, never cut to its first hop
    ({"all": {"hosts": {"gpu1": {"proxy_jump": "ops@gate:22x"}}}},
     ["host 'gpu1'", "field 'proxy_jump'", "'ops@gate:22x'", "1-65535"]),
    ({"all": {"hosts": {"gpu1": {"ansible_ssh_common_args": "-J a,ops@gate:99999"}}}},
     ["host 'gpu1'", "field 'ansible_ssh_common_args'", "'a,ops@gate:99999'", "1-65535"]),
    ({"all": {"hosts": {"gpu1": {"ansible_ssh_common_args": "-J a -o ProxyJump=b"}}}},
     ["field 'ansible_ssh_common_args'", "given twice", "'a'", "'b'"]),
    ({"all": {"children": {"dc1": {"hosts": {"gpu1": None},
                                   "vars": {"proxy_jump": "gate1,,gate2"}}}}},
     ["group 'dc1'", "field 'proxy_jump'", "empty hop"]),
    ({"all": {"hosts": {"gpu1": {"vllm_url": "http://h:99999"}}}},
     ["host 'gpu1'", "field 'vllm_url'", "'http://h:99999'", "1-65535"]),
    ({"all": {"hosts": {"gpu1": {"vllm_url": "http://h:80x/v1"}}}},
     ["field 'vllm_url'", "1-65535"]),
    ({"all": {"hosts": {"gpu1": {"vllm_url": "ftp://h:21"}}}},
     ["field 'vllm_url'", "http:// or https://"]),
    ({"all": {"hosts": {"gpu1": {"vllm_url": "http://:8000"}}}},
     ["field 'vllm_url'", "names no host"]),
    ({"all": {"hosts": {"gpu1": {"ansible_port": 0}}}}, ["field 'ansible_port'", "1-65535"]),
    ({"all": {"hosts": {"gpu1": {"ansible_port": 65536}}}}, ["field 'ansible_port'", "1-65535"]),
    ({"all": {"hosts": {}}}, ["no hosts"]),
    ({"all": {"hosts": {"gpu1\n; touch /tmp/pwned": None}}}, ["host 'gpu1\\n", "control"]),
    ("", ["empty"]),
    ("all: [unclosed", ["not valid YAML"]),
])
def test_bad_input_names_file_host_and_field(tmp_path, data, needles):
    path = write(tmp_path, data)
    with pytest.raises(InputError) as info:
        load_inventory(path)
    message = str(info.value)
    assert message.startswith(path)
    for needle in needles:
        assert needle in message


@pytest.mark.parametrize("name, meant", [
    ("ansible_prot", "ansible_port"), ("ansible_usr", "ansible_user"),
    ("ansible_ssh_private_keyfile", "ansible_ssh_private_key_file"),
    ("pyton", "python"), ("containr", "container"), ("conection", "connection"),
    ("ansibel_user", "ansible_user"), ("ansbile_port", "ansible_port"),
    ("ansible_ssh_private_key", "ansible_ssh_private_key_file"),
    ("ansible_private_key", "ansible_private_key_file"),
])
def test_a_typo_of_a_connection_variable_is_refused(tmp_path, name, meant):
    path = write(tmp_path, {"all": {"hosts": {"gpu1": {name: "x"}}}})
    with pytest.raises(InputError, match="field '%s': unknown variable: did you mean %s" % (
            name, meant)):
        load_inventory(path)


def test_every_mistake_of_an_inventory_is_listed_in_one_pass(tmp_path):
    """Three typos and a bad value (set on a group of two hosts: said once) take one run."""
    path = write(tmp_path, {"all": {
        "vars": {"ansible_ssh_private_key": "/k", "venvv": "/x"},
        "children": {"gpus": {"vars": {"ansible_port": "nope"},
                              "hosts": {"gpu1": {"pyton": "/usr/bin/python3"}, "gpu2": None}}}}})
    with pytest.raises(InputErrors) as info:
        load_inventory(path)
    assert [str(error) for error in info.value.errors] == [
        "%s: group 'all': field 'ansible_ssh_private_key': unknown variable: did you mean "
        "ansible_ssh_private_key_file?" % path,
        "%s: group 'all': field 'venvv': unknown variable: did you mean venv?" % path,
        "%s: host 'gpu1': field 'pyton': unknown variable: did you mean python?" % path,
        "%s: group 'gpus': field 'ansible_port': must be a port number 1-65535, got 'nope'"
        % path]
    assert str(info.value) == "\n".join(str(error) for error in info.value.errors)


def test_one_mistake_is_one_plain_input_error(tmp_path):
    path = write(tmp_path, {"all": {"hosts": {"gpu1": {"venvv": "/x"}, "gpu2": None}}})
    with pytest.raises(InputError) as info:
        load_inventory(path)
    assert type(info.value) is InputError


def test_other_playbooks_and_ansibles_own_variables_are_not_typos(tmp_path):
    """Words a few letters from fleetcheck's are other variables: python3, containerd,
    collection, venv2, the plurals, and Ansible's own variables fleetcheck does not read
    (passwords, the older su/sudo become names, kubectl and docker connection options)."""
    names = ["python3", "python2", "containerd", "collection", "venv2", "containers",
             "connections", "ansible_password", "ansible_become_pass", "ansible_su_user",
             "ansible_sudo_user", "ansible_ssh_extra_args", "ansible_kubectl_pod",
             "ansible_docker_extra_args", "ansible_kubectl", "ansible_ssh"]
    path = write(tmp_path, {"all": {"hosts": {"gpu1": {n: "x" for n in names}}}})
    assert [h.name for h in load_inventory(path)] == ["gpu1"]


def test_a_feature_checks_its_own_variable_with_the_file_and_group_that_set_it(tmp_path):
    """The inventory knows `smoke` is a mapping; what may be in it is the smoke feature's
    to say (handed in, never imported), and its error still names where it was set."""
    path = write(tmp_path, "[gpus]\ngpu1\n", "hosts.ini")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpus.yml").write_text("smoke: {requests: 0}\n")
    assert load_inventory(path)[0].smoke == {"requests": 0}
    with pytest.raises(InputError) as info:
        load_inventory(path, features={"smoke": check_override})
    message = str(info.value)
    assert "group_vars/gpus.yml" in message and "group 'gpus'" in message
    assert "field 'smoke.requests'" in message and "positive integer" in message
    (tmp_path / "group_vars" / "gpus.yml").write_text("smoke: [1]\n")
    with pytest.raises(InputError, match="field 'smoke': must be a mapping"):
        load_inventory(path)


def test_proxy_jump_from_ansible_common_args(tmp_path):
    data = {"all": {"hosts": {"gpu1": {"ansible_ssh_common_args": "-J ops@bastion:2200"},
                              "gpu2": {"proxy_jump": "jump1"},
                              "gpu3": {"ansible_ssh_common_args":
                                       "-o StrictHostKeyChecking=no -o ControlMaster=auto "
                                       "-oUserKnownHostsFile=/dev/null -q"},
                              "gpu4": {"ansible_ssh_common_args":
                                       "-o StrictHostKeyChecking=no -o ProxyJump=b1"},
                              "gpu5": {"ansible_ssh_common_args": "-J ops@b1:2200,b2"},
                              "gpu6": {"proxy_jump": "none",
                                       "ansible_ssh_common_args": "-J b1"}}}}
    hosts = {h.name: h for h in load_inventory(write(tmp_path, data))}
    assert hosts["gpu1"].proxy_jump == (JumpHop("bastion", "ops", 2200),)
    assert hosts["gpu2"].proxy_jump == (JumpHop("jump1"),)
    assert hosts["gpu3"].proxy_jump is None and hosts["gpu4"].proxy_jump == (JumpHop("b1"),)
    # every hop, in order
    assert hosts["gpu5"].proxy_jump == (JumpHop("b1", "ops", 2200), JumpHop("b2"))
    # an explicit proxy_jump beats common args; `none` is kept as no bastion at all
    assert hosts["gpu6"].proxy_jump == ()


def test_connection_values_the_inventory_does_not_give_stay_unset(tmp_path):
    """Unset is None, not a default, so ssh_config can still fill it; an explicit value
    equal to the default is kept as given (it must beat ssh_config)."""
    data = {"all": {"hosts": {"bare": None,
                              "given": {"ansible_host": "given", "ansible_port": 22,
                                        "ansible_user": "root", "key": "/k/id"}}}}
    hosts = {h.name: h for h in load_inventory(write(tmp_path, data))}
    bare, given = hosts["bare"], hosts["given"]
    assert (bare.address, bare.port, bare.user, bare.key, bare.proxy_jump) == \
        (None, None, None, None, None)
    assert bare.destination == "bare"
    assert (given.address, given.port, given.user, given.key) == ("given", 22, "root", "/k/id")


def test_limit_by_host_group_glob_and_exclusion(tmp_path):
    hosts = load_inventory(write(tmp_path, NESTED))
    names = lambda hs: sorted(h.name for h in hs)
    assert names(apply_limit(hosts, "canary", "inv")) == ["gpu02.dc1"]
    assert names(apply_limit(hosts, "gpu0*", "inv")) == ["gpu01.dc1", "gpu02.dc1", "gpu03.dc1"]
    assert names(apply_limit(hosts, "dc1,!canary", "inv")) == ["gpu01.dc1", "gpu03.dc1"]
    with pytest.raises(InputError, match="matches no host"):
        apply_limit(hosts, "nothing-*", "inv")
