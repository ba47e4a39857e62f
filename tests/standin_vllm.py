"""A stand-in for a vLLM server: the same endpoints, the same metric names, types, labels
and `_created` series (served through prometheus_client; test_real_vllm.py compares them
with a real server's), with scripted speculative-decoding acceptance, for the faults and
fleets a real server cannot show on demand.

    standin_vllm.py --bind ADDR --port N --scenario S --state FILE [--model M] [--k 15]
    standin_vllm.py serve MODEL --port N --speculative-config JSON   (as a `vllm` command;
        scenario and state file from FLEETCHECK_STANDIN_SCENARIO / _STATE)

Scenarios: healthy (acceptance 30%, mean acceptance length 5.5), low (~1.1%), collapse
(no acceptance past position 4), nodrafts (tokens generated, drafter silent), nospec (no
spec-decode counters), nostats (no counter moves, as with --disable-log-stats), dead
(/health 503), failing (every completion 500), slow (each request takes 1.5 s),
trickle (completions answered one byte a second), trickle-all (every answer one byte a
second), startup-error (exits at launch with vLLM's mixed-attention error).
The state file holds the counter deltas the server produced since it started, so tests can
compare fleetcheck's numbers with the server's own counts exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, generate_latest

PATTERNS = {
    "healthy": [6, 3, 9, 2, 5, 4, 7, 0, 8, 1],   # mean 4.5 of 15: 30%, length 5.5
    "low": [0, 0, 0, 1, 0, 0],                   # mean 1/6 of 15: 1.1%
    "collapse": [4, 3, 4, 2, 4, 4, 1, 4],        # nothing accepted past position 4
}
MIXED_ERROR = ("NotImplementedError: DFlash drafters with mixed sliding/full attention "
               "require the V2 model runner; relaunch with VLLM_USE_V2_MODEL_RUNNER=1.")


class Engine:
    def __init__(self, scenario: str, model: str, k: int, state_path: str):
        self.scenario, self.model, self.k, self.state_path = scenario, model, k, state_path
        self.registry = CollectorRegistry()
        self.lock = threading.Lock()
        self.requests = 0
        self.step = 0
        self.delta = {"drafts": 0, "draft_tokens": 0, "accepted_tokens": 0,
                      "generation_tokens": 0, "per_position": [0] * k, "requests": 0}
        labels = ["model_name", "engine"]
        self.generation = Counter("vllm:generation_tokens", "Number of generation tokens.",
                                  labels, registry=self.registry)
        self.spec = scenario != "nospec"
        if self.spec:
            self.drafts = Counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.",
                                  labels, registry=self.registry)
            self.draft_tokens = Counter("vllm:spec_decode_num_draft_tokens",
                                        "Number of draft tokens.", labels, registry=self.registry)
            self.accepted = Counter("vllm:spec_decode_num_accepted_tokens",
                                    "Number of accepted tokens.", labels, registry=self.registry)
            self.per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                                   "Accepted tokens per draft position.", labels + ["position"],
                                   registry=self.registry)
        # counters are not at zero when a load starts: traffic before it
        for engine in ("0", "1"):
            self.generation.labels(model, engine).inc(10_000 + int(engine))
            if self.spec:
                self.drafts.labels(model, engine).inc(700)
                self.draft_tokens.labels(model, engine).inc(700 * k)
                self.accepted.labels(model, engine).inc(2_100)
                for position in range(k):
                    self.per_pos.labels(model, engine, str(position)).inc(max(0, 600 - 40 * position))
        self.save()

    def save(self) -> None:
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(self.delta, handle)
        os.replace(tmp, self.state_path)

    def complete(self, max_tokens: int) -> int:
        """Simulate decoding max_tokens with drafts of k tokens; returns tokens produced."""
        with self.lock:
            engine = str(self.requests % 2)
            self.requests += 1
            self.delta["requests"] += 1
            produced = 0
            pattern = PATTERNS.get(self.scenario, PATTERNS["healthy"])
            while produced < max_tokens:
                accepted = pattern[self.step % len(pattern)]
                self.step += 1
                produced += accepted + 1
                if self.scenario == "nostats":
                    continue
                self.generation.labels(self.model, engine).inc(accepted + 1)
                self.delta["generation_tokens"] += accepted + 1
                if not self.spec or self.scenario == "nodrafts":
                    continue
                self.drafts.labels(self.model, engine).inc()
                self.draft_tokens.labels(self.model, engine).inc(self.k)
                self.accepted.labels(self.model, engine).inc(accepted)
                self.delta["drafts"] += 1
                self.delta["draft_tokens"] += self.k
                self.delta["accepted_tokens"] += accepted
                for position in range(accepted):
                    self.per_pos.labels(self.model, engine, str(position)).inc()
                    self.delta["per_position"][position] += 1
            if self.scenario == "busy" or (self.scenario == "busy-some" and
                                           self.requests % 2 == 0):
                # another client's request decoded meanwhile: its tokens and drafts move
                # the same counters, and are in no answer the load gets
                self.generation.labels(self.model, engine).inc(9)
                self.drafts.labels(self.model, engine).inc(3)
                self.draft_tokens.labels(self.model, engine).inc(3 * self.k)
                self.accepted.labels(self.model, engine).inc(6)
                self.per_pos.labels(self.model, engine, "0").inc(3)
                self.per_pos.labels(self.model, engine, "1").inc(3)
            self.save()
            return produced


def make_handler(engine: Engine):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def reply(self, status: int, body: bytes, kind: str = "application/json") -> None:
            if engine.scenario == "trickle-all" or (
                    engine.scenario == "trickle" and self.command == "POST"):
                self.trickle(b"HTTP/1.1 %d OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
                             b"\r\n" % (status, kind.encode(), len(body)) + body)
                return
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def trickle(self, raw: bytes) -> None:
            """One byte a second: each read gets data, so a per-read timeout never fires."""
            self.close_connection = True
            try:
                for i in range(len(raw)):
                    self.wfile.write(raw[i:i + 1])
                    self.wfile.flush()
                    time.sleep(1.0)
            except OSError:
                pass

        def do_GET(self) -> None:
            if self.path == "/health":
                self.reply(503 if engine.scenario == "dead" else 200, b"")
            elif self.path == "/v1/models":
                self.reply(200, json.dumps({"object": "list", "data": [
                    {"id": engine.model, "object": "model", "owned_by": "vllm"}]}).encode())
            elif self.path == "/version":
                self.reply(200, b'{"version": "0.33.0"}')
            elif self.path == "/metrics":
                self.reply(200, generate_latest(engine.registry), "text/plain; version=0.0.4")
            else:
                self.reply(404, b'{"error": "not found"}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            if self.path not in ("/v1/chat/completions", "/v1/completions"):
                self.reply(404, b'{"error": "not found"}')
                return
            if engine.scenario == "failing":
                self.reply(500, b'{"error": "EngineCore encountered an issue"}')
                return
            if engine.scenario == "slow":
                time.sleep(1.5)  # the point: a server slow to answer each request
            ok = request.get("temperature") == 0 and \
                request.get("chat_template_kwargs") == {"enable_thinking": False}
            if not ok:
                self.reply(400, b'{"error": "stand-in expects temperature 0, thinking off"}')
                return
            produced = engine.complete(int(request.get("max_tokens") or 16))
            self.reply(200, json.dumps({
                "id": "chatcmpl-standin", "object": "chat.completion", "model": engine.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok " * 8},
                             "finish_reason": "length"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": produced,
                          "total_tokens": 10 + produced}}).encode())

    return Handler


def main(argv: list[str]) -> None:
    if argv and argv[0] == "serve":  # called as `vllm serve MODEL --port N ...`
        parser = argparse.ArgumentParser(prog="vllm serve")
        parser.add_argument("model")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--speculative-config", required=True)
        args = parser.parse_args(argv[1:])
        scenario = os.environ.get("FLEETCHECK_STANDIN_SCENARIO", "healthy")
        state = os.environ["FLEETCHECK_STANDIN_STATE"]
        spec = json.loads(args.speculative_config)
        print("INFO stand-in vllm: loading %s with drafter %s" % (args.model, spec.get("model")),
              flush=True)
        if scenario == "startup-error":
            print("ERROR EngineCore failed to start.", file=sys.stderr, flush=True)
            print(MIXED_ERROR, file=sys.stderr, flush=True)
            sys.exit(1)
        time.sleep(1.0)  # "model loading"
        bind, port, model, k = "127.0.0.1", args.port, args.model, int(
            spec.get("num_speculative_tokens", 15))
    else:
        parser = argparse.ArgumentParser()
        parser.add_argument("--bind", required=True)
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--scenario", default="healthy")
        parser.add_argument("--state", required=True)
        parser.add_argument("--model", default="Qwen/Qwen3.6-27B")
        parser.add_argument("--k", type=int, default=15)
        args = parser.parse_args(argv)
        bind, port, model, k, scenario, state = (args.bind, args.port, args.model, args.k,
                                                 args.scenario, args.state)
    engine = Engine(scenario, model, k, state)
    server = ThreadingHTTPServer((bind, port), make_handler(engine))
    server.daemon_threads = True
    print("INFO stand-in vllm serving %s on %s:%d (%s)" % (model, bind, port, scenario), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
