"""Ways to reach a host, one per inventory `connection:` value, registered in the
entry-point group `fleetcheck.connectors` (`NAME = "module:ConnectorClass"`), so an
installed package can add one; and the container connector that wraps any of them.

A connection is one module: a Connector subclass whose `connection` is its name, and a
module-level VARIABLES tuple (fleetcheck.variables.Variable) declaring the inventory
variables it reads. declarations() collects those for the inventory by importing the
modules only, never the classes' libraries (ssh's paramiko waits in ssh_transport).
"""

from __future__ import annotations

import importlib
import threading
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from fleetcheck.connection_settings import ConnectionSettings
from fleetcheck.connectors.base import Connector
from fleetcheck.input_error import InputError
from fleetcheck.variables import Declarations, Variable

GROUP = "fleetcheck.connectors"
# The built-ins, registered in pyproject.toml's group too; known here as well so a source
# checkout run without installed metadata (PYTHONPATH=...) has them. An installed entry
# point of the same name takes the built-in's place.
BUILT_INS = {
    "kubectl": "fleetcheck.connectors.kubectl:KubectlConnector",
    "local": "fleetcheck.connectors.local:LocalConnector",
    "ssh": "fleetcheck.connectors.ssh:SshConnector",
}
# modules whose variables every connection takes: the container wrapper's
WRAPPERS = ("fleetcheck.connectors.container",)


@lru_cache(maxsize=1)
def registered() -> dict[str, EntryPoint]:
    """Each connection's entry point, by name; nothing is imported."""
    found = {name: EntryPoint(name, value, GROUP) for name, value in BUILT_INS.items()}
    for ep in entry_points(group=GROUP):
        # fleetcheck's own entries are the built-ins; another package's, of any name, win
        # whatever order the distributions come in on sys.path
        if getattr(ep.dist, "name", None) != "fleetcheck":
            found[ep.name] = ep
    return dict(sorted(found.items()))


def connection_names() -> tuple[str, ...]:
    """The inventory's accepted `connection:` values."""
    return tuple(registered())


def module_variables(module_name: str, label: str) -> tuple[Variable, ...]:
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a third-party package's failure, said as its own
        raise InputError(label, None, None, "cannot import %s: %s: %s"
                         % (module_name, type(exc).__name__, exc))
    variables = getattr(module, "VARIABLES", ())
    if not isinstance(variables, tuple) or not all(isinstance(v, Variable) for v in variables):
        raise InputError(label, None, None, "%s.VARIABLES must be a tuple of "
                         "fleetcheck.variables.Variable" % module_name)
    return variables


@lru_cache(maxsize=1)
def declarations() -> Declarations:
    """Every connection's name and every variable the connections and the container
    wrapper declare, for the inventory."""
    variables: list[Variable] = []
    for name, ep in registered().items():
        variables += module_variables(ep.module, entry_point_label(name, ep))
    for module_name in WRAPPERS:
        variables += module_variables(module_name, module_name)
    return Declarations(connection_names(), tuple(dict.fromkeys(variables)))


def entry_point_label(name: str, ep: EntryPoint) -> str:
    """An entry point as a user finds it: its group, name, target and the package that
    installed it (the one to fix or uninstall)."""
    package = getattr(ep.dist, "name", None)
    return "entry point %s %s = %s%s" % (GROUP, name, ep.value,
                                         " (package %s)" % package if package else "")


def check_connections(names: list[str]) -> None:
    """Load the connectors a run will use, before it connects: a package's connector that
    does not import or is no Connector is bad input (exit 2) naming its entry point, not
    every host's fleetcheck bug."""
    for name in names:
        try:
            connector_class(name)
        except Exception as exc:
            raise InputError(entry_point_label(name, registered()[name]), None, None,
                             "cannot be used as the %r connection: %s: %s"
                             % (name, type(exc).__name__, exc))


def connector_class(connection: str) -> type[Connector]:
    ep = registered()[connection]
    value = ep.load()
    if not (isinstance(value, type) and issubclass(value, Connector)
            and value.connection == connection):
        raise LookupError("entry point %s %s = %s is not a Connector whose connection is %r"
                          % (GROUP, connection, ep.value, connection))
    return value


class Registry:
    """Connectors of one run, built once per connection kind from the run's settings
    (each connector takes what it needs from them)."""

    def __init__(self, settings: Any):
        self.settings = settings
        self._made: dict[tuple[str, str | None], Connector] = {}
        self._lock = threading.Lock()

    def for_host(self, host: ConnectionSettings) -> Connector:
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
