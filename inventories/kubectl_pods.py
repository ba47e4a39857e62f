#!/usr/bin/env python3
"""An Ansible dynamic inventory of Kubernetes pods, for `connection: kubectl`: every running
pod matching a label selector, as `kubectl get pods -l SELECTOR -o json` lists them.

    FLEETCHECK_K8S_SELECTOR=app.kubernetes.io/name=vllm \\
    FLEETCHECK_K8S_NAMESPACE=ml fleetcheck run -i inventories/kubectl_pods.py

Settings (environment): FLEETCHECK_K8S_SELECTOR (required), FLEETCHECK_K8S_NAMESPACE
(default: the context's; `all` for every namespace), FLEETCHECK_K8S_CONTEXT,
FLEETCHECK_K8S_CONTAINER (the container to check in every pod; default: the one serving
vLLM), KUBECONFIG as kubectl reads it. Hosts are named by pod (POD.NAMESPACE across all
namespaces) and grouped by namespace. Standard library only.
"""

import json
import os
import subprocess
import sys


def kubectl_pods(selector: str, namespace: str, context: str) -> list:
    command = ["kubectl", "get", "pods", "-l", selector, "-o", "json"]
    command += ["-A"] if namespace == "all" else (["-n", namespace] if namespace else [])
    command += ["--context", context] if context else []
    proc = subprocess.run(command, capture_output=True, text=True, timeout=25)
    if proc.returncode != 0:
        sys.exit("kubectl get pods failed (exit %d): %s" % (proc.returncode,
                                                            proc.stderr.strip()))
    return json.loads(proc.stdout)["items"]


def inventory() -> dict:
    selector = os.environ.get("FLEETCHECK_K8S_SELECTOR", "")
    if not selector:
        sys.exit("set FLEETCHECK_K8S_SELECTOR to a label selector, e.g. app=vllm")
    namespace = os.environ.get("FLEETCHECK_K8S_NAMESPACE", "")
    context = os.environ.get("FLEETCHECK_K8S_CONTEXT", "")
    container = os.environ.get("FLEETCHECK_K8S_CONTAINER", "")
    groups: dict = {}
    hostvars: dict = {}
    for pod in kubectl_pods(selector, namespace, context):
        if pod.get("status", {}).get("phase") != "Running":
            continue
        name, pod_namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
        host = "%s.%s" % (name, pod_namespace) if namespace == "all" else name
        hostvars[host] = {"ansible_connection": "kubectl", "ansible_kubectl_pod": name,
                          "ansible_kubectl_namespace": pod_namespace}
        if context:
            hostvars[host]["ansible_kubectl_context"] = context
        if container:
            hostvars[host]["ansible_kubectl_container"] = container
        group = "namespace_" + pod_namespace.replace("-", "_")
        groups.setdefault(group, {"hosts": []})["hosts"].append(host)
    return {**groups, "all": {"children": sorted(groups)}, "_meta": {"hostvars": hostvars}}


if __name__ == "__main__":
    if sys.argv[1:] == ["--list"]:
        print(json.dumps(inventory(), indent=2))
    elif sys.argv[1:2] == ["--host"]:
        print(json.dumps(inventory()["_meta"]["hostvars"].get(sys.argv[2], {})))
    else:
        sys.exit("usage: %s --list | --host NAME" % sys.argv[0])
