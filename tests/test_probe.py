"""The probe on synthetic trees made here: version facts, token patterns that survive
restyling, the +1 offset told apart from none and from +2, look-alikes ignored."""

from __future__ import annotations

import os
import textwrap

import pytest

from fleetcheck.checks.fixes import judge_fix
from fleetcheck.playbook import load_playbook
from fleetcheck.lab.synthetic import FIXED, UNFIXED, write_install
from probe_helpers import STATIC_PLAYBOOK, static_probe_tree, findings

pytestmark = pytest.mark.unit

PLAYBOOK = load_playbook(STATIC_PLAYBOOK)
CHECKS = {c.id: c for c in PLAYBOOK.checks}


def verdict(facts: dict, check_id: str) -> str:
    return judge_fix(CHECKS[check_id], facts, None).status


def tree(tmp_path, files: dict, version="0.33.0", **overrides) -> str:
    contents = dict(files)
    contents.update(overrides)
    venv = str(tmp_path / "env")
    write_install(venv, version, contents)
    return venv


RUNNER = "vllm/v1/worker/gpu_model_runner.py"


def runner_with(body: str) -> dict:
    return {RUNNER: "def aux_layers(hf_config):\n" + textwrap.indent(textwrap.dedent(body), "    ")}


@pytest.mark.parametrize("body", [
    # the 0.22+ spelling
    'dflash_config = hf_config.dflash_config\n'
    'layer_ids = [i + 1 for i in (dflash_config.get("target_layer_ids") or [])]\n'
    'return tuple(layer_ids)\n',
    # the PR #40898 spelling
    "layer_ids = hf_config.dflash_config['target_layer_ids']\n"
    "return tuple(layer_id + 1 for layer_id in layer_ids)\n",
    # spread over lines, other names, 1 + x, a comment in the middle
    "cfg = getattr(hf_config, 'dflash_config', {})\n"
    "raw = cfg.get(\n    'target_layer_ids',\n    [],\n)\n"
    "shifted = [\n    1 + idx  # embeddings are index 0\n    for idx in raw\n]\n"
    "return shifted\n",
    # map with a lambda
    "return list(map(lambda n: n + 1, hf_config.dflash_config['target_layer_ids']))\n",
    # an array plus one
    "ids = np.asarray(hf_config.dflash_config.get('target_layer_ids'))\nreturn ids + 1\n",
    # a loop that appends
    "out = []\nfor layer in hf_config.dflash_config['target_layer_ids']:\n"
    "    out.append(layer + 1)\nreturn tuple(out)\n",
])
def test_layer_offset_fixed_in_any_spelling(tmp_path, body):
    facts = static_probe_tree(tree(tmp_path, FIXED, **runner_with(body)))
    assert "layer_ids:1" in findings(facts, "dflash-layer-offset")
    assert verdict(facts, "dflash-layer-offset") == "pass"


@pytest.mark.parametrize("body, expected", [
    ('ids = hf_config.dflash_config.get("target_layer_ids")\nreturn tuple(ids)\n', "layer_ids:0"),
    ('ids = [i + 2 for i in hf_config.dflash_config["target_layer_ids"]]\nreturn ids\n', "layer_ids:2+"),
    ('ids = [i + 1 for i in hf_config.dflash_config["target_layer_ids"]]\n'
     'return tuple(j + 1 for j in ids)\n', "layer_ids:2+"),
    ('ids = torch.tensor([i + 1 for i in hf_config.dflash_config["target_layer_ids"]])\n'
     'return ids + 1\n', "layer_ids:2+"),
    ('out = []\nfor x in hf_config.dflash_config["target_layer_ids"]:\n'
     '    out.append(x)\nreturn out\n', "layer_ids:0"),
])
def test_layer_offset_missing_or_doubled_fails(tmp_path, body, expected):
    facts = static_probe_tree(tree(tmp_path, FIXED, **runner_with(body)))
    assert expected in findings(facts, "dflash-layer-offset")
    assert verdict(facts, "dflash-layer-offset") == "fail"


def test_layer_offset_moved_to_another_file_keeps_verdict(tmp_path):
    """The +1 moved into a helper of another module: followed there, and the evidence
    names the helper's line."""
    moved = dict(FIXED)
    moved[RUNNER] = ("from vllm.v1.worker.spec.dflash_layers import aux_ids\n\n"
                     "def aux_layers(hf_config):\n"
                     "    dflash_config = getattr(hf_config, 'dflash_config', None) or {}\n"
                     "    return tuple(aux_ids(dflash_config.get('target_layer_ids')))\n")
    moved["vllm/v1/worker/spec/dflash_layers.py"] = (
        "def aux_ids(ids):\n    return [n + 1 for n in ids]\n")
    facts = static_probe_tree(tree(tmp_path, moved))
    hits = findings(facts, "dflash-layer-offset")["layer_ids:1"]
    assert hits[0].file == "vllm/v1/worker/spec/dflash_layers.py"
    assert hits[0].line == 2
    assert verdict(facts, "dflash-layer-offset") == "pass"


def test_synthetic_fixed_and_unfixed_trees(tmp_path):
    fixed = static_probe_tree(tree(tmp_path / "a", FIXED))
    broken = static_probe_tree(tree(tmp_path / "b", UNFIXED, version="0.20.1"))
    for check_id in CHECKS:
        assert verdict(fixed, check_id) == "pass", check_id
        assert verdict(broken, check_id) == "fail", check_id


def test_swa_lookalike_in_laguna_module_does_not_count(tmp_path):
    """laguna_dflash.py carries PR-#40898-like helpers, but the registry maps the DFlash
    drafter to qwen3_dflash.py, which has no per-layer window: still a failure."""
    files = dict(UNFIXED)
    files["vllm/transformers_utils/configs/speculators/algos.py"] = (
        'KEEP = ("layer_types", "use_sliding_window", "sliding_window", "max_window_layers")\n')
    facts = static_probe_tree(tree(tmp_path, files))
    swa = facts.signatures["dflash-swa"]
    assert swa.modules["drafter"].file == "vllm/model_executor/models/qwen3_dflash.py"
    assert "pr_layer_types" not in swa.findings
    assert verdict(facts, "dflash-swa") == "fail"


def test_swa_pr_branch_form_passes(tmp_path):
    files = dict(UNFIXED)
    files["vllm/model_executor/models/qwen3_dflash.py"] = '''
        _DFLASH_VALID_LAYER_TYPES = frozenset({'full_attention', 'sliding_attention'})

        def _get_dflash_layer_types(config):
            return list(config.layer_types)

        class DFlashAttention:
            def __init__(self, config, idx):
                layer_types = _get_dflash_layer_types(config)
                window = config.sliding_window if layer_types[idx] == "sliding_attention" else None
                self.attn = Attention(config.num_heads, per_layer_sliding_window=window)
        '''
    files["vllm/transformers_utils/configs/speculators/algos.py"] = '''
        def update(cfg, src):
            for key in (
                'layer_types',
                'use_sliding_window',
                'sliding_window',
                'max_window_layers',
            ):
                cfg[key] = src.get(key)
        '''
    facts = static_probe_tree(tree(tmp_path, files))
    assert verdict(facts, "dflash-swa") == "pass"


def test_swa_registry_pointing_elsewhere_follows_the_registry(tmp_path):
    """The drafter moved to another module: the registry says where, the verdict follows."""
    files = dict(FIXED)
    files["vllm/model_executor/models/registry.py"] = (
        'MODELS = {"DFlashDraftModel": ("dflash_qwen", "DFlashQwen3ForCausalLM")}\n')
    files["vllm/model_executor/models/dflash_qwen.py"] = files.pop(
        "vllm/model_executor/models/qwen3_dflash.py")
    facts = static_probe_tree(tree(tmp_path, files))
    assert facts.signatures["dflash-swa"].modules["drafter"].file.endswith("dflash_qwen.py")
    assert verdict(facts, "dflash-swa") == "pass"


def test_cache_drop_opt_in_flag_only_is_warn(tmp_path):
    files = dict(UNFIXED)
    files["vllm/config/speculative.py"] = '''
        class SpeculativeConfig:
            disable_eagle_block_drop: bool = False
            def use_eagle(self) -> bool:
                return self.method in ("eagle", "dflash")
        '''
    facts = static_probe_tree(tree(tmp_path, files))
    result = judge_fix(CHECKS["dflash-cache-drop"], facts, "0.30.0")
    assert result.status == "warn"
    assert "disable_eagle_block_drop" in result.message


def test_version_file_and_dist_info_facts(tmp_path):
    venv = tree(tmp_path, FIXED, version="0.33.0")
    facts = static_probe_tree(venv)
    assert facts.version_file.version == "0.33.0"
    assert facts.version_file.commit_id == "g0a1b2c3d4"
    dist = facts.install.dist_infos[0]
    assert (dist.name, dist.version, dist.installer) == ("vllm", "0.33.0", "pip")


def test_broken_venv_interpreter_falls_back_to_python3(tmp_path):
    venv = tree(tmp_path, FIXED)
    os.unlink(os.path.join(venv, "bin", "python"))
    with open(os.path.join(venv, "bin", "python"), "w") as handle:
        handle.write("#!/nonexistent/interpreter\n")
    os.chmod(os.path.join(venv, "bin", "python"), 0o755)
    facts = static_probe_tree(venv)
    assert facts.python.executable != os.path.join(venv, "bin", "python")
    assert verdict(facts, "dflash-layer-offset") == "pass"


def test_fifo_in_place_of_a_source_file_is_an_error_not_a_hang(tmp_path):
    venv = tree(tmp_path, FIXED)
    site = os.path.join(venv, "lib")
    path = next(os.path.join(d, RUNNER) for d, _, _ in os.walk(site) if d.endswith("site-packages"))
    os.unlink(path)
    os.mkfifo(path)
    facts = static_probe_tree(venv)
    result = judge_fix(CHECKS["dflash-layer-offset"], facts, None)
    assert result.status == "error"
    assert "not a regular file" in result.message


def test_host_python_of_another_version_compiles_the_sources(tmp_path):
    """The marshalled probe is only for a host Python with our bytecode magic; any other
    gets the sources and compiles them (simulated here with a foreign magic number)."""
    import subprocess

    from fleetcheck.inventory import Host
    from fleetcheck.wire_protocol import decode_answer, host_plan, probe_command, probe_payload
    from fleetcheck.connectors.base import CommandResult
    venv = tree(tmp_path, FIXED)
    host = Host(name="local", address="local", connection="local", venv=venv)
    payload = probe_payload(host_plan(host, PLAYBOOK.probe_signatures()))
    magic, rest = payload.split(b" ", 1)
    foreign = b"0" * len(magic) + b" " + rest  # header, then the compressed blobs
    proc = subprocess.run(["/bin/sh", "-c", probe_command(host)], input=foreign,
                          capture_output=True, timeout=60)
    facts = decode_answer(CommandResult(proc.stdout, proc.stderr, proc.returncode), host)
    assert verdict(facts, "dflash-layer-offset") == "pass"


def test_package_without_dist_info_and_dist_info_without_package(tmp_path):
    """Both halves of an interrupted install are named by install-metadata."""
    import shutil

    from fleetcheck.checks.integrity import TITLES, judge_integrity_check
    integrity = {"deep": False, "import_check": False, "import_timeout": 5}

    def metadata(venv):
        from fleetcheck.inventory import Host
        from fleetcheck.wire_protocol import decode_answer, host_plan, probe_command, probe_payload
        from fleetcheck.connectors.base import CommandResult
        import subprocess
        host = Host(name="local", address="local", connection="local", venv=venv)
        payload = probe_payload(host_plan(host, PLAYBOOK.probe_signatures(), integrity, 30))
        proc = subprocess.run(["/bin/sh", "-c", probe_command(host)], input=payload,
                              capture_output=True, timeout=60)
        facts = decode_answer(CommandResult(proc.stdout, proc.stderr, proc.returncode), host)
        return {cid: judge_integrity_check(cid, facts, False) for cid in TITLES}

    no_dist = tree(tmp_path / "a", FIXED)
    site = next(os.path.join(d, "") for d, _, _ in os.walk(no_dist) if d.endswith("site-packages"))
    shutil.rmtree(os.path.join(site, "vllm-0.33.0.dist-info"))
    checks = metadata(no_dist)
    assert checks["install-metadata"].status == "fail"
    assert "no vllm dist-info" in checks["install-metadata"].evidence[0].text
    assert checks["install-record"].status == "fail"

    no_package = tree(tmp_path / "b", FIXED)
    site = next(os.path.join(d, "") for d, _, _ in os.walk(no_package) if d.endswith("site-packages"))
    shutil.rmtree(os.path.join(site, "vllm"))
    checks = metadata(no_package)
    texts = " ".join(e.text for e in checks["install-metadata"].evidence)
    assert checks["install-metadata"].status == "fail"
    assert "package directory is missing" in texts


@pytest.mark.parametrize("line", ['a,b,c', '"a,b",sha256=x,12', '"a""q,b",,', '"",,',
                                  'x,"y""",3', '"unterminated,1', 'only'])
def test_record_csv_fields_read_as_the_csv_module_does(line):
    """The probe parses quoted RECORD rows itself (the csv import is start-up time on every
    host); it must agree with the csv module, which pip writes RECORD with."""
    import csv
    from fleetcheck.probe.integrity import csv_fields
    assert csv_fields(line) == next(csv.reader([line]))


@pytest.mark.parametrize("url", ["file:///home/u/vllm", "file:///a%20b/%C3%A9x",
                                 "file://localhost/srv/x", "file:///x?y#z", "file:///bad%zz"])
def test_editable_source_url_decoded_as_urllib_does(url):
    from urllib.parse import unquote, urlparse
    from fleetcheck.probe.install import file_url_path
    assert file_url_path(url) == unquote(urlparse(url).path)


def test_record_digest_form_matches_base64():
    import base64
    import hashlib
    from fleetcheck.probe.integrity import urlsafe_digest
    for size in range(0, 200, 7):
        digest = hashlib.sha256(b"x" * size).digest()
        assert urlsafe_digest(digest) == base64.urlsafe_b64encode(digest).decode().rstrip("=")


def test_whole_word_needle_skips_longer_names_but_not_attribute_uses():
    from fleetcheck.probe.source import SourceFile
    text = ("x = cfg.use_eagle_block_drop()\n"
            "if cfg.use_eagle():\n"
            "    pass\n"
            "use_eagle = 1\n"
            "s = 'no_use_eagle'\n")
    source = SourceFile("m.py", text.encode())
    assert source.hit_lines("use_eagle", whole_word=True) == [2, 4]
    assert source.hit_lines("use_eagle") == [1, 2, 4, 5]


JSON_VALUES = [
    {"b": [1, 2.5, -3, 1e300, True, False, None], "a": "é \u2028 \x00 \"q\" \\ \ud83d\ude00"},
    [], {}, "", 0, -0.0, 12345678901234567890, float("inf"), {"nested": [{"x": [[]]}]},
]


@pytest.mark.parametrize("value", JSON_VALUES)
def test_probe_json_without_the_json_package_agrees_with_it(value):
    """The probe encodes and decodes with _json directly (json's import costs every host
    ~8 ms); what it writes and reads must be exactly what the json package does."""
    import json
    from fleetcheck.probe import jsonlite
    assert jsonlite.CODEC is not None  # this Python has _json: the fast path is tested
    for sort_keys in (False, True):
        text = jsonlite.dumps(value, sort_keys=sort_keys)
        assert text == json.dumps(value, sort_keys=sort_keys)
        assert json.dumps(jsonlite.loads(text)) == json.dumps(json.loads(text))
    assert jsonlite.loads(" \n%s\r\n" % json.dumps(value)) == json.loads(json.dumps(value))
    assert jsonlite.loads(json.dumps(value).encode("utf-8")) == json.loads(json.dumps(value))


@pytest.mark.parametrize("text", ["", " ", "{", "[1,]", "{\"a\" 1}", "1 2", "nul", "\"\x01\"",
                                  "[1] x", "{'a': 1}"])
def test_probe_json_rejects_what_json_rejects(text):
    import json
    from fleetcheck.probe import jsonlite
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        jsonlite.loads(text)


def test_probe_json_falls_back_to_the_json_package(monkeypatch):
    from fleetcheck.probe import jsonlite
    monkeypatch.setattr(jsonlite, "_json", None)
    assert jsonlite.make_codec() is None
    monkeypatch.setattr(jsonlite, "CODEC", None)
    assert jsonlite.dumps({"b": 1, "a": [None]}, sort_keys=True) == '{"a": [null], "b": 1}'
    assert jsonlite.loads('{"a": [null]}') == {"a": [None]}
    with pytest.raises(ValueError):
        jsonlite.loads("{")


@pytest.mark.parametrize("source", [
    "__version__ = version = '0.33.0'\n__version_tuple__ = version_tuple = (0, 33, 0)\n"
    "__commit_id__ = commit_id = 'g4ba787ec9'\n",
    "version: str\n__version__ = version = '0.1.dev1+gabc'\n"
    "__version_tuple__ = version_tuple = (0, 1, 'dev1', 'gabc')\ncommit_id = None\n",
    "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    VERSION_TUPLE = tuple\n"
    "__version__ = '1.0'\n__version_tuple__ = [1, -0, -2.5]\n__commit_id__ = f'{1}'\n",
    "__version__ = os.environ['X']\n__commit_id__ = ('a', ('b',))\n",
    "__version__ = [0, 33]\n__version__ = '0.33.0'\n__commit_id__ = 4\n__version_tuple__ = True\n",
    "__version__ = b'0.33.0'\n__version_tuple__ = (0, 1j)\ncommit_id = 1e999\n",
    "__version__: str = '1.0'\ncommit_id: str\n__commit_id__ = -3\n",
    "__version__ = = 1\n",
])
def test_version_file_read_as_ast_literal_eval_reads_it(tmp_path, source):
    """_version.py is parsed with _ast and a small literal evaluator (the ast module costs
    every host ~10 ms to import): the same values as ast.literal_eval gives, where they
    are what a build writes (text; a tuple of numbers and strings), and every other
    literal a misfit with its line and repr, never a value."""
    import ast
    from fleetcheck.probe.install import VERSION_NAMES, read_version_file
    path = tmp_path / "_version.py"
    path.write_text(source)
    facts = read_version_file(str(path))
    expected = {"version": None, "version_tuple": None, "commit_id": None}
    misfits = []
    taken = set()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        assert facts["error"] and facts["version"] is None
        return
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        elif isinstance(node, ast.Assign):
            targets = node.targets
        else:
            continue
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            continue
        for target in targets:
            field = VERSION_NAMES.get(getattr(target, "id", None))
            if field is None or value is None or field in taken:
                continue
            taken.add(field)
            if field == "version_tuple":
                fits = type(value) in (tuple, list) and all(type(i) in (int, str) for i in value)
            else:
                fits = type(value) is str
            if fits:
                expected[field] = list(value) if isinstance(value, tuple) else value
            else:
                misfits.append({"field": field, "name": target.id, "line": node.lineno,
                                "type": type(value).__name__, "value": repr(value)})
    assert {k: facts[k] for k in expected} == expected and facts["error"] is None
    assert facts["misfits"] == misfits
    from fleetcheck.probe import jsonlite
    jsonlite.dumps(facts)  # whatever the file assigns, the facts cross the wire


@pytest.mark.parametrize("name", ["vllm-0.33.0.dist-info", "VLLM-0.1.DIST-INFO", "vllm-.dist-info",
                                  "vllm-0.1-py3.dist-info", "vllm-0.1.dist-info.bak", "vllm",
                                  "xvllm-0.1.dist-info", "vllm-0.1.egg-info", "vllm-x.dist-info"])
def test_dist_info_names_as_the_regex_matched_them(name):
    import re
    from fleetcheck.probe.install import is_vllm_dist_info
    assert is_vllm_dist_info(name) is bool(re.match(r"(?i)^vllm-[^-]+\.dist-info$", name))


@pytest.mark.parametrize("name", ["pip", "pip3", "pip3.12", "pipx", "pip-3", "uv", "uvx", "cmake",
                                  "ninja", "setup.py", "setupxpy", "ccache", "python3", ""])
def test_install_tool_names_as_the_regex_matched_them(name):
    import re
    from fleetcheck.probe.integrity import is_install_tool
    expected = bool(re.match(r"^(pip[0-9.]*|uv|cmake|ninja|setup\.py|ccache)$", name))
    assert is_install_tool(name) is expected


def run_probe_listing_modules(plan: dict, reply: bytes | None = None) -> tuple[dict, list]:
    """probe() run for real as a host runs it (the bootstrap, the payload on stdin, the
    controller's reply to its question), then the modules it had loaded: (facts, names).
    As root it runs in a PID namespace of its own, so this machine's servers are not its."""
    import json
    import shutil
    import subprocess
    import sys
    from fleetcheck.wire_protocol import BOOTSTRAP, probe_payload
    boot = BOOTSTRAP.replace(
        "import fleetcheck.probe.main as p;p.main()\n",
        "import fleetcheck.probe.main as p;p.main()\n"
        "sys.stderr.write(repr(sorted(m for m in sys.modules if m.startswith('fleetcheck') or "
        "m in ('re','json','ast','enum','http.client'))))\n")
    alone = ["unshare", "--pid", "--fork", "--mount-proc"] \
        if os.geteuid() == 0 and shutil.which("unshare") else []
    proc = subprocess.Popen(alone + [sys.executable, "-S", "-I", "-B", "-c", boot],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdin.write(probe_payload(plan))
    proc.stdin.flush()
    if plan.get("share_analysis"):
        assert proc.stdout.readline().startswith(b"fleetcheck-ask ")
        proc.stdin.write(reply or b'{"role": "lead"}\n')
    proc.stdin.close()
    out, err = proc.stdout.read(), proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    return json.loads(out), eval(err.decode())


def test_a_verifying_host_never_loads_the_analysis_modules_nor_re_json_ast(tmp_path):
    """A real probe() on a host that verifies its build's bytes, with the served facts the
    runner always plans and no server running: it imports no analysis module, and none of
    the stdlib modules whose import is a slow host's start-up (jsonlite reads and writes
    the JSON; a `--config` file's YAML reader loads only where a server has one)."""
    from fleetcheck.inventory import Host
    from fleetcheck.shared_analysis import analyse_shipment
    from fleetcheck.wire_protocol import host_plan
    venv = tree(tmp_path, FIXED)
    host = Host(name="local", address="local", connection="local", venv=venv)
    integrity = {"deep": False, "import_check": False, "import_timeout": 20}
    plan = dict(host_plan(host, PLAYBOOK.probe_signatures(), integrity, 60),
                share_analysis=True)
    lead, loaded_by_lead = run_probe_listing_modules(plan)
    assert "fleetcheck.probe.signatures" in loaded_by_lead and "re" in loaded_by_lead
    _, reply = analyse_shipment(lead["shared_read"], PLAYBOOK.probe_signatures(), "0" * 64)
    facts, loaded = run_probe_listing_modules(plan, reply)
    assert facts["shared_analysis"]["files"] > 0 and facts["signatures"] is None  # verified
    assert facts["served"]["servers"] == [] and "integrity" in facts
    assert loaded == ["fleetcheck", "fleetcheck.probe", "fleetcheck.probe.config_file_args",
                      "fleetcheck.probe.files", "fleetcheck.probe.install",
                      "fleetcheck.probe.integrity", "fleetcheck.probe.jsonlite",
                      "fleetcheck.probe.main", "fleetcheck.probe.server_config",
                      "fleetcheck.probe.servers", "fleetcheck.probe.shared_bytes",
                      "fleetcheck.probe.trust"]


# The oldest Python the probe promises to run under (it runs on the hosts' own Python);
# this machine's image carries it under pyenv
PYTHON_38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"


def test_the_probe_runs_under_python_3_8_on_a_real_install(real_venvs):
    """Every probe module, the served facts and the analysis included, on Python 3.8: the
    same verdicts and facts as under the controller's Python."""
    from fleetcheck.checks.plan import CheckPlan
    from fleetcheck.inventory import Host
    from fleetcheck.lab.local_probe import probe_answer
    from fleetcheck.wire_protocol import decode_answer
    assert os.access(PYTHON_38, os.X_OK), "Python 3.8 is needed here: %s" % PYTHON_38
    integrity = {"deep": False, "import_check": False, "import_timeout": 5}
    verdicts = {}
    for python in (PYTHON_38, None):
        host = Host(name="local", address="local", connection="local",
                    venv=real_venvs["0.33.0"], python=python)
        answer = probe_answer(host, integrity=integrity, served={"drafters": []})
        facts = decode_answer(answer, host)
        assert facts.errors == [] and facts.served is not None and not facts.served.error
        if python:
            assert facts.python.version.startswith("3.8."), facts.python
        _, checks, _ = CheckPlan(load_playbook()).judge(facts)  # the executor's verdicts
        verdicts[python] = [(c.id, c.status, c.message) for c in checks]
    assert verdicts[PYTHON_38] == verdicts[None]
    assert [s for _, s, _ in verdicts[PYTHON_38][:3]] == ["pass"] * 3
