"""How to reach one host and run the probe there: the value connectors and the wire
protocol are given, built from the inventory's host (`inventory.Host.connection_settings`).
They read these fields and never the inventory, so a connector (built in or a package's)
depends on this value alone, and the inventory stays free to change its own model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleetcheck.addresses import Route


@dataclass(frozen=True)
class ConnectionSettings:
    """One host's connection, as the inventory resolved it. A setting the inventory does
    not give is None: the connector fills it (ssh_config, then its default)."""

    name: str
    connection: str = "ssh"
    address: str | None = None  # ansible_host; None: the name is what ssh is given
    port: int | None = None
    user: str | None = None
    key: str | None = None
    proxy_jump: Route | None = None  # (): `none`, no bastion whatever ssh_config says
    interpreter: str = "python3"  # the Python the probe runs under on the host
    become: bool = False
    become_user: str | None = None
    container: str | None = None  # a name or id on the box, [NAMESPACE/]POD/CONTAINER, "auto"
    container_engine: str | None = None
    container_user: str | None = None
    containerd_namespace: str | None = None
    containerd_address: str | None = None
    # what a connection's declared variables set beyond these (ansible_kubectl_pod ->
    # settings["kubectl_pod"]); a package's connection finds its own here
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def destination(self) -> str:
        """The name ssh is given for this host (as Ansible runs `ssh <ansible_host>`),
        and the address results show."""
        return self.address or self.name
