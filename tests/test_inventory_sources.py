"""Every inventory source Ansible reads (INI, YAML, JSON, directories, group_vars and
host_vars, dynamic inventories, several -i), checked against `ansible-inventory --list`:
the same hosts, the same groups, and for each host the same value of every variable,
fleetcheck's and unrelated ones alike."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from fleetcheck.input_error import InputError
from fleetcheck import inventory
from fleetcheck.connectors import declarations
from fleetcheck.inventory.hosts import variable_table
from fleetcheck.inventory.model import Setting, Site
from fleetcheck.inventory.sources import load_sources
from probe_helpers import ini_inventory, write
from ansible_oracle import (ansible_inventory, oracle, oracle_hosts, oracle_members,
                            our_hostvars, our_members)

pytestmark = pytest.mark.unit


def read_inventory(sources, **options):
    """The inventory with every connection's declared variables, as the CLI reads it."""
    return inventory.read_inventory(sources, declarations=declarations(), **options)


def host_from_vars(name, merged, groups):
    return inventory.host_from_vars(name, merged, groups, declarations=declarations())


def executable(path, text: str) -> str:
    write(path, text)
    os.chmod(str(path), os.stat(str(path)).st_mode | stat.S_IXUSR | stat.S_IXGRP)
    return str(path)


def yaml_directory(root) -> str:
    """An inventory directory: YAML, INI and JSON files in name order, a subdirectory,
    files Ansible ignores, and group_vars/host_vars inside the directory."""
    directory = root / "inventory"
    write(directory / "01-base.yaml", """\
        all:
          vars:
            venv: /root/ml-env
            ansible_user: root
            cuda_version: "12.4"
          children:
            dc1:
              vars: {ansible_port: 2200, venv: /opt/dc1}
              hosts:
                gpu[1:9:4]:
                gpu7:2201:
                  ansible_become: yes
              children:
                canary:
                  hosts:
                    gpu5: {venv: /opt/canary}
            dc2:
              hosts: solo
        """)
    write(directory / "02-more.ini", "[dc2]\nnode1 ansible_user=ops\n\n[dc1:vars]\n"
                                     "venv=/opt/dc1-from-ini\n")
    write(directory / "03-extra.json", json.dumps(
        {"edge": {"hosts": {"edge[a:b]": {"vllm_url": "http://127.0.0.1:9000"}},
                  "vars": {"ansible_python_interpreter": "/usr/bin/python3"}}}))
    write(directory / "sub" / "04-nested.yml", "dc2:\n  vars:\n    rack: r9\n")
    write(directory / "README.md", "not an inventory\n")
    write(directory / "old.bak", "[broken\n")
    write(directory / "hosts.orig", "[broken\n")
    write(directory / ".hidden", "[broken\n")
    write(directory / "group_vars" / "canary.yaml", "ansible_user: canary\n")
    write(directory / "host_vars" / "solo", "ansible_host: 127.0.0.9\n")
    return str(directory)


def dynamic_script(root, with_meta: bool = True) -> str:
    answer = {
        "all": {"vars": {"venv": "/root/ml-env", "owner": "team-a"}},
        "gpus": {"hosts": ["dyn1", "dyn2"], "vars": {"ansible_user": "ops"},
                 "children": ["special"]},
        "special": {"hosts": ["dyn3"], "vars": {"venv": "/opt/special"}},
    }
    hostvars = {"dyn1": {"ansible_host": "127.0.0.21", "ansible_port": 2022},
                "dyn3": {"ansible_become": True}}
    if with_meta:
        answer["_meta"] = {"hostvars": hostvars}
    return executable(root / ("dyn.py" if with_meta else "dyn-nometa.py"), """\
        #!%s
        import json, sys
        answer = %r
        hostvars = %r
        if sys.argv[1:] == ["--list"]:
            print(json.dumps(answer))
        else:
            print(json.dumps(hostvars.get(sys.argv[2], {})))
        """ % (sys.executable, answer, hostvars))


def assert_same_as_ansible(sources: list[str], cwd: str) -> None:
    answer = oracle(sources, cwd)
    data = load_sources(sources)
    hostvars = answer["_meta"]["hostvars"]
    assert sorted(our_hostvars(data)) == oracle_hosts(answer)
    for host, values in our_hostvars(data).items():
        assert values == hostvars.get(host, {}), host
    theirs = {g: s for g, s in oracle_members(answer).items() if s}
    ours = {g: s for g, s in our_members(data).items() if s}
    assert ours == theirs
    # and the Hosts fleetcheck builds are what Ansible's values make of them
    inventory = read_inventory(sources)
    for host in inventory.hosts:
        site = Site("oracle", "host '%s'" % host.name)
        expected = host_from_vars(host.name, {k: Setting(v, site)
                                              for k, v in hostvars.get(host.name, {}).items()},
                                  host.groups)
        assert host == expected, host.name


@pytest.mark.ansible
def test_ini_with_group_vars_and_host_vars_matches_ansible(tmp_path):
    source = ini_inventory(tmp_path / "ini")
    assert_same_as_ansible([source], str(tmp_path))
    hosts = {h.name: h for h in read_inventory([source]).hosts}
    # [canary:vars] beats [dc1:vars] at the same depth: ansible_group_priority 5
    assert hosts["gpu02.dc1"].venv == "/opt/canary-group"
    # group_vars/all.yml beats any group set in the inventory file (Ansible's order)
    assert hosts["gpu05.dc1"].user == "ops" and hosts["gpu01.dc1"].user == "from-group-vars-all"
    # port: gpu05.dc1:2222 (host) > group_vars/dc1 2201 > [dc1:vars] 2200
    assert hosts["gpu05.dc1"].port == 2222 and hosts["gpu04.dc1"].port == 2201
    assert hosts["gpu01.dc1"].address == "127.0.0.11" and hosts["nodeb"].port == 2022
    assert hosts["nodea"].venv == "/opt/dc2-override" and hosts["node10"].venv == "/opt/dc2-override"
    assert hosts["gpu03.dc1"].venv == "/opt/ns-venv" and hosts["gpu03.dc1"].become_user == "vllm"
    assert hosts["gpu01.dc1"].become and not hosts["nodea"].become
    assert hosts["bastion"].timeout == 45.0 and hosts["bastion"].groups == []
    assert hosts["gpu02.dc1"].groups == ["canary", "dc1", "gpus"]


@pytest.mark.ansible
def test_inventory_directory_matches_ansible(tmp_path):
    source = yaml_directory(tmp_path)
    assert_same_as_ansible([source], str(tmp_path))
    hosts = {h.name: h for h in read_inventory([source]).hosts}
    assert list(hosts)[:3] == ["gpu1", "gpu5", "gpu9"]
    assert hosts["gpu1"].venv == "/opt/dc1-from-ini"  # the later file overrides the group
    assert hosts["gpu5"].venv == "/opt/canary" and hosts["gpu5"].user == "canary"
    assert hosts["gpu7"].port == 2201 and hosts["gpu7"].become
    assert hosts["solo"].address == "127.0.0.9" and hosts["edgeb"].python == "/usr/bin/python3"


@pytest.mark.ansible
def test_several_sources_merge_as_ansible_merges_them(tmp_path):
    first = ini_inventory(tmp_path / "a")
    second = write(tmp_path / "b" / "extra.yml", """\
        all:
          children:
            dc1:
              vars: {venv: /opt/from-second-source}
              hosts:
                gpu09.dc1:
            late:
              hosts:
                bastion: {ansible_port: 2022}
        """)
    write(tmp_path / "b" / "group_vars" / "late.yml", "ansible_user: late\n")
    assert_same_as_ansible([first, second], str(tmp_path))
    assert_same_as_ansible([second, first], str(tmp_path))


@pytest.mark.ansible
def test_a_comma_separated_host_list_is_a_source(tmp_path):
    listed = "gpu1.dc1, gpu2.dc1:2222,10.0.0.7,"
    second = write(tmp_path / "more.ini", "[gpus]\ngpu1.dc1 venv=/opt/env\n")
    assert_same_as_ansible([listed, second], str(tmp_path))
    hosts = {h.name: h for h in read_inventory([listed, second]).hosts}
    assert hosts["gpu2.dc1"].port == 2222 and hosts["gpu1.dc1"].venv == "/opt/env"


@pytest.mark.ansible
@pytest.mark.parametrize("with_meta", [True, False])
def test_dynamic_inventory_matches_ansible(tmp_path, with_meta):
    script = dynamic_script(tmp_path, with_meta)
    assert_same_as_ansible([script], str(tmp_path))
    hosts = {h.name: h for h in read_inventory([script]).hosts}
    assert hosts["dyn1"].address == "127.0.0.21" and hosts["dyn1"].port == 2022
    assert hosts["dyn3"].venv == "/opt/special" and hosts["dyn3"].become


@pytest.mark.ansible
def test_saved_ansible_inventory_list_reads_like_its_source(tmp_path):
    """`ansible-inventory --list > fleet.json` (how inventory plugins such as aws_ec2
    reach fleetcheck) gives the hosts and values of the inventory it came from."""
    source = ini_inventory(tmp_path / "ini")
    saved = tmp_path / "export" / "fleet.json"
    saved.parent.mkdir()
    saved.write_text(json.dumps(oracle([source], str(tmp_path))))
    theirs = {h.name: h for h in read_inventory([source]).hosts}
    ours = {h.name: h for h in read_inventory([str(saved)]).hosts}
    assert ours == theirs


def test_plugin_config_is_refused_with_the_export_command(tmp_path):
    path = write(tmp_path / "aws_ec2.yml", "plugin: amazon.aws.aws_ec2\nregions: [us-east-1]\n")
    with pytest.raises(InputError, match=r"ansible-inventory -i .*aws_ec2.yml --list"):
        read_inventory([path])


def test_unrelated_variables_are_ignored_and_typos_refused(tmp_path):
    path = write(tmp_path / "inv.yml", """\
        all:
          vars: {ntp_server: ntp.example, cuda_version: "12.4", env: prod, users: [a, b],
                 ansible_become_password: secret, port_range: "8000-9000"}
          hosts:
            gpu1: {fleetcheck_venv: /opt/ns, venv: /opt/plain}
        """)
    hosts = read_inventory([path]).hosts
    assert hosts[0].venv == "/opt/ns"  # fleetcheck_ spelling wins over the short one
    for name, guess in [("venvv", "venv"), ("site_package", "site_packages"),
                        ("vlm_url", "vllm_url"), ("Venv", "venv"), ("proxyjump", "proxy_jump"),
                        ("fleetcheck_vnev", "fleetcheck_venv")]:
        typo = write(tmp_path / "group_vars" / "gpus.yml", "%s: /x\n" % name)
        inventory = write(tmp_path / "typo.ini", "[gpus]\ngpu1\n")
        with pytest.raises(InputError) as info:
            read_inventory([inventory])
        message = str(info.value)
        assert message.startswith(typo) and "group 'gpus'" in message, message
        assert "field '%s'" % name in message and "did you mean %s?" % guess in message
    os.remove(str(tmp_path / "group_vars" / "gpus.yml"))
    odd = write(tmp_path / "odd.ini", "[gpus]\ngpu1 fleetcheck_frobnicate=1\n")
    with pytest.raises(InputError, match="host 'gpu1': field 'fleetcheck_frobnicate': unknown "
                                         "fleetcheck variable"):
        read_inventory([odd])


def test_every_fleetcheck_name_is_accepted_with_the_prefix():
    by_name = variable_table(declarations()).by_name
    for name, variable in by_name.items():
        if not name.startswith(("ansible_", "fleetcheck_")):
            assert by_name["fleetcheck_" + name] is variable
    assert by_name["fleetcheck_expect_version"].setting == "expect_version"
    assert by_name["fleetcheck_container_user"].setting == "container_user"


@pytest.mark.ansible
def test_ini_values_are_typed_as_ansible_types_them(tmp_path):
    path = write(tmp_path / "hosts", """\
        [gpus]
        gpu1 ansible_port=2200 flag=True word=true f="12.4" s='quoted' lst="[1, 'a']" e=...
        [gpus:vars]
        count=5
        text=hello world
        """)
    assert_same_as_ansible([path], str(tmp_path))
    values = our_hostvars(load_sources([path]))["gpu1"]
    assert values["ansible_port"] == 2200 and values["flag"] is True and values["word"] == "true"
    assert values["f"] == 12.4 and values["lst"] == [1, "a"] and values["text"] == "hello world"


@pytest.mark.parametrize("text, line, needle", [
    ("[gpus]\ngpu1 ansible_port\n", 2, "expected key=value"),
    ("[gpus]\ngpu1\n[gpus:bogus]\n", 3, "unknown type"),
    ("[gpus]\ngpu1\n[gpus:vars]\nnovalue\n", 4, "expected key=value"),
    ("[gpus]\ngpu1 x='unclosed\n", 2, "cannot split"),
    ("[a:children]\nnever_defined\n", 2, "never defined"),
    ("[gpus]\n\n\ngpu[1:x]\n", 4, "neither numeric nor single letters"),
    ("[gpus ]\n", 1, "invalid section"),
    ("[gpus]\ngpu1:\n", 2, "ends in ':'"),
])
def test_malformed_ini_names_file_and_line(tmp_path, text, line, needle):
    path = write(tmp_path / "hosts.ini", text)
    with pytest.raises(InputError) as info:
        read_inventory([path])
    message = str(info.value)
    assert message.startswith("%s:%d: " % (path, line)) and needle in message, message


def test_a_bad_value_names_the_line_that_set_it(tmp_path):
    path = write(tmp_path / "hosts.ini", "[dc1]\ngpu1\n\n[dc1:vars]\nansible_port=abc\n"
                                         "venv=relative/env\n")
    with pytest.raises(InputError) as info:
        read_inventory([path])
    assert str(info.value).startswith(path + ":5: group 'dc1': field 'ansible_port': must be a "
                                      "port number"), str(info.value)


@pytest.mark.parametrize("content, kind", [("- venv: /x\n", "list"), ("just text\n", "str")])
def test_group_vars_file_that_is_not_a_mapping(tmp_path, content, kind):
    inventory = write(tmp_path / "hosts.ini", "[gpus]\ngpu1\n")
    bad = write(tmp_path / "group_vars" / "gpus.yml", content)
    with pytest.raises(InputError) as info:
        read_inventory([inventory])
    message = str(info.value)
    assert message.startswith(bad + ": group 'gpus': ") and "mapping" in message
    assert kind in message


def test_vars_files_of_no_host_or_group_are_warnings_naming_the_near_miss(tmp_path):
    inventory = write(tmp_path / "hosts.ini", "[gpus]\ngpu-healthy\ngpu-stale\n")
    write(tmp_path / "host_vars" / "gpu-helthy.yml", "fleetcheck_expect_commit: 4ba787ec9\n")
    write(tmp_path / "host_vars" / "gpus.yml", "venv: /opt/ml-env\n")
    write(tmp_path / "host_vars" / "gpu-stale.yaml", "venv: /opt/ml-env\n")
    write(tmp_path / "group_vars" / "gpu.yml", "fleetcheck_expect_version: ==0.33.0\n")
    write(tmp_path / "group_vars" / "all" / "base.yml", "ansible_user: root\n")
    write(tmp_path / "group_vars" / "dc9" / "base.yml", "ansible_user: root\n")
    write(tmp_path / "group_vars" / "README.md", "what these files are\n")
    write(tmp_path / "group_vars" / ".gpus.yml.swp", "")
    read = read_inventory([inventory])
    assert read.warnings == [
        "%s matches no group of the inventory, so nothing in it is read (%s)" % (
            tmp_path / "group_vars" / name, hint) for name, hint in (
                ("dc9", "the inventory has no group of that name"),
                ("gpu.yml", "did you mean gpus?"))] + [
        "%s matches no host of the inventory, so nothing in it is read (%s)" % (
            tmp_path / "host_vars" / name, hint) for name, hint in (
                ("gpu-helthy.yml", "did you mean gpu-healthy?"),
                ("gpus.yml", "gpus is a group: its variables go in group_vars/"))]
    hosts = {host.name: host for host in read.hosts}
    assert hosts["gpu-stale"].venv == "/opt/ml-env" and hosts["gpu-healthy"].user == "root"


def test_only_the_vars_file_of_no_group_is_a_warning(tmp_path):
    source = ini_inventory(tmp_path / "ini")
    assert read_inventory([source]).warnings == [
        "%s matches no group of the inventory, so nothing in it is read (the inventory has "
        "no group of that name)" % (tmp_path / "ini" / "group_vars" / "nosuchgroup.yml")]


@pytest.mark.parametrize("body, needles", [
    ("echo 'CMDB token expired' >&2; exit 3", ["exited with status 3", "CMDB token expired"]),
    ("echo 'warming up' >&2; echo '<html>503</html>'", ["not JSON", "<html>503", ]),
    ("echo 'querying the CMDB' >&2; sleep 60", ["timeout of 1s", "querying the CMDB"]),
    ("echo '[1, 2]'", ["object of groups"]),
])
def test_dynamic_inventory_failures_name_the_script_and_show_stderr(tmp_path, body, needles):
    script = executable(tmp_path / "cmdb.sh", "#!/bin/sh\n%s\n" % body)
    with pytest.raises(InputError) as info:
        read_inventory([script], script_timeout=1)
    message = str(info.value)
    assert message.startswith(script)
    for needle in needles:
        assert needle in message, message


def test_missing_source_and_empty_inventory(tmp_path):
    with pytest.raises(InputError, match="no such inventory"):
        read_inventory([str(tmp_path / "nope.ini")])
    empty = write(tmp_path / "empty.ini", "# nothing yet\n[gpus]\n")
    with pytest.raises(InputError, match="no hosts"):
        read_inventory([empty])


TEMPLATED = """\
[gpus]
gpu1.dc1 dc=dc1
gpu2.dc2 dc=dc2 ansible_port="{{ base_port + 1 }}"
solo

[gpus:vars]
ansible_host={{ inventory_hostname_short }}.{{ dc | upper }}.example
base_port=2200
venv={{ env_root }}/{{ group_names | first }}-env
env_root={{ root_prefix | default('/opt') }}
"""


@pytest.mark.ansible
def test_templates_in_used_variables_evaluate_as_ansible_evaluates_them(tmp_path):
    """Ansible itself (`ansible -m debug`, which contacts no host) renders the same
    templates to the same values."""
    path = write(tmp_path / "hosts.ini", TEMPLATED)
    write(tmp_path / "host_vars" / "solo.yml", "dc: lab\nansible_user: '{{ dc }}-ops'\n")
    fields = {"ansible_host": "address", "ansible_port": "port", "venv": "venv",
              "ansible_user": "user"}
    message = "{{ {%s} }}" % ", ".join("'%s': %s | default(None)" % (v, v) for v in fields)
    env = dict(os.environ, ANSIBLE_DEPRECATION_WARNINGS="0", ANSIBLE_NOCOLOR="1")
    ansible = os.path.join(os.path.dirname(ansible_inventory()), "ansible")
    proc = subprocess.run([ansible, "all", "-i", path, "-o", "-f", "1", "-m", "debug",
                           "-a", "msg=" + message], capture_output=True, text=True,
                          cwd=str(tmp_path), env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rendered = {}  # one line per host: "NAME | SUCCESS => {...}"
    for line in proc.stdout.splitlines():
        host, _, answer = line.partition(" | SUCCESS => ")
        rendered[host] = json.loads(answer)["msg"]
    hosts = {h.name: h for h in read_inventory([path]).hosts}
    assert sorted(rendered) == sorted(hosts)
    for name, values in rendered.items():
        for var, attribute in fields.items():
            if values[var] is not None:
                assert getattr(hosts[name], attribute) == values[var], (name, var)
    assert hosts["gpu2.dc2"].port == 2201 and hosts["solo"].address == "solo.LAB.example"
    assert hosts["solo"].user == "lab-ops" and hosts["gpu1.dc1"].venv == "/opt/gpus-env"


@pytest.mark.parametrize("value, needle", [
    ("{{ nosuch }}/env", "'nosuch' is undefined"),
    ("{{ base | regex_replace('a', 'b') }}", "regex_replace"),
    ("{{ venv }}", "still is a template"),
])
def test_templates_that_cannot_be_evaluated_name_host_and_field(tmp_path, value, needle):
    path = write(tmp_path / "inv.yml", "all:\n  vars: {base: /opt}\n  hosts:\n    gpu1:\n"
                                       "      venv: %s\n" % json.dumps(value))
    with pytest.raises(InputError) as info:
        read_inventory([path])
    message = str(info.value)
    assert message.startswith(path + ": host 'gpu1': field 'venv': cannot evaluate") or \
        message.startswith(path + ": host 'gpu1': field 'venv': the template"), message
    assert needle in message, message


def test_vault_values_only_matter_in_used_variables(tmp_path):
    vault = "!vault |\n        $ANSIBLE_VAULT;1.1;AES256\n        3061\n"
    unused = write(tmp_path / "unused.yml", "all:\n  hosts:\n    gpu1:\n      secret: " + vault)
    assert read_inventory([unused]).hosts[0].name == "gpu1"
    used = write(tmp_path / "used.yml", "all:\n  hosts:\n    gpu1:\n      venv: " + vault)
    with pytest.raises(InputError, match="host 'gpu1': field 'venv': is vault-encrypted"):
        read_inventory([used])
    write(tmp_path / "group_vars" / "all" / "vault.yml", "$ANSIBLE_VAULT;1.1;AES256\n3061\n")
    assert read_inventory([unused]).hosts[0].name == "gpu1"


@pytest.mark.ansible
@pytest.mark.parametrize("example", ["example.yaml", "ini-example/hosts.ini"])
def test_example_inventories_read_as_ansible_reads_them(tmp_path, example):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert_same_as_ansible([os.path.join(here, "inventories", example)], str(tmp_path))
