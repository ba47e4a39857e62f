"""--limit with Ansible's pattern syntax gives the hosts `ansible-inventory --list --limit`
gives; what matches nothing is an input error naming the pattern."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ansible_oracle import oracle, oracle_hosts
from fleetcheck.input_error import InputError
from fleetcheck.inventory.limit import split_host_pattern
from fleetcheck import inventory as fleet_inventory
from fleetcheck.connectors import declarations
from fleetcheck.inventory import apply_limit
from probe_helpers import ini_inventory

pytestmark = pytest.mark.unit

def read_inventory(sources, **options):
    """The inventory with every connection's declared variables, as the CLI reads it."""
    return fleet_inventory.read_inventory(sources, declarations=declarations(), **options)


PATTERNS = [  # each shows one rule; every ansible-inventory call costs ~1 s of a CI core
    "dc1:dc2", "dc1,dc2", "all:!canary", "gpus:&canary", "dc1:!canary:&gpus", "!dc2", "&dc1",
    "~gpu0[13].*", "dc*", "*.dc1:!gpu05*", "node?", "ungrouped", "@retry",
]


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    root = tmp_path_factory.mktemp("patterns")
    source = ini_inventory(root / "ini")
    (root / "retry").write_text("gpu01.dc1\nnodeb\n\ndc2\n")
    return root, source


@pytest.mark.ansible
def test_limit_patterns_match_ansible(inventory, monkeypatch):
    root, source = inventory
    monkeypatch.chdir(root)  # @retry is relative, as on Ansible's command line
    with ThreadPoolExecutor(4) as pool:
        answers = dict(zip(PATTERNS, pool.map(
            lambda p: oracle([source], str(root), limit=p), PATTERNS)))
    ours = read_inventory([source])
    for pattern in PATTERNS:
        expected = oracle_hosts(answers[pattern])
        assert expected, pattern  # every pattern here selects something in Ansible too
        chosen = apply_limit(ours.hosts, pattern, source, ours.groups)
        assert sorted(h.name for h in chosen) == expected, pattern


def test_limit_keeps_inventory_order(inventory):
    _, source = inventory
    hosts = read_inventory([source]).hosts
    chosen = apply_limit(hosts, "nodeb,gpu01.dc1,bastion", source)
    assert [h.name for h in chosen] == ["bastion", "gpu01.dc1", "nodeb"]


@pytest.mark.parametrize("pattern, needle", [
    ("dc9", "'dc9' matches no host or group"),
    ("dc1,dc9", "'dc9' matches no host or group"),
    ("all:!nosuch", "'nosuch' matches no host or group"),
    ("dc1:&dc2", "'dc1:&dc2' selects no host"),
    ("gpus[0]", "subscripts are not supported"),
    ("~gpu[", "not valid"),
    ("@missing-retry-file", "limit file @missing-retry-file not found"),
])
def test_limit_errors_name_the_pattern(inventory, pattern, needle):
    _, source = inventory
    inv = read_inventory([source])
    with pytest.raises(InputError) as info:
        apply_limit(inv.hosts, pattern, source, inv.groups)
    assert needle in str(info.value)


@pytest.mark.parametrize("pattern, hint", [
    ("gpu", "did you mean gpu* (a glob: "),   # the names it begins
    ("dc3", "did you mean dc2 or dc1?"),      # close spellings, closest first
])
def test_a_pattern_that_matches_nothing_names_the_command_line_and_suggests(inventory, pattern,
                                                                            hint):
    _, source = inventory
    inv = read_inventory([source])
    with pytest.raises(InputError) as info:
        apply_limit(inv.hosts, pattern, source, inv.groups)
    message = str(info.value)
    assert message.startswith("command line: field '--limit': pattern %r matches no host or "
                              "group of %s" % (pattern, source))
    assert hint in message


def test_an_empty_group_is_a_match_not_an_error(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("[gpus]\ngpu1\n[spare:children]\n")
    inv = read_inventory([str(path)])
    assert [h.name for h in apply_limit(inv.hosts, "gpus,spare", str(path), inv.groups)] == \
        ["gpu1"]


@pytest.mark.parametrize("pattern, parts", [
    ("a:b", ["a", "b"]), ("a, b", ["a", "b"]), ("gpu1:2222", ["gpu1:2222"]),
    ("fe80::1", ["fe80::1"]), ("web[1:3]:!web2", ["web[1:3]", "!web2"]),
    ("all:!canary", ["all", "!canary"]),
])
def test_splitting_as_ansible_splits(pattern, parts):
    assert split_host_pattern(pattern) == parts


def test_a_pattern_that_matches_nothing_in_a_big_inventory_counts_the_groups_not_shown(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("".join("[g%d]\nh%d\n" % (i, i) for i in range(12)))
    inv = read_inventory([str(path)])
    with pytest.raises(InputError) as info:
        apply_limit(inv.hosts, "zzz", str(path), inv.groups)
    assert "; its groups: g0, g1, g10, g11, g2, g3, g4, g5 and 4 more" in str(info.value)
