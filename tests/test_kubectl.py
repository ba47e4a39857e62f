"""`connection: kubectl`, through a `kubectl` stand-in (tests/kubectl_standin: no
Kubernetes cluster can run on these machines) that execs into real Podman containers by
pod and container name and answers with kubectl's own error texts. fleetcheck runs
whatever `kubectl` is first on PATH; the connector knows nothing of the stand-in."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from fleet_helpers import ROOT, run_fleetcheck
from kubectl_helpers import STANDIN, USER, kubeconfig
from fleetcheck.connectors import declarations
from fleetcheck.input_error import InputError
from fleetcheck.inventory import load_inventory
from fleetcheck.variables import Declarations, Variable
from podman_installs import (ROOTFS, RUN_FLAGS, assert_official_image_install, mounts, podman,
                             private_storage, release_storage, system_site_by_uv)

SCRIPT = os.path.join(ROOT, "inventories", "kubectl_pods.py")
PODS = {
    "lab": {
        "ml/web-0": {"containers": {"proxy": "sidecar", "vllm": "vllm"},
                     "labels": {"app": "vllm", "tier": "serve"}},
        "ml/solo-7f9c": {"containers": {"vllm": "vllm"}, "labels": {"app": "vllm"}},
        "ml/sidecars-0": {"containers": {"proxy": "sidecar", "metrics": "sidecar"},
                          "labels": {"app": "router"}},
        "ml/twins-0": {"containers": {"a": "vllm", "b": "vllm"}},
        "ml/locked-0": {"containers": {"vllm": "vllm"}, "forbidden": True},
        "ml/noexec-0": {"containers": {"proxy": "sidecar", "vllm": "vllm"},
                        "exec_forbidden": True},
        "batch/web-0": {"containers": {"vllm": "vllm"}, "labels": {"app": "vllm"}},
    },
    "prod": {"serving/gpu-pod": {"containers": {"vllm": "vllm"}}},
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The stand-in's pods over two real Podman containers (`vllm`, whose command is
    `vllm serve`, and `sidecar`, without vLLM) in a storage of this module's own, and the
    environment that puts the stand-in first on PATH."""
    work = tmp_path_factory.mktemp("kubectl")
    env, _ = private_storage(work)
    server = work / "bin" / "vllm"
    server.parent.mkdir()
    server.write_text("import time\ntime.sleep(100000)\n")  # a long-lived server's shape
    commands = {"vllm": [str(server), "serve", "/models/qwen", "--port", "8000"],
                "sidecar": ["-c", "import time; time.sleep(100000)"]}
    site = system_site_by_uv(env)
    for name, command in commands.items():
        podman(env, "run", "-d", *RUN_FLAGS, *mounts(site), "--name", name, ROOTFS,
               "/usr/bin/python3", *command)
    pods = work / "pods.json"
    pods.write_text(json.dumps(PODS))
    try:
        yield work, dict(env, PATH=STANDIN + os.pathsep + env["PATH"],
                         KUBECTL_STANDIN_PODS=str(pods),
                         KUBECONFIG=kubeconfig(work / "kubeconfig"))
    finally:
        podman(env, "rm", "-f", "-t", "0", *commands, check=False)
        release_storage(work / "graph")


def calls(log) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_an_inventory_for_ansibles_kubectl_connection_checks_the_pods(tmp_path, cluster):
    work, env = cluster
    log = tmp_path / "kubectl.log"
    config = kubeconfig(tmp_path / "kubeconfig-2")
    inventory = {"k8s": {"vars": {"ansible_connection": "kubectl",
                                  "ansible_kubectl_kubeconfig": config},
                         "hosts": {
                             # no container named: the pod's vLLM one, not its first (proxy)
                             "web-0": {},
                             "solo": {"ansible_kubectl_pod": "solo-7f9c",
                                      "ansible_kubectl_local_env_vars": {
                                          "AWS_PROFILE": "eks-reader"}},
                             "pinned": {"ansible_kubectl_pod": "web-0",
                                        "ansible_kubectl_container": "vllm",
                                        "ansible_kubectl_namespace": "ml",
                                        "ansible_kubectl_extra_args": "--request-timeout 20s"},
                             "prod-box": {"ansible_host": "gpu-pod",
                                          "ansible_kubectl_context": "prod",
                                          "ansible_kubectl_namespace": "serving"}}}}
    seen = tmp_path / "kubectl-env.log"
    run = run_fleetcheck(tmp_path, inventory, env=dict(env, KUBECTL_STANDIN_LOG=str(log),
                                                       KUBECTL_STANDIN_ENV_LOG=str(seen)))
    assert [h["name"] for h in run.results["hosts"]] == ["web-0", "solo", "pinned", "prod-box"]
    # ansible_kubectl_local_env_vars reach kubectl's environment, never a command line
    assert set(seen.read_text().split()) == {"eks-reader"}
    assert "eks-reader" not in log.read_text()
    for name in ("web-0", "solo", "pinned", "prod-box"):
        assert_official_image_install(run, name)
    assert run.code == 0, run.stdout[-2000:]
    log_lines = calls(log)
    probes = [c for c in log_lines if "exec" in c and "/proc/[0-9]" not in c[-1]]
    listings = [c for c in log_lines if "exec" in c and "/proc/[0-9]" in c[-1]]
    # no container named, two in the pod: listed, each one's processes read, vllm chosen
    assert ["--kubeconfig", config, "get", "pod", "web-0", "-o", "json"] in log_lines
    assert sorted(c[6] for c in listings) == ["proxy", "vllm"], listings
    web = [c for c in probes if c[:5] == ["--kubeconfig", config, "exec", "-i", "web-0"]]
    assert web and all(c[5:10] == ["-c", "vllm", "--", "sh", "-c"] for c in web), web
    # Ansible's order: global flags, extra args, then exec -i POD -c CONTAINER -- command
    pinned = [c for c in probes if c[:2] == ["-n", "ml"]]
    assert pinned and all(c[:14] == [
        "-n", "ml", "--kubeconfig", config, "--request-timeout", "20s", "exec", "-i", "web-0",
        "-c", "vllm", "--", "sh", "-c"] for c in pinned), pinned
    # the results say which pod and container ran the probe
    assert run.host("solo")["container"] == {"engine": "kubectl", "k8s_pod": "solo-7f9c",
                                             "k8s_container": "vllm"}
    assert run.host("prod-box")["container"] == {
        "engine": "kubectl", "k8s_pod": "gpu-pod", "k8s_container": "vllm",
        "k8s_namespace": "serving", "kubectl_context": "prod"}
    assert "in pod serving/gpu-pod, container vllm, through kubectl (context prod)" in run.html
    # the pod is ansible_host when no ansible_kubectl_pod is given, as Ansible's remote_addr
    prod = [c for c in probes if "prod" in c]
    assert prod and all(c[:11] == ["-n", "serving", "--kubeconfig", config, "--context", "prod",
                                   "exec", "-i", "gpu-pod", "-c", "vllm"] for c in prod), prod


def test_kubectls_own_errors_are_container_errors_quoting_it(tmp_path, cluster):
    _, env = cluster
    not_executable = tmp_path / "kubectl"
    not_executable.write_text("#!/bin/sh\n")  # mode 644
    hosts = {"gone-0": {}, "locked-0": {}, "bad-context": {"ansible_kubectl_context": "nope",
                                                           "ansible_kubectl_pod": "web-0"},
             "bad-container": {"ansible_kubectl_pod": "web-0",
                               "ansible_kubectl_container": "vlm"},
             "sidecars-0": {}, "twins-0": {},
             "no-kubectl": {"ansible_kubectl_pod": "web-0",
                            "kubectl_command": "/nonexistent/kubectl"},
             "not-executable": {"ansible_kubectl_pod": "web-0",
                                "kubectl_command": str(not_executable)},
             "engine-container": {"ansible_kubectl_pod": "web-0", "container": "vllm"},
             "token-0": {"ansible_kubectl_pod": "web-0", "ansible_kubectl_token": "abc"},
             "noexec-0": {}}
    run = run_fleetcheck(tmp_path, {"all": {"vars": {"connection": "kubectl"},
                                            "hosts": hosts}}, env=env)
    assert run.code == 3, run.stdout[-2000:]
    assert [h["name"] for h in run.results["hosts"]] == list(hosts)
    errors = {h["name"]: h["error"] for h in run.results["hosts"]}
    assert {e["kind"] for e in errors.values()} == {"container"}, errors
    said = {name: e["message"] for name, e in errors.items()}
    assert 'Error from server (NotFound): pods "gone-0" not found' in said["gone-0"]
    assert said["gone-0"].startswith("pod gone-0: kubectl could not read the pod (exit 1)")
    assert ('pods "locked-0" is forbidden: User "%s" cannot get resource "pods"' % USER) \
        in said["locked-0"]
    assert "context was not found for specified context: nope" in said["bad-context"]
    assert "context nope" in said["bad-context"]
    assert "container vlm is not valid for pod web-0" in said["bad-container"]
    # a host that failed where it was to run still says where that was
    assert run.host("bad-container")["container"] == {"engine": "kubectl", "k8s_pod": "web-0",
                                                      "k8s_container": "vlm"}
    assert "none of its containers (proxy, metrics) runs a vLLM server" in said["sidecars-0"]
    assert "containers a, b run vLLM servers; set ansible_kubectl_container" in said["twins-0"]
    assert "/nonexistent/kubectl not found on this machine" in said["no-kubectl"]
    assert said["not-executable"] == "host not-executable: %s is not executable on this " \
                                     "machine" % not_executable
    assert "in a pod, set ansible_kubectl_container" in said["engine-container"]
    # RBAC that lets kubectl read the pod but not exec: said, not taken for "no vLLM"
    assert said["noexec-0"].startswith("pod noexec-0: kubectl could not exec into container "
                                       "proxy (exit 1)")
    assert 'cannot create resource "pods/exec"' in said["noexec-0"]
    assert said["token-0"] == ("host token-0: ansible_kubectl_token / ansible_kubectl_api_key "
                               "is not supported: it would put a credential on kubectl's "
                               "command line, where any user of this machine sees it in `ps`: "
                               "put it in a kubeconfig (ansible_kubectl_kubeconfig) instead")
    for name in hosts:
        assert name in run.html and name in run.stdout


def test_the_pods_inventory_script_lists_pods_by_label_for_fleetcheck(tmp_path, cluster):
    """The docs' dynamic inventory, run by fleetcheck as a script against the stand-in:
    the pods it lists are checked, their vLLM containers chosen."""
    _, env = cluster
    listed = subprocess.run([SCRIPT, "--list"], capture_output=True, text=True, timeout=60,
                            env=dict(env, FLEETCHECK_K8S_SELECTOR="app=vllm"), check=True)
    data = json.loads(listed.stdout)
    assert data["namespace_ml"]["hosts"] == ["web-0", "solo-7f9c"], data
    assert data["_meta"]["hostvars"]["solo-7f9c"] == {
        "ansible_connection": "kubectl", "ansible_kubectl_pod": "solo-7f9c",
        "ansible_kubectl_namespace": "ml"}
    every = json.loads(subprocess.run(
        [SCRIPT, "--list"], capture_output=True, text=True, timeout=60, check=True,
        env=dict(env, FLEETCHECK_K8S_SELECTOR="app=vllm,tier!=serve",
                 FLEETCHECK_K8S_NAMESPACE="all")).stdout)
    assert sorted(every["_meta"]["hostvars"]) == ["solo-7f9c.ml", "web-0.batch"], every
    run = run_fleetcheck(tmp_path, SCRIPT, env=dict(env, FLEETCHECK_K8S_SELECTOR="app=vllm"))
    assert [h["name"] for h in run.results["hosts"]] == ["web-0", "solo-7f9c"], run.stdout
    for name in ("web-0", "solo-7f9c"):
        assert_official_image_install(run, name)
    refused = subprocess.run([SCRIPT, "--list"], capture_output=True, text=True, timeout=60,
                             env=dict(env, FLEETCHECK_K8S_SELECTOR="app=vllm",
                                      FLEETCHECK_K8S_CONTEXT="nope"))
    assert refused.returncode != 0 and "context was not found" in refused.stderr


def test_the_docs_carry_the_inventory_script_as_shipped():
    text = open(os.path.join(ROOT, "docs", "kubectl.md"), encoding="utf-8").read()
    block = text.split("```python\n", 1)[1].split("```\n", 1)[0]
    assert block == open(SCRIPT, encoding="utf-8").read()


def write(tmp_path, data) -> str:
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def load(path: str):
    return load_inventory(path, declarations=declarations())


@pytest.mark.parametrize("variables, said", [
    ({"ansible_kubectl_pdo": "web-0"},
     "field 'ansible_kubectl_pdo': unknown variable: did you mean ansible_kubectl_pod?"),
    ({"ansible_kubectl_namepsace": "ml"}, "did you mean ansible_kubectl_namespace?"),
    ({"ansbile_kubectl_container": "vllm"}, "did you mean ansible_kubectl_container?"),
    ({"ansible_kubectl_pod": "--kubeconfig=/etc/x"}, "must not start with '-'"),
    ({"ansible_kubectl_container": "-c"}, "kubectl would read it as an option"),
    ({"ansible_kubectl_extra_args": "-v 2 --token=abc"}, "--token would put a credential on"),
    ({"ansible_kubectl_verify_ssl": ["yes"]}, "must be a boolean"),
    ({"ansible_become": {"yes": 1}}, "must be a boolean"),
    ({"ansible_kubectl_kubeconfig": {"apiVersion": "v1"}}, "inline kubeconfig mapping"),
    ({"ansible_kubectl_extra_args": "--token 'unbalanced"}, "No closing quotation"),
    ({"ansible_kubectl_verify_ssl": "maybe"}, "must be a boolean"),
    ({"ansible_kubectl_local_env_vars": {"A B": "1"}}, "environment variable names"),
    ({"ansible_connection": "kubectll"}, "must be one of kubectl, local, ssh, got 'kubectll'"),
    ({"kubectl_comand": "/usr/bin/kubectl"}, "did you mean kubectl_command?"),
])
def test_declared_kubectl_variables_are_checked_naming_file_host_and_field(tmp_path, variables,
                                                                           said):
    path = write(tmp_path, {"all": {"hosts": {"web-0": dict(variables)}}})
    with pytest.raises(InputError) as raised:
        load(path)
    assert str(raised.value).startswith("%s: host 'web-0': field '%s'" % (
        path, next(iter(variables)))), raised.value
    assert said in str(raised.value)


def test_values_ansible_takes_are_taken(tmp_path):
    """Ansible's full connection names, its empty option defaults, numbers YAML reads
    from a pod name, and env vars as JSON text (as Ansible decodes a string option)."""
    path = write(tmp_path, {"all": {"hosts": {
        "web-0": {"ansible_connection": "kubernetes.core.kubectl", "ansible_kubectl_pod": 12345,
                  "ansible_kubectl_extra_args": "", "ansible_kubectl_namespace": "",
                  "ansible_kubectl_local_env_vars": '{"AWS_PROFILE": "eks"}'},
        "old": {"ansible_connection": "community.kubernetes.kubectl"},
        "box": {"ansible_connection": "ansible.builtin.ssh"},
        "here": {"ansible_connection": "ansible.builtin.local"}}}})
    hosts = {h.name: h for h in load(path)}
    assert {n: h.connection for n, h in hosts.items()} == {
        "web-0": "kubectl", "old": "kubectl", "box": "ssh", "here": "local"}
    assert hosts["web-0"].settings == {"kubectl_pod": "12345",
                                       "kubectl_local_env_vars": {"AWS_PROFILE": "eks"}}


def test_ansibles_k8s_auth_environment_fills_what_the_inventory_leaves_unset(
        tmp_path, monkeypatch):
    from fleetcheck.connectors.base import Deadline
    from fleetcheck.connectors.kubectl import KubectlSession
    path = write(tmp_path, {"all": {"hosts": {"web-0": {
        "ansible_connection": "kubectl", "ansible_kubectl_namespace": "ml"}}}})
    (host,) = load(path)
    monkeypatch.setenv("K8S_AUTH_CONTEXT", "prod-east")
    monkeypatch.setenv("K8S_AUTH_NAMESPACE", "ignored")  # the inventory's namespace wins
    line = KubectlSession(host, "/usr/bin/kubectl", Deadline(5)).exec_line("vllm", "true")
    assert "-n ml " in line and "--context prod-east " in line and "ignored" not in line


def test_kubectl_credentials_set_for_ansible_do_not_stop_other_hosts(tmp_path):
    """An inventory that gives every host Ansible's kubectl token still loads: only a
    kubectl host would use it, and that host is refused when it is checked."""
    path = write(tmp_path, {"all": {"vars": {"ansible_kubectl_token": "abc"},
                                    "hosts": {"box1": {"ansible_host": "10.0.0.1"}}}})
    (host,) = load(path)
    assert host.connection == "ssh" and host.destination == "10.0.0.1"


def test_kubectl_settings_are_read_with_ansibles_names_and_precedence(tmp_path):
    path = write(tmp_path, {"all": {
        "vars": {"ansible_connection": "kubectl", "ansible_kubectl_namespace": "ml",
                 "ansible_kubectl_config": "~/.kube/lab"},
        "hosts": {"web-0": {"ansible_kubectl_extra_args": "--request-timeout 5s -v 2",
                            "ansible_kubectl_validate_certs": "no",
                            "ansible_kubectl_local_env_vars": {"HTTPS_PROXY": "http://p:3128"},
                            "ansible_kubectl_namespace": "serving"}}}})
    (host,) = load(path)
    assert host.connection == "kubectl"
    assert host.settings == {"kubectl_namespace": "serving",
                             "kubectl_kubeconfig": os.path.expanduser("~/.kube/lab"),
                             "kubectl_extra_args": ["--request-timeout", "5s", "-v", "2"],
                             "kubectl_validate_certs": False,
                             "kubectl_local_env_vars": {"HTTPS_PROXY": "http://p:3128"}}
    # the environment variables are the child's environment, not words of its command line
    from fleetcheck.connectors.base import Deadline
    from fleetcheck.connectors.kubectl import KubectlSession
    session = KubectlSession(host, "/usr/bin/kubectl", Deadline(5))
    assert "p:3128" not in session.exec_line("vllm", "true")
    assert session.local.env["HTTPS_PROXY"] == "http://p:3128"


def test_the_packaged_kubectl_example_loads():
    hosts = {h.name: h for h in load(os.path.join(ROOT, "fleetcheck", "examples",
                                                  "k8s-kubectl.yaml"))}
    assert set(hosts) == {"vllm-qwen-deployment-vllm-7d9c5b6f4-x2k8p", "qwen-predictor",
                          "ms-qwen-llm-d-modelservice-decode-0",
                          "ms-qwen-llm-d-modelservice-prefill-0"}
    assert {h.connection for h in hosts.values()} == {"kubectl"}
    kserve = hosts["qwen-predictor"]
    assert kserve.venv == "/kserve-workspace/prod_venv" and kserve.settings == {
        "kubectl_context": "prod-us-east", "kubectl_namespace": "kserve-test",
        "kubectl_container": "kserve-container",
        "kubectl_pod": "qwen-predictor-00001-deployment-6b7c8d9f5-q7w2e"}
    assert "kubectl_container" not in hosts["ms-qwen-llm-d-modelservice-decode-0"].settings


def test_a_name_two_connections_declare_for_different_settings_is_refused(tmp_path):
    builtin = declarations()
    clash = Declarations(builtin.connections + ("mine",), builtin.variables + (
        Variable("mine_pod", ("ansible_kubectl_pod",)),))
    path = write(tmp_path, {"all": {"hosts": {"web-0": {}}}})
    with pytest.raises(InputError, match="field 'ansible_kubectl_pod': is declared twice, for "
                                         "settings kubectl_pod and mine_pod"):
        load_inventory(path, declarations=clash)
