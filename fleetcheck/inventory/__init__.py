"""Host inventories as operators already have them (Ansible's formats, layout and
precedence), read into fleetcheck Hosts. `hosts` is the entry point; the other modules
are its parts: one per source format, the model they fill, templates, patterns."""

from fleetcheck.inventory.hosts import (Host, Inventory, apply_limit, host_from_vars,
                                        load_inventory, read_inventory)
from fleetcheck.addresses import JumpHop, Route, parse_route

__all__ = ["Host", "Inventory", "JumpHop", "Route", "apply_limit", "host_from_vars",
           "load_inventory", "parse_route", "read_inventory"]
