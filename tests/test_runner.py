"""The runner's pure parts (runner.py) without a connection: the run so far is assembled
with each inventory host in order (placeholders encoded once, each with every check its
plan has), a cut answer names its field, and smoke settings follow --smoke/--no-smoke and
the inventory. (What a host is judged by is tests/test_check_plan.py's.)"""

from __future__ import annotations

import pytest

from fleetcheck.connectors.base import TransportError
from fleetcheck.connectors.ssh import KnownHosts, SshSettings
from fleetcheck.expectations import BuildExpectation
from fleetcheck.inventory import Host
from fleetcheck.playbook import load_playbook
from fleetcheck.results import CheckResult, HostError, HostResult, RunResult
from fleetcheck.runner import (RunOptions, assemble, failed_host, host_error, host_smoke,
                               smoke_planned)

pytestmark = pytest.mark.unit

FIXES = ["dflash-layer-offset", "dflash-swa", "dflash-cache-drop"]
INTEGRITY = ["install-record", "install-leftovers", "install-metadata", "install-import",
             "install-in-progress", "install-running"]
PLAYBOOK = load_playbook()


def options(tmp_path, **extra) -> RunOptions:
    return RunOptions(settings=SshSettings(known_hosts=KnownHosts(str(tmp_path / "kh"))),
                      **extra)


def result(name: str) -> HostResult:
    return HostResult(name=name, address=name, groups=[], status="pass",
                      checks=[CheckResult("c", "c", "pass", "ok")])


def test_assemble_keeps_inventory_order_with_containers_and_placeholders(tmp_path):
    hosts = [Host(name=n, address=n, groups=["g"]) for n in ("a", "box", "c")]
    run = RunResult(started_at="t", inventory="i", playbook="p")
    done = {"box": [result("box/web"), result("box/worker")]}
    placeholders: dict[str, HostResult] = {}
    run = assemble(run, hosts, done, PLAYBOOK, options(tmp_path), 0.0, "run interrupted",
                   placeholders)
    assert [h.name for h in run.hosts] == ["a", "box/web", "box/worker", "c"]
    assert run.not_finished == ("a", "c") and run.finished_at
    waiting = run.hosts[0]
    assert (waiting.status, waiting.error) == ("error", HostError("interrupted",
                                                                   "run interrupted"))
    assert waiting.groups == ("g",) and [c.id for c in waiting.checks] == FIXES + INTEGRITY
    # the next checkpoint reuses the very placeholder (the writer encodes it once) and
    # drops it once the host is done
    done["a"] = [result("a")]
    run = assemble(run, hosts, done, PLAYBOOK, options(tmp_path), 0.0, "run interrupted",
                   placeholders)
    assert run.hosts[-1] is placeholders["c"] and run.hosts[0] is done["a"][0]
    assert run.not_finished == ("c",)


def test_a_placeholder_lists_the_smoke_and_build_checks_the_host_would_have_had(tmp_path):
    opts = options(tmp_path, smoke=True, expected={"h": BuildExpectation()})
    run = assemble(RunResult(started_at="t", inventory="i", playbook="p"),
                   [Host(name="h", address="h")], {}, PLAYBOOK, opts, 0.0, "stopped")
    assert [c.id for c in run.hosts[0].checks] == FIXES + INTEGRITY + [
        "build-expected", "smoke-acceptance", "smoke-fleet"]


def test_a_cut_answer_names_the_field_it_stopped_in():
    error = host_error(TransportError("protocol", "output exceeded 8 MiB",
                                      received=b'{"install": {"dist_infos": [{"name": "vl'))
    assert error == HostError("protocol", "output exceeded 8 MiB; the answer was cut inside "
                                          "the field install.dist_infos[0].name")
    assert host_error(TransportError("timeout", "deadline")) == HostError("timeout", "deadline")


def test_a_failed_host_is_a_value_with_its_reason_on_every_check(tmp_path):
    host = Host(name="gpu1", address="10.0.0.1", groups=["dc1"])
    failed = failed_host(host, "gpu1", PLAYBOOK, options(tmp_path), None,
                         HostError("unreachable", "gpu1:22: connection refused"), 0.0)
    assert (failed.status, failed.address, failed.groups) == ("unreachable", "10.0.0.1",
                                                              ("dc1",))
    assert failed.checks[0].message == "not run: unreachable (gpu1:22: connection refused)"
    assert failed_host(host, "gpu1", PLAYBOOK, options(tmp_path), None,
                       HostError("auth", "refused"), 0.0).status == "error"


def test_smoke_follows_the_flags_and_the_inventory(tmp_path):
    plain = Host(name="h", address="h")
    opted_out = Host(name="o", address="o", smoke={"enabled": False})
    assert PLAYBOOK.smoke.enabled is False
    assert host_smoke(plain, PLAYBOOK, None) is None  # as the playbook says: off
    assert host_smoke(plain, PLAYBOOK, True).enabled is True
    assert host_smoke(opted_out, PLAYBOOK, True) is None  # --smoke keeps it out
    assert host_smoke(plain, PLAYBOOK, False) is None
    tuned = host_smoke(Host(name="t", address="t", smoke={"requests": 3}), PLAYBOOK, True)
    assert tuned.requests == 3 and tuned.model == PLAYBOOK.smoke.model
    assert smoke_planned(plain, PLAYBOOK, options(tmp_path, smoke=True)) is True
    bad = Host(name="b", address="b", smoke={"requests": "many"})
    assert smoke_planned(bad, PLAYBOOK, options(tmp_path, smoke=True)) is False


def test_a_connector_that_finds_nothing_to_probe_leaves_the_host_an_error(tmp_path):
    """A third party's connector whose targets() is empty: the host is still in the
    results, with every check not run and an error saying so, never dropped."""
    from fleetcheck.connectors import Registry
    from fleetcheck.connectors.base import Connector, Session
    from fleetcheck.runner import check_host

    class Nothing(Connector):
        connection = "local"

        def open(self, host, deadline, cancel=None):
            return Session()

        def targets(self, host, session, deadline, cancel=None):
            return []

    class OnlyNothing(Registry):
        def for_host(self, host):
            return Nothing()

    host = Host(name="empty-box", address="empty-box", connection="local")
    (got,) = check_host(host, PLAYBOOK, [], options(tmp_path), registry=OnlyNothing(None))
    assert (got.name, got.status, got.error.kind) == ("empty-box", "error", "container")
    assert "found nothing to probe" in got.error.message
    assert {c.id for c in got.checks} >= set(FIXES)


def test_a_connector_is_given_the_hosts_connection_settings_never_the_inventory_host(
        tmp_path):
    from fleetcheck.connection_settings import ConnectionSettings
    from fleetcheck.connectors import Registry
    from fleetcheck.connectors.base import Connector
    from fleetcheck.runner import check_host

    given = []

    class Refusing(Connector):
        connection = "local"

        def open(self, host, deadline, cancel=None):
            given.append(host)
            raise TransportError("unreachable", "no way in")

    class Recording(Registry):
        def for_host(self, host):
            given.append(host)
            return Refusing()

    host = Host(name="gpu1", address="10.0.0.5", port=2222, user="ops", venv="/opt/env",
                connection="local", become=True, become_user="svc",
                settings={"journal_file": "/tmp/j"})
    (got,) = check_host(host, PLAYBOOK, [], options(tmp_path), registry=Recording(None))
    assert (got.status, got.error.message) == ("unreachable", "no way in")
    assert [type(value) for value in given] == [ConnectionSettings, ConnectionSettings]
    assert given[1] == ConnectionSettings(
        name="gpu1", connection="local", address="10.0.0.5", port=2222, user="ops",
        interpreter="/opt/env/bin/python", become=True, become_user="svc",
        settings={"journal_file": "/tmp/j"})
