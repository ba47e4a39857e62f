"""Speculative-decoding smoke load, generated on the host itself (stdlib HTTP), so the
vLLM port never has to be opened to the controller.

attach: a server already runs at the URL. launch: start it from the rendered command,
detached in its own session with its log in a temp dir, wait for /health, run the load,
stop the whole process group and bring back the log tail. Raw /metrics text (only the
spec-decode and generation-token lines) goes back to the controller, which parses it with
prometheus_client.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from http.client import HTTPException
from urllib.parse import urlsplit

METRIC_PREFIXES = ("vllm:spec_decode", "vllm:generation_tokens", "vllm:prompt_tokens")
MAX_METRICS_BYTES = 1 << 20
MAX_BODY_BYTES = 4 << 20


class SmokeError(Exception):
    """The load could not run; `kind` says why in a word the controller maps to a message."""

    def __init__(self, kind, detail):
        Exception.__init__(self, "%s: %s" % (kind, detail))
        self.kind = kind
        self.detail = detail


def cut(conn, fired):
    """Called by the exchange's timer: wakes a read blocked on a server that trickles."""
    fired.set()
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def http(method, url, body=None, timeout=10.0):
    """(status, body bytes) within `timeout` seconds for the whole exchange: connect,
    request and every byte of the answer. A socket timeout bounds each read only, so a
    server that answers one byte a second would hold urllib for ever; here a timer shuts
    the socket down when the time is up. Connection problems raise
    SmokeError('unreachable'), an answer that did not complete in time SmokeError('stalled')."""
    timeout = max(timeout, 0.1)
    parts = urlsplit(url)
    if parts.scheme == "https":
        from http.client import HTTPSConnection as Connection
    else:
        from http.client import HTTPConnection as Connection
    data = json.dumps(body).encode("utf-8") if body is not None else None
    conn = Connection(parts.hostname, parts.port, timeout=timeout)
    fired = threading.Event()
    timer = threading.Timer(timeout, cut, (conn, fired))
    timer.daemon = True
    try:
        timer.start()
        path = parts.path or "/"
        conn.request(method, path + ("?" + parts.query if parts.query else ""), body=data,
                     headers={"Content-Type": "application/json"} if data else {})
        response = conn.getresponse()
        return response.status, response.read(MAX_BODY_BYTES)
    except (HTTPException, OSError) as exc:
        if fired.is_set():
            raise SmokeError("stalled", "%s %s: no complete answer within %.1fs (the server "
                             "accepted the connection but its answer did not finish)"
                             % (method, url, timeout))
        raise SmokeError("unreachable", "%s: %s" % (url, getattr(exc, "reason", exc)))
    finally:
        timer.cancel()
        conn.close()


def spec_metrics(base, timeout):
    status, body = http("GET", base + "/metrics", timeout=timeout)
    if status != 200:
        raise SmokeError("metrics", "/metrics answered %d" % status)
    lines = [line for line in body.decode("utf-8", "replace").splitlines()
             if any(p in line for p in METRIC_PREFIXES)]
    return "\n".join(lines)[:MAX_METRICS_BYTES] + "\n"


def served_model(base, timeout):
    status, body = http("GET", base + "/v1/models", timeout=timeout)
    if status != 200:
        raise SmokeError("models", "/v1/models answered %d" % status)
    data = json.loads(body.decode("utf-8"))
    models = [m.get("id") for m in data.get("data", []) if isinstance(m, dict)]
    if not models:
        raise SmokeError("models", "/v1/models lists no model")
    return models[0]


def run_load(base, model, prompts, options, deadline):
    """Requests at temperature 0 with thinking off, `concurrency` at a time, until
    `requests` are done or the time budget runs out."""
    total = int(options.get("requests", 8))
    concurrency = max(1, int(options.get("concurrency", 2)))
    max_tokens = int(options.get("max_tokens", 128))
    results = []
    lock = threading.Lock()
    queue = list(range(total))

    def worker():
        while True:
            with lock:
                if not queue or time.monotonic() >= deadline:
                    return
                index = queue.pop(0)
            prompt = prompts[index % len(prompts)]
            body = {"model": model, "max_tokens": max_tokens, "temperature": 0,
                    "messages": [{"role": "user", "content": prompt["content"]}],
                    "chat_template_kwargs": {"enable_thinking": False}}
            started = time.monotonic()
            entry = {"prompt": prompt["id"], "ok": False}
            try:
                status, raw = http("POST", base + "/v1/chat/completions", body,
                                   timeout=deadline - started)
                entry["status"] = status
                if status == 200:
                    answer = json.loads(raw.decode("utf-8"))
                    entry["completion_tokens"] = int(
                        (answer.get("usage") or {}).get("completion_tokens") or 0)
                    entry["ok"] = True
                else:
                    entry["error"] = "HTTP %d: %s" % (status, raw[:200].decode("utf-8", "replace"))
            except SmokeError as exc:
                entry["error"] = exc.detail
            except ValueError as exc:
                entry["error"] = "bad JSON answer: %s" % exc
            entry["latency_s"] = round(time.monotonic() - started, 4)
            with lock:
                results.append(entry)

    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(min(concurrency, total))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"results": results, "wall_s": round(time.monotonic() - started, 4),
            "planned": total, "budget_exhausted": len(results) < total}


def wait_healthy(base, deadline, process=None):
    """Poll /health until 200; a launched server that exits stops the wait at once."""
    last = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise SmokeError("server-exited", "exit status %s" % process.returncode)
        try:
            status, _ = http("GET", base + "/health", timeout=min(5.0, deadline - time.monotonic()))
            if status == 200:
                return
            last = "HTTP %d" % status
        except SmokeError as exc:
            last = exc.detail
        time.sleep(0.5)
    raise SmokeError("startup-timeout", "no healthy /health before the deadline (last: %s)" % last)


def tail(path, lines):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def stop_group(process, until):
    """Stop the launched server and everything it started (its own session and process
    group): TERM, then KILL. The shell running the command can exit before the server and
    its engine processes have, so the wait is for the whole group to be gone, not for the
    shell; it never waits past `until` (the host's deadline)."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 5)):
        if sig == signal.SIGTERM and until - time.monotonic() < 1.0:
            continue  # no time for a graceful stop
        try:
            os.killpg(process.pid, sig)
        except OSError:
            break
        end = min(time.monotonic() + wait, until - 0.5)
        while True:
            process.poll()  # reap the leader, or it stays in the group as a zombie
            try:
                os.killpg(process.pid, 0)
            except OSError:
                return
            if time.monotonic() >= end:
                break
            time.sleep(0.1)
    process.poll()


SAFETY_S = 1.0  # the answer must still reach the controller before the host's deadline
METRICS_RESERVE_S = 5.0  # kept from the load's budget for the scrape after it
STAGE_CAP_S = 10.0  # /health, /v1/models, one /metrics scrape


def smoke(plan_smoke, prompts, deadline):
    """Facts of one smoke load; never raises. Every stage (connect, each request, each
    scrape, stopping a launched server) is bounded by what is left of `deadline`."""
    facts = {"mode": plan_smoke.get("mode", "attach"), "url": plan_smoke["url"]}
    base = plan_smoke["url"].rstrip("/")
    process = None
    logdir = None
    end = deadline - SAFETY_S

    def within(stage, cap=STAGE_CAP_S):
        left = end - time.monotonic()
        if left <= 0.1:
            raise SmokeError("deadline", "no time left in the host's deadline for %s" % stage)
        return min(cap, left)

    try:
        if facts["mode"] == "launch":
            logdir = tempfile.mkdtemp(prefix="fleetcheck-smoke-")
            log_path = os.path.join(logdir, "server.log")
            facts["log_file"] = log_path
            env = dict(os.environ)
            env.update(plan_smoke.get("env") or {})
            with open(log_path, "wb") as log:
                process = subprocess.Popen(["/bin/sh", "-c", plan_smoke["command"]], env=env,
                                           stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                           start_new_session=True)
            startup_deadline = time.monotonic() + within("the server's start-up",
                                                         plan_smoke["startup_timeout_s"])
            started = time.monotonic()
            wait_healthy(base, startup_deadline, process)
            facts["startup_s"] = round(time.monotonic() - started, 2)
        else:
            status, _ = http("GET", base + "/health", timeout=within("/health"))
            if status != 200:
                raise SmokeError("unhealthy", "/health answered %d" % status)
        facts["model"] = served_model(base, within("/v1/models"))
        facts["metrics_before"] = spec_metrics(base, within("/metrics before the load"))
        budget_end = min(end - METRICS_RESERVE_S,
                         time.monotonic() + plan_smoke["time_budget_s"])
        facts["load"] = run_load(base, facts["model"], prompts, plan_smoke, budget_end)
        facts["metrics_after"] = spec_metrics(base, within("/metrics after the load"))
    except SmokeError as exc:
        facts["error"] = {"kind": exc.kind, "detail": exc.detail}
    except Exception as exc:  # the smoke load must never take the static facts down
        facts["error"] = {"kind": "internal", "detail": "%s: %s" % (type(exc).__name__, exc)}
    finally:
        if process is not None:
            stop_group(process, deadline)
            facts["server_exit"] = process.returncode
            facts["log_tail"] = tail(facts["log_file"], int(plan_smoke.get("log_tail_lines", 40)))
        if logdir:
            shutil.rmtree(logdir, ignore_errors=True)
    return facts
