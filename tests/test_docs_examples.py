"""The README and the docs pages hold commands users copy; these tests run them, so they
cannot drift from the code.

A runnable example is a fenced block right after an `<!-- example: exit N -->` comment:
each of its lines (comments aside) is run with `sh` against the demo fleet (real sshd
hosts on loopback: `gpu-healthy` with vLLM 0.33.0 and the three fixes, `gpu-stale` with
0.20.1, `gpu-down` with nothing listening), and must exit N. A block after
`<!-- example-file: NAME -->` is written to NAME in the examples' working directory (an
inventory the commands read). The hosts are reached as a user reaches theirs: names
translated by `~/.ssh/config`, keys in `~/.ssh/known_hosts`, the login key in `~/.ssh`
(for OpenSSH's own `ssh`, which takes `~` from the password database rather than $HOME,
a wrapper on PATH names those three files).

Also: the README stays a guide (at most 300 lines), and every relative link in the README
and the docs resolves.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from fleetcheck.lab.synthetic import FIXED, UNFIXED, write_install
from fleetcheck.lab.testhosts import LoopbackFleet, free_loopback_port, missing_requirements

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").rglob("*.md"))
PAGES = [ROOT / "README.md"] + DOCS
VENV = "/opt/ml-env"  # where the example inventories say vLLM is installed
MARKER = re.compile(r"<!--\s*example(?P<file>-file)?:\s*(?P<arg>[^>]*?)\s*-->\s*\n"
                    r"(?P<fence>```+|~~~+)[^\n]*\n(?P<body>.*?)\n(?P=fence)", re.S)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


@dataclass(frozen=True)
class Example:
    page: Path
    line: int
    command: str
    exit_code: int

    def where(self) -> str:
        return "%s:%d" % (self.page.relative_to(ROOT), self.line)


def commands(body: str) -> list[str]:
    """The block's commands: one per line, a trailing backslash continues it."""
    found, pending = [], ""
    for line in body.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        found.append(pending + line)
        pending = ""
    return found


def examples(page: Path) -> list[Example]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in MARKER.finditer(text):
        if match.group("file"):
            continue
        arg = re.fullmatch(r"exit\s+(\d+)", match.group("arg"))
        assert arg, "%s: example marker %r: write `exit N`" % (page, match.group(0)[:60])
        line = text.count("\n", 0, match.start("body")) + 1
        found += [Example(page, line, command, int(arg.group(1)))
                  for command in commands(match.group("body"))]
    return found


def example_files() -> dict[str, str]:
    files: dict[str, str] = {}
    for page in PAGES:
        for match in MARKER.finditer(page.read_text(encoding="utf-8")):
            if match.group("file"):
                name = match.group("arg")
                assert name not in files or files[name] == match.group("body") + "\n", (
                    "%s: example file %s differs from another page's" % (page, name))
                files[name] = match.group("body") + "\n"
    return files


def test_pages_hold_runnable_examples() -> None:
    """The marker is what the test looks for: a page whose markers were all mistyped would
    pass without running anything."""
    by_page = {page.name: len(examples(page)) for page in PAGES}
    assert by_page["README.md"] >= 3, by_page
    assert sum(by_page.values()) >= 15, by_page
    assert {"hosts.yaml", "hosts.ini"} <= set(example_files())


@pytest.fixture(scope="module")
def demo_env(tmp_path_factory: pytest.TempPathFactory,
             fleet_factory: Callable[[str], LoopbackFleet]) -> dict[str, str]:
    """The demo fleet, and a HOME whose ~/.ssh reaches it by the names the docs use."""
    assert not missing_requirements(), missing_requirements()
    tmp = tmp_path_factory.mktemp("docs-examples")
    healthy, stale = str(tmp / "healthy-env"), str(tmp / "stale-env")
    write_install(healthy, "0.33.0", FIXED, commit="g4ba787ec9")
    write_install(stale, "0.20.1", UNFIXED, commit="g132765e35")
    fleet = fleet_factory(str(tmp / "fleet"))
    good = fleet.add("gpu-healthy", mounts={VENV: healthy})
    bad = fleet.add("gpu-stale", mounts={VENV: stale})
    fleet.start()
    dead = fleet.next_address()
    home = tmp / "home"
    ssh = home / ".ssh"
    ssh.mkdir(parents=True)
    shutil.copy(fleet.client_key, ssh / "id_ed25519")
    shutil.copy(fleet.known_hosts, ssh / "known_hosts")
    (ssh / "config").write_text(
        "Host gpu-healthy\n  HostName %s\nHost gpu-stale\n  HostName %s\n"
        "Host gpu-down\n  HostName %s\n  Port %d\n"
        % (good.address, bad.address, dead, free_loopback_port(dead)), encoding="ascii")
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "fleetcheck"  # the tree under test, as the installed command
    wrapper.write_text('#!/bin/sh\nexec %s -m fleetcheck "$@"\n' % sys.executable)
    wrapper.chmod(0o755)
    ssh_wrapper = bin_dir / "ssh"
    ssh_wrapper.write_text('#!/bin/sh\nexec %s -F "$HOME/.ssh/config" -i "$HOME/.ssh/id_ed25519" '
                           '-o UserKnownHostsFile="$HOME/.ssh/known_hosts" -o BatchMode=yes '
                           '"$@"\n' % (shutil.which("ssh") or "/usr/bin/ssh"))
    ssh_wrapper.chmod(0o755)
    env = dict(os.environ, HOME=str(home), XDG_CACHE_HOME=str(tmp / "cache"),
               PATH="%s:%s" % (bin_dir, os.environ.get("PATH", "")),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                         os.environ.get("PYTHONPATH")])))
    yield env
    fleet.stop()


@pytest.mark.parametrize("page", [p for p in PAGES if examples(p)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_exit_as_documented(page: Path, demo_env: dict[str, str],
                                     tmp_path: Path) -> None:
    """Each page's commands in order, in a directory of their own holding the example
    files (a later command may read what an earlier one wrote)."""
    for name, text in example_files().items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    for example in examples(page):
        done = subprocess.run(["sh", "-c", example.command], cwd=tmp_path, env=demo_env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == example.exit_code, (
            "%s: `%s` exited %d, the docs say %d\nstdout: %s\nstderr: %s"
            % (example.where(), example.command, done.returncode, example.exit_code,
               done.stdout[-2000:], done.stderr[-2000:]))


def test_readme_is_a_guide() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 300, "README.md has %d lines; the rest belongs in docs/" % lines


def test_ci_runs_the_readme_test_command() -> None:
    def test_command(text: str) -> list[str]:
        return [line.split("#", 1)[0].strip() for line in text.splitlines()
                if line.startswith("python3 -m pytest")]
    readme = test_command((ROOT / "README.md").read_text(encoding="utf-8"))
    ci = test_command((ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    assert readme == ["python3 -m pytest -q -n auto"]  # the machine's cores
    assert ci == readme


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            broken.append(target)
    assert not broken, "%s: links to nothing: %s" % (page.relative_to(ROOT), broken)


def test_the_performance_page_shows_results_md_under_its_title() -> None:
    """The docs site's hook puts the benchmarks' own file into the page, one heading level
    down, so every section the benchmarks wrote is there and none outranks the title."""
    spec = importlib.util.spec_from_file_location(
        "mkdocs_results_hook", ROOT / "scripts" / "mkdocs_results_hook.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    shown = hook.on_page_markdown(page, None, {"config_file_path": str(ROOT / "mkdocs.yml")},
                                  None)
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", results, re.M)
    assert sections and all("\n### %s\n" % title in shown for title in sections)
    assert re.findall(r"^# .+$", shown, re.M) == ["# Performance"]
    assert "<!-- include:" not in shown


def test_the_architecture_page_has_one_row_per_module_and_no_other():
    """docs/architecture.md's module table is the package: a module without a row, or a
    row without a module, fails."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(fleetcheck/[^`]+\.py)` \|", text, re.M)
    assert len(rows) == len(set(rows)), "a module has two rows"
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "fleetcheck").rglob("*.py")}
    assert sorted(modules - set(rows)) == [] and sorted(set(rows) - modules) == []


@pytest.mark.sshd  # the demo's real sshd hosts
@pytest.mark.root
def test_readme_examples_run_as_written_against_demo_keep(tmp_path: Path) -> None:
    """What the README promises a new operator: with `fleetcheck demo --keep` up and the
    two variables it prints exported, the README's commands run as written, exiting as it
    says. Here HOME holds no ssh config: only the demo's own file names its hosts."""
    demo_dir, work, home = tmp_path / "demo", tmp_path / "work", tmp_path / "home"
    for directory in (demo_dir, work, home):
        directory.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETCHECK_SSH")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(home), XDG_CACHE_HOME=str(tmp_path / "cache"))
    demo = subprocess.Popen([sys.executable, "-m", "fleetcheck", "demo", "--keep"],
                            cwd=str(demo_dir), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        said = []
        while not said or not said[-1].startswith("Try:"):  # pytest-timeout bounds it
            line = demo.stderr.readline()
            assert line, "the demo ended before its fleet was up:\n" + "".join(said)
            said.append(line)
        (exports,) = [line for line in said if line.strip().startswith("export ")]
        for assignment in exports.split()[1:]:
            name, _, value = assignment.partition("=")
            env[name] = value
        assert os.path.exists(env["FLEETCHECK_SSH_CONFIG"])
        for name, text in example_files().items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(text, encoding="utf-8")
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "fleetcheck").write_text('#!/bin/sh\nexec %s -m fleetcheck "$@"\n'
                                            % sys.executable)
        (bin_dir / "fleetcheck").chmod(0o755)
        env["PATH"] = "%s:%s" % (bin_dir, env.get("PATH", ""))
        readme = examples(ROOT / "README.md")
        assert len(readme) >= 5
        for example in readme:
            done = subprocess.run(["sh", "-c", example.command], cwd=str(work), env=env,
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == example.exit_code, (
                "%s: `%s` exited %d, the README says %d\nstdout: %s\nstderr: %s"
                % (example.where(), example.command, done.returncode, example.exit_code,
                   done.stdout[-2000:], done.stderr[-2000:]))
    finally:
        demo.send_signal(signal.SIGINT)
        demo.communicate(timeout=60)
    assert not os.path.exists(env["FLEETCHECK_SSH_CONFIG"])  # gone with the fleet
