"""The lanes plugin (tests/lanes.py) run by pytest on a small suite of its own: what
lands in the unit lane, what a need found through a fixture marks, what is refused, and a
skip failing the run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from fleet_helpers import ROOT

pytestmark = pytest.mark.unit

SUITE = {
    # a fixture's name is what the plugin reads: these stand for conftest.py's
    "conftest.py": """
        import pytest

        @pytest.fixture
        def fleet():
            return "hosts"

        @pytest.fixture
        def uses_fleet(fleet):
            return fleet

        def pytest_collection_finish(session):
            for item in session.items:  # the names `-m` matches
                print("MARKS", item.nodeid, *sorted({m.name for m in item.iter_markers()}))
        """,
    "test_says_nothing.py": """
        def test_forgot_its_markers():
            pass
        """,
    "test_declared.py": """
        import pytest

        pytestmark = pytest.mark.unit

        def test_plain():
            pass

        def test_through_a_fixture(uses_fleet):
            pass

        @pytest.mark.containers
        def test_marked():
            pass

        class TestGroup:
            def test_in_a_class(self):
                pass
        """,
}


def pytest_in(tmp_path, files: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "tests"),
               PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")  # only pytest and the lanes: a faster start
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "lanes", "-p", "no:cacheprovider",
                           "-o", "addopts=", "-q", *args], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=120)


def marks(proc: subprocess.CompletedProcess) -> dict[str, list[str]]:
    return {words[1]: words[2:] for words in map(str.split, proc.stdout.splitlines())
            if words[:1] == ["MARKS"]}


def test_only_a_declared_test_without_needs_is_unit_and_needs_found_are_markers(tmp_path):
    proc = pytest_in(tmp_path, SUITE, "--collect-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert marks(proc) == {
        "test_declared.py::test_plain": ["unit"],
        "test_declared.py::test_through_a_fixture": ["integration", "sshd"],
        "test_declared.py::test_marked": ["containers", "integration"],
        "test_declared.py::TestGroup::test_in_a_class": ["unit"],
        "test_says_nothing.py::test_forgot_its_markers": ["integration"],
    }, proc.stdout


def test_a_test_marked_unit_that_needs_a_service_is_refused(tmp_path):
    proc = pytest_in(tmp_path, dict(SUITE, **{"test_contradiction.py": """
        import pytest

        @pytest.mark.unit
        def test_says_unit(uses_fleet):
            pass
        """}), "--collect-only")
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout + proc.stderr
    assert "test_contradiction.py::test_says_unit is marked unit but needs sshd (fixture " \
        "fleet)" in proc.stderr


def test_a_skipped_test_fails_the_run_and_is_named(tmp_path):
    proc = pytest_in(tmp_path, {"test_skips.py": """
        import pytest

        def test_passes():
            pass

        def test_skips():
            pytest.skip("chromium is not installed")
        """})
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, proc.stdout + proc.stderr
    assert "1 test(s) skipped, which fails the run: test_skips.py::test_skips" in proc.stdout


def test_a_strict_xfail_is_a_known_failure_kept_in_the_run_and_fails_it_once_it_passes(
        tmp_path):
    suite = {"test_known.py": """
        import pytest

        @pytest.mark.xfail(strict=True, reason="a known false pass")
        def test_still_fails():
            assert False

        def test_passes():
            pass
        """}
    proc = pytest_in(tmp_path, suite, "-o", "xfail_strict=true")
    assert proc.returncode == pytest.ExitCode.OK, proc.stdout + proc.stderr
    assert "1 xfailed" in proc.stdout
    fixed = {"test_known.py": suite["test_known.py"].replace("assert False", "pass")}
    proc = pytest_in(tmp_path, fixed, "-o", "xfail_strict=true")
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, proc.stdout + proc.stderr
    assert "XPASS(strict)" in proc.stdout
