"""Jinja templates in the inventory variables fleetcheck uses (`ansible_host: "{{
inventory_hostname }}.dc1.example"`, `venv: "{{ env_root }}/ml-env"`), evaluated as Ansible
would for that host: with the host's own merged variables, `inventory_hostname`,
`inventory_hostname_short` and `group_names`, in a sandbox, an undefined name being an
error. Only Jinja's own filters exist here, not Ansible's; a template that needs one is
an input error that says so. Variables fleetcheck does not use are never evaluated.
"""

from __future__ import annotations

from typing import Any

from fleetcheck.input_error import InputError
from fleetcheck.inventory.model import Site

MAX_PASSES = 10  # a variable whose value is a template of another template, and so on


def is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def render(value: str, context: dict[str, Any], site: Site, name: str) -> Any:
    from jinja2 import StrictUndefined, TemplateError
    from jinja2.sandbox import SandboxedEnvironment

    environment = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True)
    text = value
    for _ in range(MAX_PASSES):
        try:
            text = environment.from_string(text).render(context)
        except TemplateError as exc:
            raise InputError(site.source, site.where, name, "cannot evaluate the template %r: "
                             "%s (fleetcheck knows the host's variables, inventory_hostname "
                             "and group_names, and Jinja's own filters, not Ansible's)"
                             % (value, exc))
        if not is_template(text):
            return text
    raise InputError(site.source, site.where, name, "the template %r still is a template "
                     "after %d evaluations (does it refer to itself?)" % (value, MAX_PASSES))


def host_context(host: str, values: dict[str, Any], groups: list[str]) -> dict[str, Any]:
    """What a template sees for one host, as in Ansible's hostvars (its magic variables
    beat inventory variables of the same name)."""
    context = dict(values)
    context.update(inventory_hostname=host, inventory_hostname_short=host.split(".")[0],
                   group_names=groups)
    return context
