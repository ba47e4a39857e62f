"""deploy/kubernetes/ against Kubernetes' own schemas, offline (kubernetes-validate ships
them), and against fleetcheck itself: the arguments the DaemonSet and NPD's plugin pass
are ones `fleetcheck node` takes, the playbook ConfigMap is the packaged playbook, and the
privileges are the ones docs/kubernetes.md names."""

from __future__ import annotations

import glob
import json
import os

import kubernetes_validate
import pytest
import yaml

from fleetcheck.cli import build_parser

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOY = os.path.join(ROOT, "deploy", "kubernetes")
MANIFESTS = sorted(glob.glob(os.path.join(DEPLOY, "*.yaml")))


def documents(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [d for d in yaml.safe_load_all(handle) if d is not None]


def resources() -> dict[str, dict]:
    return {"%s/%s" % (d["kind"], d["metadata"]["name"]): d
            for path in MANIFESTS for d in documents(path)}


@pytest.mark.parametrize("path", MANIFESTS, ids=os.path.basename)
def test_every_manifest_is_valid_against_kubernetes_schemas(path):
    found = documents(path)
    assert found
    for document in found:
        # strict: a field Kubernetes does not know (a typo) is an error, not ignored
        kubernetes_validate.validate(document, kubernetes_validate.latest_version(),
                                     strict=True)


def test_a_misspelt_field_is_caught():
    daemonset = resources()["DaemonSet/fleetcheck-node"]
    daemonset["spec"]["template"]["spec"]["hostPid"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, kubernetes_validate.latest_version(),
                                     strict=True)


def test_the_daemonset_runs_fleetcheck_node_with_least_privilege():
    found = resources()
    pod = found["DaemonSet/fleetcheck-node"]["spec"]["template"]["spec"]
    assert pod["hostPID"] is True and pod["automountServiceAccountToken"] is False
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert not pod.get("hostNetwork") and not pod.get("hostIPC")
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"], "add": [
        "SYS_PTRACE", "SYS_CHROOT", "DAC_READ_SEARCH", "SETUID", "SETGID"]}
    assert security["privileged"] is False and security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    args = build_parser().parse_args(container["args"])
    assert args.command == "node" and args.every == 300
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    for path in (args.json_path, args.textfile, args.playbook):
        directory = os.path.dirname(path)
        assert directory in mounts, path
    assert volumes[mounts[os.path.dirname(args.textfile)]]["hostPath"]["path"] == \
        "/var/lib/node-exporter/textfile"
    assert volumes[mounts["/etc/fleetcheck"]]["configMap"]["name"] == "fleetcheck-playbook"
    readonly = {m["mountPath"] for m in container["volumeMounts"] if m.get("readOnly")}
    assert {"/etc/fleetcheck", args.pod_logs, "/var/log/pods"} <= readonly
    for path in (args.pod_logs, "/var/log/pods"):  # kubelet's links point into /var/log/pods
        assert volumes[mounts[path]]["hostPath"]["path"] == path
    namespace = found["Namespace/fleetcheck"]["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "privileged"


def test_the_playbook_configmap_is_the_packaged_playbook():
    data = resources()["ConfigMap/fleetcheck-playbook"]["data"]
    with open(os.path.join(ROOT, "fleetcheck", "playbooks", "dflash.yaml"),
              encoding="utf-8") as handle:
        assert data == {"dflash.yaml": handle.read()}


def test_the_npd_plugin_config_runs_the_plugin_mode_on_the_agents_json():
    with open(os.path.join(DEPLOY, "npd", "fleetcheck-plugin-monitor.json"),
              encoding="utf-8") as handle:
        text = handle.read()
    assert resources()["ConfigMap/fleetcheck-npd-plugin"]["data"] == {
        "fleetcheck-plugin-monitor.json": text}
    config = json.loads(text)
    assert config["plugin"] == "custom"
    assert config["pluginConfig"]["max_output_length"] == 80
    assert config["pluginConfig"]["timeout"] == "5s"
    (rule,) = config["rules"]
    assert rule["condition"] in {c["type"] for c in config["conditions"]}
    args = build_parser().parse_args(rule["args"])
    assert args.npd and args.json_path == "/var/lib/fleetcheck/node.json"
    daemonset = resources()["DaemonSet/fleetcheck-node"]["spec"]["template"]["spec"]
    assert build_parser().parse_args(daemonset["containers"][0]["args"]).json_path == \
        args.json_path


def test_the_alerting_rules_use_the_series_fleetcheck_writes():
    """docs/kubernetes.md's rule examples: Prometheus' rule-file shape, and every
    fleetcheck_* name in their expressions is one the metrics writer emits."""
    import re

    from fleetcheck.report.metrics import metrics_text
    from results_factory import make_run
    with open(os.path.join(ROOT, "docs", "kubernetes.md"), encoding="utf-8") as handle:
        page = handle.read()
    block = re.search(r"### Alerting rules\n+```yaml\n(.*?)\n```", page, re.S)
    assert block, "no rules block"
    rules = [rule for group in yaml.safe_load(block.group(1))["groups"]
             for rule in group["rules"]]
    assert {"FleetcheckCheckFails", "FleetcheckBuildsDiffer", "FleetcheckStale"} <= \
        {rule["alert"] for rule in rules}
    written = set(re.findall(r"^(fleetcheck_\w+)[{ ]", metrics_text(make_run(12)), re.M))
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        used = set(re.findall(r"fleetcheck_\w+", rule["expr"]))
        assert used and used <= written, (rule["alert"], used - written)
