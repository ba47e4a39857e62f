"""The fix verdicts by running the install's own code (probe/executor.py): the real
0.20.1 and 0.33.0 wheels decided with the values the code returned and the lines it ran;
who runs it (the site's owner, nobody when root owns it, never root); a broken
interpreter is a warn naming it; rewrites whose outcome depends on a platform query or an
environment variable are run both ways and warn naming the condition."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import textwrap

import pytest

from fleetcheck.checks.fixes import judge_fix
from fleetcheck.lab.local_probe import probe_tree
from fleetcheck.lab.synthetic import FIXED, PY_DIR, write_install
from fleetcheck.lab.wheels import unpacked
from fleetcheck.playbook import load_playbook

pytestmark = [pytest.mark.root]

CHECKS = {c.id: c for c in load_playbook().checks}
OWNER = "fleetcheck-site"


def verdicts(venv: str, python: str | None = None) -> dict:
    if python:  # the probe under another Python than the install's
        from fleetcheck.inventory import Host
        from fleetcheck.lab.local_probe import probe_answer
        from fleetcheck.wire_protocol import decode_answer
        host = Host(name="local", address="local", connection="local", venv=venv,
                    python=python)
        facts = decode_answer(probe_answer(host), host.connection_settings())
    else:
        facts = probe_tree(venv)
    return {cid: judge_fix(check, facts, None) for cid, check in CHECKS.items()}


def texts(result) -> str:
    return "\n".join("%s:%s %s" % (e.file, e.line, e.text) for e in result.evidence)


@pytest.fixture(scope="module")
def real_trees(tmp_path_factory) -> dict[str, str]:
    """The real wheels' files (hard links into the shared cache) in root's 0700 temp dirs:
    the child, run as nobody, reads the site through the descriptor the probe opened."""
    out = {}
    for version in ("0.20.1", "0.33.0"):
        source = os.path.join(unpacked(version), "lib", "python3", "site-packages")
        venv = str(tmp_path_factory.mktemp("real-" + version))
        os.makedirs(os.path.join(venv, "lib", "python3"))
        subprocess.run(["cp", "-al", source, os.path.join(venv, "lib", "python3")], check=True)
        os.makedirs(os.path.join(venv, "bin"))
        os.symlink(os.path.realpath(shutil.which("python3")), os.path.join(venv, "bin", "python"))
        out[version] = venv
    return out


@pytest.mark.downloads
def test_real_0_33_0_passes_on_what_its_code_returned_run_as_nobody(real_trees):
    results = verdicts(real_trees["0.33.0"])
    assert {cid: r.status for cid, r in results.items()} == {
        "dflash-layer-offset": "pass", "dflash-swa": "pass", "dflash-cache-drop": "pass"}, \
        {cid: r.message for cid, r in results.items()}
    offset = texts(results["dflash-layer-offset"])
    assert "returned (2, 10, 18) for target_layer_ids [1, 9, 17]" in offset
    assert "vllm/v1/worker/gpu_model_runner.py" in offset
    assert "i + 1 for i in (dflash_config.get(\"target_layer_ids\") or [])" in offset
    window = texts(results["dflash-swa"])
    assert "layer 0 got window 2048" in window and "layer 4 got None" in window
    assert "require the V2 model runner" in window or "use_v2_model_runner" in window
    drop = texts(results["dflash-cache-drop"])
    assert "KVCacheManager got use_eagle=False" in drop
    assert "needs_eagle_block_drop() -> False" in drop
    assert all(r.details["run_as"] == "user nobody" for r in results.values())


@pytest.mark.downloads
def test_real_0_20_1_fails_each_fix_on_what_its_code_did(real_trees):
    results = verdicts(real_trees["0.20.1"])
    assert {cid: r.status for cid, r in results.items()} == {
        "dflash-layer-offset": "fail", "dflash-swa": "fail", "dflash-cache-drop": "fail"}
    assert "returned (1, 9, 17) for target_layer_ids [1, 9, 17]" in texts(
        results["dflash-layer-offset"])
    assert "layer 0 got None" in texts(results["dflash-swa"])
    assert "KVCacheManager got use_eagle=True" in texts(results["dflash-cache-drop"])


@pytest.mark.downloads
def test_the_files_the_verdicts_rest_on_are_those_the_child_read(real_trees):
    """The probe hashes them against RECORD (install-record) and a shared analysis's hosts
    prove they hold them: every file of the evidence is one, and all are the install's."""
    import time

    from fleetcheck.probe.executor import execute
    from fleetcheck.probe.trust import code_runner
    venv = real_trees["0.33.0"]
    site = os.path.join(venv, "lib", "python3", "site-packages")
    python = os.path.join(venv, "bin", "python")
    deadline = time.monotonic() + 60
    runner, why = code_runner(None, python, site, deadline)
    out, read = execute({"signatures": load_playbook().probe_signatures()}, site, python,
                        runner, why, deadline)
    evidence = {hit["file"] for check in out.values() for hits in check["findings"].values()
                for hit in hits if hit.get("file")}
    assert "vllm/v1/worker/gpu_model_runner.py" in evidence and evidence <= read, \
        sorted(evidence - read)
    assert "vllm/config/speculative.py" in read  # its use_dflash() decides, beyond the evidence
    assert all(os.path.isfile(os.path.join(site, rel)) for rel in read)


def test_a_file_the_child_names_as_read_must_be_inside_the_install():
    """The child runs the install's code, which can print anything: a path out of the site
    is never read (a lead would ship it) nor hashed."""
    from fleetcheck.probe.executor import install_relative
    assert install_relative("vllm/config/speculative.py")
    for hostile in ("../../etc/shadow", "/etc/shadow", "vllm/../../etc/shadow", "vllm//x.py",
                    "./vllm/x.py", "", "vllm/x\0.py", "x" * 2000, None, 5, ["vllm"]):
        assert not install_relative(hostile), hostile


def synthetic(tmp_path, files: dict | None = None, python: str | None = None) -> str:
    contents = dict(FIXED)
    contents.update({rel: textwrap.dedent(text) for rel, text in (files or {}).items()})
    venv = str(tmp_path / "env")
    write_install(venv, "0.33.0", contents,
                  python=python or os.path.realpath(shutil.which("python3")))
    return venv


def ensure_owner() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(OWNER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", OWNER], check=True)
        return pwd.getpwnam(OWNER)


def test_an_install_another_user_owns_runs_as_that_user(tmp_path):
    owner = ensure_owner()
    venv = synthetic(tmp_path)
    for dirpath, dirnames, filenames in os.walk(venv):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), owner.pw_uid, owner.pw_gid)
    os.lchown(venv, owner.pw_uid, owner.pw_gid)
    results = verdicts(venv)
    assert {r.status for r in results.values()} == {"pass"}, \
        {cid: r.message for cid, r in results.items()}
    assert {r.details["run_as"] for r in results.values()} == {"user " + OWNER}


def test_a_root_owned_install_never_runs_as_root(tmp_path):
    assert os.stat(synthetic(tmp_path)).st_uid == 0
    results = verdicts(str(tmp_path / "env"))
    assert {r.details["run_as"] for r in results.values()} == {"user nobody"}
    assert {r.status for r in results.values()} == {"pass"}


def test_a_directory_the_child_cannot_list_is_an_error_naming_it_never_a_fail(tmp_path):
    """vllm/v1 closed to nobody: the layer-id code is not found because it could not be
    listed, which must not read as "no code reads the key" (a fail)."""
    venv = synthetic(tmp_path)
    (site,) = [d for d, names, _ in os.walk(venv) if d.endswith("site-packages")]
    os.chmod(os.path.join(site, "vllm", "v1"), 0o700)
    result = verdicts(venv)["dflash-layer-offset"]
    assert result.details["run_as"] == "user nobody"
    assert result.status in ("error", "warn"), result.message
    assert "vllm/v1/worker: Permission denied" in result.message, result.message


def test_a_broken_install_interpreter_is_a_warn_naming_it(tmp_path):
    shared = tempfile.mkdtemp(prefix="fleetcheck-broken-python-")  # one nobody may enter
    os.chmod(shared, 0o755)
    broken = os.path.join(shared, "python")
    with open(broken, "w") as handle:
        handle.write("#!/bin/sh\necho 'Fatal Python error: init_fs_encoding' >&2\nexit 1\n")
    os.chmod(broken, 0o755)
    try:
        check_broken(tmp_path, broken)
    finally:
        shutil.rmtree(shared)


def check_broken(tmp_path, broken: str) -> None:
    venv = synthetic(tmp_path, python=broken)
    results = verdicts(venv, python=shutil.which("python3"))
    for result in results.values():
        assert result.status == "warn", result.message
        assert os.path.join(venv, "bin", "python") in result.message
        assert "exited with 1" in result.message and "init_fs_encoding" in result.message


RUNNER = "vllm/v1/worker/gpu_model_runner.py"
PLATFORM_SHIFT = '''
    from vllm.platforms import current_platform

    class GPUModelRunner:
        def _aux_layers_from_draft(self, hf_config):
            dflash_config = getattr(hf_config, "dflash_config", None) or {}
            shift = 0 if current_platform.is_rocm() else 1
            ids = [i + shift for i in (dflash_config.get("target_layer_ids") or [])]
            return tuple(ids) if ids else None
    '''
ENV_SHIFT = '''
    import os

    class GPUModelRunner:
        def _aux_layers_from_draft(self, hf_config):
            dflash_config = getattr(hf_config, "dflash_config", None) or {}
            ids = dflash_config.get("target_layer_ids") or []
            if os.environ.get("VLLM_DFLASH_LEGACY_IDS", "0") != "1":
                ids = [i + 1 for i in ids]
            return tuple(ids) if ids else None
    '''


@pytest.mark.parametrize("source, condition", [
    (PLATFORM_SHIFT, "shift = 0 if current_platform.is_rocm() else 1"),
    (ENV_SHIFT, 'if os.environ.get("VLLM_DFLASH_LEGACY_IDS", "0") != "1":'),
])
def test_an_outcome_that_depends_on_the_platform_or_the_environment_is_a_warn_naming_it(
        tmp_path, source, condition):
    results = verdicts(synthetic(tmp_path, {RUNNER: source}))
    result = results["dflash-layer-offset"]
    assert result.status == "warn", result.message
    assert "%s:" % RUNNER in result.message and condition in result.message
    assert "returned (2, 10, 18)" in result.message and "returned (1, 9, 17)" in result.message


HANGS = '''
    class GPUModelRunner:
        def _aux_layers_from_draft(self, hf_config):
            ids = hf_config.dflash_config["target_layer_ids"]
            while ids:  # asks no stand-in: only the question's own deadline stops it
                pass
    '''


def test_a_question_whose_code_never_returns_leaves_the_others_their_answers(tmp_path):
    """One child answers every fix question, each with its share of the time left: the
    layer-id question spends its share and is a warn saying so, the two after it are
    still decided by what the code did."""
    results = verdicts(synthetic(tmp_path, {RUNNER: HANGS}))
    offset = results["dflash-layer-offset"]
    assert offset.status == "warn" and "out of time" in offset.message, offset.message
    assert results["dflash-swa"].status == "pass", results["dflash-swa"].message
    assert results["dflash-cache-drop"].status == "pass", results["dflash-cache-drop"].message


def test_a_fifo_on_the_fix_path_is_an_error_naming_it_and_never_waited_on(tmp_path):
    """The child opens the install's files without blocking and reads only regular ones:
    a FIFO where the drafter's module is is an error naming it (the probe's own reads
    refuse it the same way), and the run ends well inside its deadline."""
    venv = synthetic(tmp_path)
    drafter = os.path.join(venv, "lib", PY_DIR, "site-packages",
                           "vllm/model_executor/models/qwen3_dflash.py")
    assert os.path.exists(drafter), drafter
    os.unlink(drafter)
    os.mkfifo(drafter)
    results = verdicts(venv)
    swa = results["dflash-swa"]
    assert swa.status == "error", swa.message
    assert "qwen3_dflash.py" in swa.message and "not a regular file" in swa.message


def test_a_drafter_refused_on_a_platform_query_is_a_warn_naming_it_not_a_pass(tmp_path):
    """A drafter whose layers get their window, but which raises when the platform is CUDA:
    the runs that raise and those that build disagree on something else than the model
    runner a server is started with, so whether a fleet serves it is not decided."""
    drafter = "vllm/model_executor/models/qwen3_dflash.py"
    source = textwrap.dedent(FIXED[drafter]).replace(
        "    def __init__(self, *, vllm_config, prefix=\"\"):\n",
        "    def __init__(self, *, vllm_config, prefix=\"\"):\n"
        "        from vllm.platforms import current_platform\n"
        "        if current_platform.is_cuda():\n"
        "            raise NotImplementedError(\"SWA drafters are not served on CUDA\")\n")
    assert "is_cuda" in source
    result = verdicts(synthetic(tmp_path, {drafter: source}))["dflash-swa"]
    assert result.status == "warn", result.message
    assert "current_platform.is_cuda()" in result.message
    assert "not on the model runner" in result.message
