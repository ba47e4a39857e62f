"""Fixtures: real vLLM wheels installed into cached venvs, real sshd hosts on loopback.
(Running fleetcheck as a user does lives in fleet_helpers.py.)"""

from __future__ import annotations

import itertools
import os
import tempfile

import pytest

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
