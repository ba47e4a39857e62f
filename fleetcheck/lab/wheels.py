"""Real vLLM wheels from PyPI, downloaded once and cached outside the repository (each is
250-340 MB): installed into a venv with pip --no-deps, or only unpacked (Python files and
dist-info) when nothing but the code on disk is needed. Test runs and benchmarks share
the cache at the same time: each download, install and unpack holds a lock of its own."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import venv
import zipfile

from fleetcheck.lab.synthetic import BASE_PYTHON

CACHE = os.environ.get("FLEETCHECK_CACHE", os.path.expanduser("~/.cache/fleetcheck"))


@contextlib.contextmanager
def cache_lock(name: str):
    """An exclusive lock on one cache entry, across processes: a second run waits for the
    first's download or install instead of reading it half-written."""
    locks = os.path.join(CACHE, "locks")
    os.makedirs(locks, exist_ok=True)
    with open(os.path.join(locks, name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def wheel_file(version: str) -> str:
    """The path of the vllm==version wheel, downloaded on first use."""
    wheels = os.path.join(CACHE, "wheels")
    os.makedirs(wheels, exist_ok=True)
    prefix = "vllm-%s-" % version
    with cache_lock("wheel-" + version):
        if not any(n.startswith(prefix) for n in os.listdir(wheels)):
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                            "vllm==%s" % version, "-d", wheels], check=True)
        return os.path.join(wheels, next(n for n in sorted(os.listdir(wheels))
                                         if n.startswith(prefix)))


def real_install(version: str) -> str:
    """A venv holding the real vllm==version wheel, installed with pip --no-deps."""
    target = os.path.join(CACHE, "venvs", "vllm-%s" % version)
    marker = os.path.join(target, ".fleetcheck-complete")
    if os.path.exists(marker):
        return target
    wheel = wheel_file(version)
    with cache_lock("venv-" + version):
        if os.path.exists(marker):
            return target
        if not os.path.exists(os.path.join(target, "bin", "python")):
            venv.EnvBuilder(with_pip=True, clear=True).create(target)
        subprocess.run([os.path.join(target, "bin", "python"), "-m", "pip", "install", "-q",
                        "--no-deps", "--force-reinstall", wheel], check=True)
        open(marker, "w").close()
    return target


def unpacked(version: str) -> str:
    """A venv-shaped tree holding the release's Python files and dist-info (no compiled
    modules, nothing installed): enough for the fix checks."""
    target = os.path.join(CACHE, "unpacked", "vllm-%s" % version)
    site = os.path.join(target, "lib", "python3", "site-packages")
    if os.path.isdir(site):
        return target
    wheel = wheel_file(version)
    with cache_lock("unpacked-" + version):
        if os.path.isdir(site):
            return target
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site + ".partial", [n for n in archive.namelist()
                                                   if n.endswith(".py") or ".dist-info/" in n])
        os.makedirs(os.path.join(target, "bin"), exist_ok=True)
        if not os.path.lexists(os.path.join(target, "bin", "python")):
            os.symlink(BASE_PYTHON, os.path.join(target, "bin", "python"))
        os.rename(site + ".partial", site)
    return target
