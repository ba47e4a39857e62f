"""Ways to reach a host, one module per inventory `connection:` value (ssh, local), and
the container connector that wraps any of them. A module is a connection when it defines
a Connector subclass whose `connection` names it; the registry finds it by that name, so
adding a connection is one new file here."""

from __future__ import annotations

import importlib
import os
import pkgutil
import threading
from functools import lru_cache
from typing import Any

from fleetcheck.connectors.base import Connector

# modules of this package that are parts of every connector, not connections
HELPERS = ("base", "dialogue", "container")


@lru_cache(maxsize=1)
def connection_names() -> tuple[str, ...]:
    """The inventory's accepted `connection:` values: one per connector module (found
    without importing them, so validating an inventory imports no SSH library)."""
    directory = os.path.dirname(__file__)
    return tuple(sorted(m.name for m in pkgutil.iter_modules([directory])
                        if m.name not in HELPERS and not m.name.startswith("_")))


def connector_class(connection: str) -> type[Connector]:
    module = importlib.import_module("fleetcheck.connectors." + connection)
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, Connector) and \
                value.connection == connection:
            return value
    raise LookupError("fleetcheck.connectors.%s defines no Connector for %r"
                      % (connection, connection))


class Registry:
    """Connectors of one run, built once per connection kind from the run's settings
    (each connector takes what it needs from them)."""

    def __init__(self, settings: Any):
        self.settings = settings
        self._made: dict[tuple[str, str | None], Connector] = {}
        self._lock = threading.Lock()

    def for_host(self, host: Any) -> Connector:
        key = (host.connection, "container" if getattr(host, "container", None) else None)
        with self._lock:
            return self._connector(key)

    def _connector(self, key: tuple[str, str | None]) -> Connector:
        connector = self._made.get(key)
        if connector is None:
            connector = connector_class(key[0])(self.settings)
            if key[1]:
                from fleetcheck.connectors.container import ContainerConnector
                connector = ContainerConnector(connector)
            self._made[key] = connector
        return connector
