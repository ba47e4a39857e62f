"""`connection: kubectl`: the probe runs in a Kubernetes pod through `kubectl exec -i` on
this machine, with the variables and command line of Ansible's kubernetes.core.kubectl
connection, so an inventory written for it works unchanged:

    kubectl [-n NS] [--kubeconfig F] [--context C] [--server ...] [EXTRA ARGS]
            exec -i POD -c CONTAINER -- sh -c '<command>'

The pod is ansible_kubectl_pod, else the host's ansible_host, else its inventory name (as
Ansible's remote_addr). With no container named and several in the pod, the one whose
processes include a vLLM server is chosen: `kubectl get pod -o json` lists them, and a
`cat` of /proc/*/cmdline in each tells which one serves.

The command runs through the local connection's session (its dialogue, caps, deadline
and cancel); kubectl's own failures (no such pod, forbidden, no context) are host errors
of kind `container` quoting kubectl.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import threading
from typing import Any

from fleetcheck.connection_settings import ConnectionSettings
from fleetcheck.connectors.base import (Answerer, CommandResult, Connector, Deadline, EngineLog,
                                        Session,
                                        Target, TransportError)
from fleetcheck.connectors.container import (INSIDE, TAIL_LINES, looks_like_vllm_server,
                                             quote_text)
from fleetcheck.connectors.local import LocalSession
from fleetcheck.variables import Check, Variable, boolean, path, string_mapping, text

SECRET_ON_COMMAND_LINE = ("would put a credential on kubectl's command line, where any user "
                          "of this machine sees it in `ps`: put it in a kubeconfig "
                          "(ansible_kubectl_kubeconfig) instead")
CREDENTIAL_FLAGS = ("--token", "--password", "--username")
# how kubectl's own failures begin (the API server's, its config's), unlike a container
# that has no sh or cat
KUBECTL_REFUSED = re.compile(rb"^(Error from server|error: |Error in configuration|Unable to "
                             rb"connect to the server|Unauthorized)", re.M)
# each process's command line, one a line (arguments NUL-separated): cheap in any image
PROCESS_LISTING = 'for f in /proc/[0-9]*/cmdline; do cat "$f"; echo; done 2>/dev/null'


def env_mapping(value: Any) -> dict[str, str]:
    """A mapping, or the JSON text of one (Ansible decodes a string option as JSON)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError("must be a mapping of environment variable names to values "
                             "(or its JSON text), got %r" % value)
    return string_mapping(value)


def kubeconfig(value: Any) -> str:
    if isinstance(value, dict):
        raise ValueError("an inline kubeconfig mapping is not supported: give the path of "
                         "a kubeconfig file")
    return os.path.expanduser(text(value))  # kubectl itself takes `~` literally


def unset_when_empty(check: Check) -> Check:
    """Ansible's kubectl options default to "": an empty value (a template that renders
    to nothing) leaves the option unset rather than refused."""
    def checked(value: Any) -> Any:
        return None if value == "" or value is None else check(value)
    return checked


def argument_list(value: Any) -> list[str]:
    """Extra kubectl arguments, split as a shell splits them (Ansible splits on spaces;
    the two agree wherever no argument holds a quoted space). A credential among them is
    refused, as the variables for one are."""
    args = shlex.split(text(value))
    for arg in args:
        if arg.split("=", 1)[0] in CREDENTIAL_FLAGS:
            raise ValueError("%s %s" % (arg.split("=", 1)[0], SECRET_ON_COMMAND_LINE))
    return args


def kube_name(value: Any) -> str:
    """A pod, container, namespace or context: never one kubectl would take for a flag
    (a number, as YAML reads `12345`, is its digits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    value = text(value)
    if value.startswith("-"):
        raise ValueError("must not start with '-' (kubectl would read it as an option), "
                         "got %r" % value)
    return value


# Ansible's kubernetes.core.kubectl options, by the variable names it reads
VARIABLES = (
    Variable("kubectl_pod", ("ansible_kubectl_pod",), unset_when_empty(kube_name)),
    Variable("kubectl_container", ("ansible_kubectl_container",), unset_when_empty(kube_name)),
    Variable("kubectl_namespace", ("ansible_kubectl_namespace",), unset_when_empty(kube_name)),
    Variable("kubectl_context", ("ansible_kubectl_context",), unset_when_empty(kube_name)),
    Variable("kubectl_kubeconfig", ("ansible_kubectl_kubeconfig", "ansible_kubectl_config"),
             unset_when_empty(kubeconfig)),
    Variable("kubectl_extra_args", ("ansible_kubectl_extra_args",),
             unset_when_empty(argument_list)),
    Variable("kubectl_server", ("ansible_kubectl_host", "ansible_kubectl_server"),
             unset_when_empty(text)),
    Variable("kubectl_client_cert", ("ansible_kubectl_cert_file",
                                     "ansible_kubectl_client_cert"), unset_when_empty(text)),
    Variable("kubectl_client_key", ("ansible_kubectl_key_file", "ansible_kubectl_client_key"),
             unset_when_empty(text)),
    Variable("kubectl_ca_cert", ("ansible_kubectl_ssl_ca_cert", "ansible_kubectl_ca_cert"),
             unset_when_empty(text)),
    Variable("kubectl_validate_certs", ("ansible_kubectl_verify_ssl",
                                        "ansible_kubectl_validate_certs"), boolean),
    Variable("kubectl_local_env_vars", ("ansible_kubectl_local_env_vars",),
             unset_when_empty(env_mapping)),
    # read, so an inventory that sets them for Ansible still loads, but refused on each
    # kubectl host that would use them (open, below): other hosts never look at them
    Variable("kubectl_username", ("ansible_kubectl_username", "ansible_kubectl_user"),
             unset_when_empty(text)),
    Variable("kubectl_password", ("ansible_kubectl_password",), unset_when_empty(text)),
    Variable("kubectl_token", ("ansible_kubectl_token", "ansible_kubectl_api_key"),
             unset_when_empty(text)),
    # fleetcheck's own: the kubectl to run, when not the one on PATH
    Variable("kubectl_command", ("kubectl_command",), path),
)
CREDENTIALS = ("kubectl_username", "kubectl_password", "kubectl_token")
NAMES = {variable.setting: variable.names for variable in VARIABLES}
# Ansible's kubectl connection takes an option the inventory leaves unset from these
# environment variables of the controller (AWX's Kubernetes credential sets them)
ENVIRONMENT = (("kubectl_kubeconfig", "K8S_AUTH_KUBECONFIG"),
               ("kubectl_context", "K8S_AUTH_CONTEXT"),
               ("kubectl_namespace", "K8S_AUTH_NAMESPACE"),
               ("kubectl_server", "K8S_AUTH_HOST"),
               ("kubectl_client_cert", "K8S_AUTH_CERT_FILE"),
               ("kubectl_client_key", "K8S_AUTH_KEY_FILE"),
               ("kubectl_ca_cert", "K8S_AUTH_SSL_CA_CERT"),
               ("kubectl_token", "K8S_AUTH_TOKEN"),
               ("kubectl_username", "K8S_AUTH_USERNAME"),
               ("kubectl_password", "K8S_AUTH_PASSWORD"))


def with_environment(settings: dict[str, Any]) -> dict[str, Any]:
    """The host's kubectl settings, each unset one from its K8S_AUTH_* variable."""
    merged = dict(settings)
    for setting, variable in ENVIRONMENT:
        if not merged.get(setting) and os.environ.get(variable):
            merged[setting] = os.environ[variable]
    if "kubectl_validate_certs" not in merged and os.environ.get("K8S_AUTH_VERIFY_SSL"):
        try:
            merged["kubectl_validate_certs"] = boolean(os.environ["K8S_AUTH_VERIFY_SSL"])
        except ValueError:
            pass  # not a boolean: kubectl verifies, as when it is unset
    return merged


# setting -> kubectl's global flag, in Ansible's order
FLAGS = (("kubectl_namespace", "-n"), ("kubectl_kubeconfig", "--kubeconfig"),
         ("kubectl_context", "--context"), ("kubectl_server", "--server"),
         ("kubectl_client_cert", "--client-certificate"),
         ("kubectl_client_key", "--client-key"), ("kubectl_ca_cert", "--certificate-authority"))


def global_arguments(settings: dict[str, Any]) -> list[str]:
    """kubectl's arguments before the subcommand: which cluster, as whom, which namespace."""
    args: list[str] = []
    for setting, flag in FLAGS:
        if settings.get(setting):
            args += [flag, settings[setting]]
    if "kubectl_validate_certs" in settings:
        args.append("--insecure-skip-tls-verify=%s"
                    % str(not settings["kubectl_validate_certs"]).lower())
    return args + list(settings.get("kubectl_extra_args") or [])


class KubectlSession(Session):
    """Commands run in one pod's container, each as one kubectl child of this machine."""

    reads_engine_log = True

    def __init__(self, host: ConnectionSettings, kubectl: str, deadline: Deadline):
        self.settings: dict[str, Any] = with_environment(host.settings)
        self.pod: str = self.settings.get("kubectl_pod") or host.address or host.name
        self.container: str | None = self.settings.get("kubectl_container")
        self.kubectl = kubectl
        # ansible_kubectl_local_env_vars reach kubectl through its environment, never its
        # command line (they often hold cloud credentials for an exec auth plugin)
        self.local = LocalSession(deadline, self.settings.get("kubectl_local_env_vars"))

    def where(self) -> str:
        parts = ["pod %s" % self.pod]
        if self.container:
            parts.append("container %s" % self.container)
        for setting in ("kubectl_namespace", "kubectl_context"):
            if self.settings.get(setting):
                parts.append("%s %s" % (setting[len("kubectl_"):], self.settings[setting]))
        return ", ".join(parts)

    def kubectl_line(self, *args: str) -> str:
        """The shell line running kubectl with its global arguments and then args."""
        argv = [self.kubectl] + global_arguments(self.settings) + list(args)
        return "exec " + " ".join(shlex.quote(arg) for arg in argv)

    def exec_line(self, container: str | None, command: str) -> str:
        inside = "printf %s >&2; %s" % (shlex.quote(INSIDE.decode()[:-1] + "\\n"), command)
        chosen = ["-c", container] if container else []
        return self.kubectl_line("exec", "-i", self.pod, *chosen, "--", "sh", "-c", inside)

    def run(self, command: str, payload: bytes, cancel: threading.Event | None = None,
            answer: Answerer | None = None) -> CommandResult:
        result = self.local.run(self.exec_line(self.container, command), payload, cancel,
                                answer)
        start = result.stderr.find(INSIDE)
        if start < 0:  # kubectl's words, never the command's
            raise TransportError("container", "%s: kubectl could not run the probe (exit %d): "
                                 "%s" % (self.where(), result.exit_status,
                                         quote_text(result.stderr)))
        return CommandResult(result.stdout, result.stderr[start + len(INSIDE):],
                             result.exit_status)

    def choose_container(self, cancel: threading.Event | None) -> None:
        """With no container named: the pod's only one, or the one serving vLLM."""
        if self.container:
            return
        names = self.containers(cancel)
        if len(names) == 1:
            self.container = names[0]
            return
        serving = [name for name in names if self.serves_vllm(name, cancel)]
        if len(serving) == 1:
            self.container = serving[0]
            return
        if serving:
            problem = "containers %s run vLLM servers" % ", ".join(serving)
        else:
            problem = "none of its containers (%s) runs a vLLM server" % ", ".join(names)
        raise TransportError("container", "%s: %s; set ansible_kubectl_container to the one "
                             "to check" % (self.where(), problem))

    def containers(self, cancel: threading.Event | None) -> list[str]:
        result = self.local.run(self.kubectl_line("get", "pod", self.pod, "-o", "json"), b"",
                                cancel)
        if result.exit_status != 0:
            raise TransportError("container", "%s: kubectl could not read the pod (exit %d): "
                                 "%s" % (self.where(), result.exit_status,
                                         quote_text(result.stderr)))
        try:
            spec = json.loads(result.stdout)["spec"]
            names = [str(c["name"]) for c in spec["containers"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise TransportError("container", "%s: `kubectl get pod -o json` gave no container "
                                 "list (%s): %s" % (self.where(), exc, quote_text(result.stdout)))
        if not names:
            raise TransportError("container", "%s: the pod lists no containers" % self.where())
        return names

    def serves_vllm(self, container: str, cancel: threading.Event | None) -> bool:
        """A container without sh or cat (a distroless sidecar) serves nothing we probe."""
        result = self.local.run(self.exec_line(container, PROCESS_LISTING), b"", cancel)
        if INSIDE not in result.stderr:
            if KUBECTL_REFUSED.search(result.stderr):  # kubectl's own error, not the image's
                raise TransportError("container", "%s: kubectl could not exec into container "
                                     "%s (exit %d): %s" % (self.where(), container,
                                                          result.exit_status,
                                                          quote_text(result.stderr)))
            return False
        lines = result.stdout.decode("utf-8", "replace").split("\n")
        return any(looks_like_vllm_server(line.replace("\0", " ")) for line in lines)

    def engine_log(self, head_bytes: int, tail_bytes: int,
                   cancel: threading.Event | None = None) -> EngineLog | None:
        """`kubectl logs` of the container checked: its head (--limit-bytes) and, when the
        log is longer, its last lines (--tail), cut to tail_bytes."""
        if not self.container:
            return None
        source = "kubectl logs %s -c %s" % (self.pod, self.container)
        head = self.local.run(self.kubectl_line(
            "logs", self.pod, "-c", self.container, "--limit-bytes=%d" % (head_bytes + 1)),
            b"", cancel)
        if head.exit_status != 0:
            return EngineLog(source, b"", None, "exit %d: %s" % (head.exit_status,
                                                                 quote_text(head.stderr)))
        if len(head.stdout) <= head_bytes:
            return EngineLog(source, head.stdout, None)
        try:  # kubectl bounds the tail by lines only: a flood past the output cap is an error
            tail = self.local.run(self.kubectl_line(
                "logs", self.pod, "-c", self.container, "--tail=%d" % TAIL_LINES), b"", cancel)
        except TransportError:
            return EngineLog(source, head.stdout[:head_bytes], b"")  # the head, still read
        return EngineLog(source, head.stdout[:head_bytes],
                         tail.stdout[-tail_bytes:] if tail.exit_status == 0 else b"")

    def placement(self) -> dict[str, str] | None:
        """The pod and container checked, for the results: the inventory name may be a
        Service-like prefix (KServe's `qwen-predictor`) of the pod that really ran it."""
        place = {"engine": "kubectl", "k8s_pod": self.pod}
        for key, value in (("k8s_container", self.container),
                           ("k8s_namespace", self.settings.get("kubectl_namespace")),
                           ("kubectl_context", self.settings.get("kubectl_context"))):
            if value:
                place[key] = value
        return place

    def close(self) -> None:
        self.local.close()


class KubectlConnector(Connector):
    connection = "kubectl"

    def open(self, host: ConnectionSettings, deadline: Deadline,
             cancel: threading.Event | None = None) -> Session:
        deadline.left()
        if host.container:  # the engine wrapper would look for docker inside the pod
            raise TransportError("container", "host %s: `container` names a container of an "
                                 "engine on a box; in a pod, set ansible_kubectl_container"
                                 % host.name)
        command = host.settings.get("kubectl_command") or "kubectl"
        kubectl = shutil.which(os.path.expanduser(command))
        if kubectl is None and os.path.isfile(os.path.expanduser(command)):
            raise TransportError("container", "host %s: %s is not executable on this machine"
                                 % (host.name, command))
        if kubectl is None:
            raise TransportError("container", "host %s: %s not found on this machine%s" % (
                host.name, command, "'s PATH" if "/" not in command else ""))
        session = KubectlSession(host, kubectl, deadline)  # starts nothing yet
        for setting in CREDENTIALS:
            if session.settings.get(setting):
                raise TransportError("container", "host %s: %s is not supported: it %s" % (
                    host.name, " / ".join(NAMES[setting]), SECRET_ON_COMMAND_LINE))
        if session.pod.startswith("-"):
            raise TransportError("container", "host %s: pod %r starts with '-', which "
                                 "kubectl would read as an option: set ansible_kubectl_pod"
                                 % (host.name, session.pod))
        return session

    def targets(self, host: ConnectionSettings, session: Session, deadline: Deadline,
                cancel: threading.Event | None = None) -> list[Target]:
        assert isinstance(session, KubectlSession)
        session.choose_container(cancel)
        return [Target(host.name, session)]
