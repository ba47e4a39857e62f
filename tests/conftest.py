"""Fixtures: real vLLM wheels installed into cached venvs, real sshd hosts on loopback;
and the lanes: which tests need nothing (the unit lane, `pytest -m unit`) and which need
a service. (Running fleetcheck as a user does lives in fleet_helpers.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import venv
from typing import Callable, Iterator

import pytest

from fleet_helpers import ROOT, clean_env
from fleetcheck.lab.wheels import real_install
from fleetcheck.lab.testhosts import LoopbackFleet
from loopback_blocks import this_process

# fleetcheck's analysis cache lives under XDG_CACHE_HOME: never the user's during tests
# (run_fleetcheck gives each run a cache of its own; tests of the cache set theirs)
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="fleetcheck-tests-xdg-")
REAL_VERSIONS = ("0.20.1", "0.33.0")
BLOCKS = this_process()
# `fleetcheck demo`, started by tests in subprocesses, puts its hosts on this block
os.environ["FLEETCHECK_LOOPBACK_BLOCK"] = str(BLOCKS.take())

# What a test may need beyond this Python and its packages; a test in none of them is unit.
NEEDS = ("sshd", "containers", "browser", "vllm_server", "downloads", "root", "ansible")
# Fixtures that bring a need with them (directly or through the fixtures that use them).
FIXTURE_NEEDS = {"fleet": "sshd", "fleet_factory": "sshd", "real_venvs": "downloads",
                 "wheel": "downloads", "installed": "downloads", "browser": "browser"}
SKIPPED: list[str] = []


def needs_of(item: pytest.Item) -> dict[str, str]:
    """Each need of the test, with what says so (a marker or a fixture)."""
    found = {mark.name: "its marker" for mark in item.iter_markers() if mark.name in NEEDS}
    for name in item.fixturenames:
        if name in FIXTURE_NEEDS:
            found.setdefault(FIXTURE_NEEDS[name], "fixture %s" % name)
    return found


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Gives every test one lane: `unit` only when it (or its module) is marked unit and
    neither its markers nor its fixtures need anything; `integration` otherwise, so a test
    that says nothing about itself never lands in the fast lane. A module's unit mark is a
    default its tests with needs override; a unit mark on the test itself beside a need is
    a contradiction, refused. Needs found through fixtures become markers too (`-m sshd`)."""
    lanes = {}
    for item in items:
        needs = needs_of(item)
        if needs and any(mark.name == "unit" for mark in item.own_markers):
            raise pytest.UsageError("%s is marked unit but needs %s" % (item.nodeid, ", ".join(
                "%s (%s)" % pair for pair in sorted(needs.items()))))
        declared = any(mark.name == "unit" for mark in item.iter_markers())
        lanes[item] = (needs, "unit" if declared and not needs else "integration")
    for item, (needs, lane) in lanes.items():
        for node in item.listchain():
            node.own_markers[:] = [mark for mark in node.own_markers if mark.name != "unit"]
        item.add_marker(lane)
        for need in needs:
            item.add_marker(need)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A skipped test is a failed run: every test runs where CI runs them, and a test
    that cannot run on a contributor's machine says why by failing."""
    if SKIPPED and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter) -> None:
    if SKIPPED:
        terminalreporter.write_line("%d test(s) skipped, which fails the run: %s" % (
            len(SKIPPED), ", ".join(sorted(set(SKIPPED)))), red=True)


@pytest.fixture(scope="session")
def real_venvs() -> dict[str, str]:
    return {version: real_install(version) for version in REAL_VERSIONS}


@pytest.fixture
def fleet(tmp_path) -> Iterator[LoopbackFleet]:
    """Real sshd hosts on a loopback block of their own; stopped after the test."""
    block = BLOCKS.take()
    loopback = LoopbackFleet(str(tmp_path / "fleet"), first_octet=block)
    try:
        yield loopback
    finally:
        loopback.stop()
        BLOCKS.give_back(block)


@pytest.fixture(scope="session")
def fleet_factory() -> Iterator[Callable[[str], LoopbackFleet]]:
    """New fleets for module-scoped fixtures, each on a loopback block it keeps to the
    end of the session (the fixture stops its fleet; this stops any it left running)."""
    made: list[tuple[int, LoopbackFleet]] = []

    def new_fleet(workdir: str) -> LoopbackFleet:
        block = BLOCKS.take()
        made.append((block, LoopbackFleet(workdir, first_octet=block)))
        return made[-1][1]

    yield new_fleet
    for block, loopback in made:
        loopback.stop()
        BLOCKS.give_back(block)


@pytest.fixture(scope="session")
def loopback_address() -> str:
    """A loopback address no fleet of this run uses, for listeners the test makes."""
    return BLOCKS.address(BLOCKS.take())


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> str:
    """fleetcheck's wheel, built from this tree once per test session."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--disable-pip-version-check", "-w", str(out), ROOT], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (name,) = os.listdir(out)
    return str(out / name)


@pytest.fixture(scope="session")
def installed(tmp_path_factory, wheel) -> str:
    """bin/ of a fresh venv holding the wheel and its runtime dependencies (no extras)."""
    target = tmp_path_factory.mktemp("installed") / "venv"
    venv.EnvBuilder(with_pip=True).create(str(target))
    subprocess.run([str(target / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", wheel], check=True, env=clean_env(),
                   cwd=str(target), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return str(target / "bin")
