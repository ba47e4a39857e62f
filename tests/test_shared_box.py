"""One box, several users: root serves vLLM on the host's vllm_url port, and a second real
user (`nobody`, through setpriv) runs servers of its own on real loopback sshd hosts.
What nobody starts never decides which install is judged, whose credentials read the
box's files, or how long the probe runs; what nobody's files and ports answer is
bounded; nothing nobody chose is opened before it is checked."""

from __future__ import annotations

import json
import os
import shlex
import shutil

import pytest

import drafter_trees
from drafter_trees import ZLAB
from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.lab.synthetic import FIXED, write_install
from fleetcheck.lab.testhosts import free_loopback_port
from test_trust import NOBODY, as_nobody, chown_tree, wait_listening, world_dir

pytestmark = [pytest.mark.root, pytest.mark.sshd]


def venv_with_server(top: str, version: str) -> tuple[str, str, str]:
    """(venv, its site-packages, its `vllm` script): a synthetic install of `version`
    whose `vllm serve` answers /v1/models and /version on its --port."""
    venv = os.path.join(top, "venv-" + version)
    site = write_install(venv, version, FIXED, python="/usr/bin/python3")
    with open(os.path.join(venv, "pyvenv.cfg"), "w") as handle:
        handle.write("home = /usr/bin\n")
    script = drafter_trees.server_shaped_script(os.path.join(venv, "bin"))
    return venv, site, script


def test_the_server_on_vllm_url_decides_the_install_not_another_users_older_one(
        tmp_path, fleet):
    """nobody starts a server first (the lowest pid) from nobody's own venv; root's server,
    from root's venv, listens on vllm_url's port with a HF_HOME of its own. The install
    judged is root's, the results say it was chosen for listening there, nobody's install
    is listed as another one, root's environment is read (its HF_HOME kept), and
    install-running does not tell the operator to restart root's server."""
    eve_top = world_dir("fc-eve-")
    _, eve_site, eve_script = venv_with_server(eve_top, "0.33.0")
    chown_tree(eve_top, NOBODY.pw_uid, NOBODY.pw_gid)
    root_top = str(tmp_path / "root-install")
    root_venv, root_site, root_script = venv_with_server(root_top, "0.32.0")
    host = fleet.add("gpu-shared-box")
    fleet.start()
    eve_port, root_port = free_loopback_port(), free_loopback_port()
    fleet.spawn_on(host, as_nobody("/usr/bin/python3 %s serve org/eve --port %d"
                                   % (eve_script, eve_port)))
    wait_listening(eve_port)
    hf_home = str(tmp_path / "root-hf")
    fleet.spawn_on(host, "exec env HF_HOME=%s /usr/bin/python3 %s serve org/target --port %d"
                   % (hf_home, root_script, root_port))
    wait_listening(root_port)
    inventory = {"all": {"hosts": ssh_hosts(fleet, [host],
                                            vllm_url="http://127.0.0.1:%d" % root_port)}}
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                         "--no-import-check")
    shutil.rmtree(eve_top, ignore_errors=True)
    assert run.results is not None, run.stderr
    result = run.host("gpu-shared-box")
    assert result.get("error") is None, result
    info = result["vllm"]
    assert info["version"] == "0.32.0", info
    assert info["site_packages"] == root_site, info
    assert "listening on vllm_url's port %d" % root_port in info["found_by"], info
    assert [o["site_packages"] for o in info["other_installs"]] == [eve_site], info
    running = run.check("gpu-shared-box", "install-running")
    assert "restart" not in running["message"], running
    served = {s["port"]: s for s in result["served"] if "pid" in s}
    assert served[root_port]["env"].get("HF_HOME") == hf_home, served[root_port]
    assert served[root_port]["environ_error"] is None, served[root_port]
    assert served[root_port]["judged"] and not served[eve_port]["judged"], served
