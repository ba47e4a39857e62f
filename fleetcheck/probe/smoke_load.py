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

from fleetcheck.probe import limits

METRIC_PREFIXES = ("vllm:spec_decode", "vllm:generation_tokens", "vllm:prompt_tokens")
MAX_METRICS_BYTES = 1 << 20
MAX_BODY_BYTES = 4 << 20
MAX_ERROR_BODY = 64 * 1024


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


def http(method, url, body=None, timeout=10.0, stop=None):
    """(status, body bytes) within `timeout` seconds for the whole exchange: connect,
    request and every byte of the answer. A socket timeout bounds each read only, so a
    server that answers one byte a second would hold urllib for ever; here a timer shuts
    the socket down when the time is up, or once `stop` is set. Connection problems raise
    SmokeError('unreachable'), an answer that did not complete in time SmokeError('stalled'),
    a stop SmokeError('cancelled')."""
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
    if stop is not None and stop.is_set():
        raise SmokeError("cancelled", "the run was cancelled")
    watcher = watch_stop(stop, conn, timer) if stop is not None else None
    try:
        timer.start()
        path = parts.path or "/"
        conn.request(method, path + ("?" + parts.query if parts.query else ""), body=data,
                     headers={"Content-Type": "application/json"} if data else {})
        response = conn.getresponse()
        return response.status, response.read(MAX_BODY_BYTES)
    except (HTTPException, OSError) as exc:
        if stop is not None and stop.is_set():
            raise SmokeError("cancelled", "the run was cancelled during %s %s" % (method, url))
        if fired.is_set():
            raise SmokeError("stalled", "%s %s: no complete answer within %.1fs (the server "
                             "accepted the connection but its answer did not finish)"
                             % (method, url, timeout))
        raise SmokeError("unreachable", "%s: %s" % (url, getattr(exc, "reason", exc)))
    finally:
        timer.cancel()
        if watcher is not None:
            watcher.set()
        conn.close()


def watch_stop(stop, conn, timer):
    """Cuts the exchange once `stop` is set (the server then drops the request); the
    event it returns ends the watch."""
    over = threading.Event()

    def watch():
        while not over.is_set():
            if stop.wait(0.1):
                cut(conn, threading.Event())
                return
    threading.Thread(target=watch, daemon=True).start()
    return over


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
    try:
        data = limits.loads(body)
    except ValueError as exc:
        raise SmokeError("models", "/v1/models is not JSON: %s" % limits.cut(exc, 300))
    listed = data.get("data") if isinstance(data, dict) else None
    models = [m.get("id") for m in listed if isinstance(m, dict) and
              isinstance(m.get("id"), str)] if isinstance(listed, list) else []
    if not models:
        raise SmokeError("models", "/v1/models lists no model")
    return models[0]


COUNTERS = {"vllm:spec_decode_num_drafts_total": "drafts",
            "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
            "vllm:spec_decode_num_accepted_tokens_total": "accepted_tokens",
            "vllm:generation_tokens_total": "generation_tokens"}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def label_value(labels, name):
    """The value of label `name` in a sample's `{a="x",b="y"}` text (escapes undone)."""
    i, n = 0, len(labels)
    while i < n:
        eq = labels.find("=", i)
        if eq < 0 or eq + 1 >= n or labels[eq + 1] != '"':
            return None
        key = labels[i:eq].strip(" ,")
        j, out = eq + 2, []
        while j < n and labels[j] != '"':
            if labels[j] == "\\" and j + 1 < n:
                j += 1
                out.append({"n": "\n"}.get(labels[j], labels[j]))
            else:
                out.append(labels[j])
            j += 1
        if key == name:
            return "".join(out)
        i = j + 1
    return None


def counter_sums(text):
    """The spec-decode and generation counters of one scrape, summed over engines (per
    position kept): what one request's deltas are taken from. The controller parses the
    first and last scrape with prometheus_client and checks these sums against it."""
    sums = {name: 0.0 for name in COUNTERS.values()}
    positions = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        space = line.find(" ")
        name = line[:brace] if 0 <= brace < (space if space >= 0 else len(line)) else line[:space]
        if name not in COUNTERS and name != PER_POSITION:
            continue
        close = line.rfind("}")
        rest = line[close + 1:] if brace >= 0 else line[space:]
        try:
            value = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        if name == PER_POSITION:
            position = label_value(line[brace + 1:close], "position")
            if position is not None and position.isdigit():
                positions[int(position)] = positions.get(int(position), 0.0) + value
        else:
            sums[COUNTERS[name]] += value
    sums["per_position"] = positions
    return sums


def counter_delta(after, before):
    out = {name: after[name] - before[name] for name in COUNTERS.values()}
    positions = set(after["per_position"]) | set(before["per_position"])
    out["per_position"] = [after["per_position"].get(p, 0.0) - before["per_position"].get(p, 0.0)
                           for p in range(max(positions) + 1)] if positions else []
    return out


def server_message(raw):
    """What a server said when it refused a request: the `message` of vLLM's error body
    (`{"message": ...}` or `{"error": {"message": ...}}`), else the body's text; cut."""
    try:
        body = limits.loads(raw[:MAX_ERROR_BODY])
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return limits.cut(body["message"], 500)
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return limits.cut(body["error"], 500)
    return limits.cut(raw[:500].decode("utf-8", "replace").strip(), 500) or "(no body)"


def run_load(base, model, prompts, options, deadline, scrape, first, stop=None):
    """Requests at temperature 0 with thinking off, one at a time, each distinct prompt
    at most once, until `requests` are done or the time budget runs out; /metrics is
    scraped after each, so each request has its own counter deltas (`first` is the scrape
    before the load). Returns the load and the last scrape's text."""
    total = min(int(options.get("requests", 40)), len(prompts))
    max_tokens = int(options.get("max_tokens", 128))
    results = []
    last_text = first
    last = counter_sums(first)
    started = time.monotonic()
    for prompt in prompts[:total]:
        if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
            break
        if last is None:  # the scrape after the previous request failed: take one now
            try:
                last_text = scrape()
                last = counter_sums(last_text)
            except SmokeError:
                last = None
        body = {"model": model, "max_tokens": max_tokens, "temperature": 0,
                "messages": [{"role": "user", "content": prompt["content"]}],
                "chat_template_kwargs": {"enable_thinking": False}}
        sent = time.monotonic()
        entry = {"prompt": prompt["id"], "ok": False}
        try:
            status, raw = http("POST", base + "/v1/chat/completions", body,
                               timeout=deadline - sent, stop=stop)
            entry["status"] = status
            if status == 200:
                answer = limits.loads(raw)
                if not isinstance(answer, dict):
                    raise ValueError("not a JSON object")
                usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
                entry["completion_tokens"] = int(usage.get("completion_tokens") or 0)
                entry["prompt_tokens"] = int(usage.get("prompt_tokens") or 0)
                fingerprint = answer.get("system_fingerprint")
                if isinstance(fingerprint, str):  # vLLM 0.21+: a hash of the engine config
                    entry["fingerprint"] = fingerprint[:128]
                entry["ok"] = True
            else:
                entry["error"] = "HTTP %d: %s" % (status, server_message(raw))
        except SmokeError as exc:
            entry["error"] = exc.detail
        except (ValueError, TypeError) as exc:
            entry["error"] = "bad JSON answer: %s" % limits.cut(exc, 300)
        entry["latency_s"] = round(time.monotonic() - sent, 4)
        try:
            text = scrape()
            now = counter_sums(text)
            if last is not None:
                entry["counters"] = counter_delta(now, last)
            last, last_text = now, text
        except SmokeError as exc:
            entry["counters_error"] = exc.detail
            last = None
        results.append(entry)
    return ({"results": results, "wall_s": round(time.monotonic() - started, 4),
             "planned": total, "budget_exhausted": len(results) < total},
            last_text if last is not None else None)


def wait_healthy(base, deadline, process=None, stop=None):
    """Poll /health until 200; a launched server that exits, or `stop`, ends the wait."""
    last = None
    while time.monotonic() < deadline:
        if stop is not None and stop.is_set():
            raise SmokeError("cancelled", "the run was cancelled during the server's start-up")
        if process is not None and process.poll() is not None:
            raise SmokeError("server-exited", "exit status %s" % process.returncode)
        try:
            status, _ = http("GET", base + "/health", timeout=min(5.0, deadline - time.monotonic()))
            if status == 200:
                return
            last = "HTTP %d" % status
        except SmokeError as exc:
            last = exc.detail
        if stop is not None:
            stop.wait(0.5)
        else:
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


LOOPBACK_NAMES = ("localhost", "::1", "0.0.0.0", "::")
WINDOW_KEYS = ("layer_types", "use_sliding_window", "sliding_window", "max_window_layers")


def plain(value, depth=0):
    """A value another process gave, kept only as small JSON scalars and short lists."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value[:200]
    if isinstance(value, list) and depth < 2:
        return [plain(v, depth + 1) for v in value[:64]]
    if isinstance(value, dict) and depth < 2:
        return {str(k)[:100]: plain(v, depth + 1) for k, v in list(value.items())[:64]}
    return None


def served_spec(plan_smoke, context):
    """The speculative config of the server the load goes to: the launch command's own
    in launch mode; in attach mode, that of the vLLM server on this host whose own socket
    listens on the URL's port (else whose command line names it), as the probe context
    read it once (the same reading the served facts use)."""
    if plan_smoke.get("mode") == "launch":
        return {"from": "the launch settings (smoke.spec)", "config": plain(plan_smoke.get("spec"))}
    parts = urlsplit(plan_smoke["url"])
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if not (host.startswith("127.") or host in LOOPBACK_NAMES):
        return {"error": "the load goes to %s, not to a loopback address: that server's "
                         "command line is not this host's to read" % host}
    from fleetcheck.probe.servers import port_of
    server = next((s for s in context.servers if s.listens_on(port)), None) or \
        next((s for s in context.servers if port_of(s.parsed_argv) == port), None)
    if server is None:
        return {"error": "no vLLM server process on port %d is visible on this host" % port}
    config, source, errors = server.speculative()
    if source is None:
        return {"pid": server.pid, "from": None, "config": None}
    if config is None:
        return {"pid": server.pid, "from": source, "error": "%s is not a JSON object" % source}
    return {"pid": server.pid, "from": source, "config": plain(config)}


def drafter_window_config(spec):
    """The sliding-window keys of the launch spec's drafter config.json, when the drafter
    is a local directory (a hub id is resolved by the served facts, in attach mode)."""
    model = (spec or {}).get("model")
    if not isinstance(model, str) or not os.path.isabs(model):
        return None
    path = os.path.join(model, "config.json")
    from fleetcheck.probe.files import ProbeFileError, read_bytes
    try:
        data = limits.loads(read_bytes(path, 1 << 20))
    except (ProbeFileError, ValueError) as exc:
        return {"path": path, "error": str(exc)[:300]}
    if not isinstance(data, dict):
        return {"path": path, "error": "not a JSON object"}
    keep = {k: plain(data[k]) for k in WINDOW_KEYS if k in data}
    dflash = data.get("dflash_config")
    if isinstance(dflash, dict):
        keep["dflash_config"] = {k: plain(dflash[k]) for k in ("use_swa", "swa_window_size")
                                 if k in dflash}
    return {"path": path, "data": keep}


SAFETY_S = 1.0  # the answer must still reach the controller before the host's deadline
METRICS_RESERVE_S = 5.0  # kept from the load's budget for the scrape after it
STAGE_CAP_S = 10.0  # /health, /v1/models, one /metrics scrape


def smoke(plan_smoke, prompts, context, stop=None):
    """Facts of one smoke load; never raises. Every stage (connect, each request, each
    scrape, stopping a launched server) is bounded by what is left of the context's
    deadline; once `stop` is set no request is sent and a launched server is stopped."""
    deadline = context.deadline
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
        facts["served_spec"] = served_spec(plan_smoke, context)
    except Exception as exc:  # never the load's end
        facts["served_spec"] = {"error": "%s: %s" % (type(exc).__name__, exc)}
    if facts["mode"] == "launch":
        facts["drafter_config"] = drafter_window_config(plan_smoke.get("spec"))
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
            wait_healthy(base, startup_deadline, process, stop)
            facts["startup_s"] = round(time.monotonic() - started, 2)
        else:
            status, _ = http("GET", base + "/health", timeout=within("/health"))
            if status != 200:
                raise SmokeError("unhealthy", "/health answered %d" % status)
        facts["model"] = served_model(base, within("/v1/models"))
        facts["metrics_before"] = spec_metrics(base, within("/metrics before the load"))
        budget_end = min(end - METRICS_RESERVE_S,
                         time.monotonic() + plan_smoke["time_budget_s"])
        facts["load"], after = run_load(
            base, facts["model"], prompts, plan_smoke, budget_end,
            lambda: spec_metrics(base, within("/metrics after a request")),
            facts["metrics_before"], stop)
        facts["metrics_after"] = after if after is not None else spec_metrics(
            base, within("/metrics after the load"))
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
