"""Fixtures: real vLLM wheels installed into cached venvs, real sshd hosts on loopback.
(Running fleetcheck as a user does lives in fleet_helpers.py.)"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import venv

import pytest

from fleet_helpers import ROOT, clean_env
from fleetcheck.lab.wheels import real_install
from fleetcheck.lab.testhosts import LoopbackFleet

# fleetcheck's analysis cache lives under XDG_CACHE_HOME: never the user's during tests
# (run_fleetcheck gives each run a cache of its own; tests of the cache set theirs)
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="fleetcheck-tests-xdg-")
REAL_VERSIONS = ("0.20.1", "0.33.0")
_third_octets = itertools.count(20)


@pytest.fixture(scope="session")
def real_venvs() -> dict[str, str]:
    return {version: real_install(version) for version in REAL_VERSIONS}


@pytest.fixture
def fleet(tmp_path):
    """Real sshd hosts on their own 127.0.N.x addresses; stopped after the test."""
    loopback = LoopbackFleet(str(tmp_path / "fleet"), first_octet=next(_third_octets))
    try:
        yield loopback
    finally:
        loopback.stop()


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
