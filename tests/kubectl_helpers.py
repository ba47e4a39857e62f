"""The kubectl stand-in (tests/kubectl_standin) and a kubeconfig it reads."""

from __future__ import annotations

import json
import os

from fleet_helpers import ROOT

STANDIN = os.path.join(ROOT, "tests", "kubectl_standin")
USER = "system:serviceaccount:ci:fleetcheck"


def kubeconfig(path) -> str:
    """A kubeconfig as kubectl reads it (JSON is YAML), two contexts."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "lab",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": USER, "user": {}}],
        "contexts": [{"name": "lab", "context": {"cluster": "c", "user": USER,
                                                 "namespace": "ml"}},
                     {"name": "prod", "context": {"cluster": "c", "user": USER}}]}))
    return str(path)
