"""The test lanes, as a pytest plugin (tests/conftest.py registers its hooks): each test
is `unit` (needs nothing but this Python and fleetcheck's packages: `pytest -m unit`) or
`integration`, every need it has is a marker of its own (`-m sshd`), and a run with a
skipped test fails (a strict xfail, a known failure kept in CI, does not)."""

from __future__ import annotations

import pytest

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
    a contradiction, refused. Runs before `-m` selects, which then sees only the lanes."""
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
    """An xfail is a known failure kept in CI (strict, see pyproject.toml: it fails the
    run the day it passes), not a skip."""
    if report.skipped and not hasattr(report, "wasxfail"):
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
