"""Smoke-load settings (playbook `smoke:`, per-host `smoke:` overrides in the inventory)
and the per-host plan sent to the probe: URL, load shape, and for launch mode the server
command rendered with jinja2, every substituted value shell-quoted."""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import asdict, dataclass, field, fields, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, StrictUndefined, TemplateError

from fleetcheck.input_error import InputError
from fleetcheck.text import is_int, is_number

if TYPE_CHECKING:
    from fleetcheck.inventory import Host

PROMPT_SET = os.path.join(os.path.dirname(__file__), "prompts", "smoke-v1.json")
DEFAULT_COMMAND = ("{{ venv }}/bin/vllm serve {{ model }} --port {{ port }} "
                   "--speculative-config {{ spec | tojson }}")


@dataclass
class SmokeSettings:
    """Defaults fail the incident's ~1.1% acceptance and pass a healthy DFlash drafter
    (acceptance ~25-45%, mean acceptance length ~4-6.5 at 15 speculative tokens)."""

    enabled: bool = False
    mode: str = "attach"
    requests: int = 8
    concurrency: int = 2
    max_tokens: int = 128
    time_budget_s: float = 120.0
    min_acceptance_rate: float = 0.10
    min_mean_acceptance_length: float = 2.0
    fleet_median_ratio: float = 0.6
    collapse_after_position: int = 4
    collapse_below: float = 0.02
    command: str = DEFAULT_COMMAND
    model: str = "Qwen/Qwen3.6-27B"
    port: int = 8000
    spec: dict[str, Any] = field(default_factory=lambda: {
        "method": "dflash", "model": "z-lab/Qwen3.6-27B-DFlash", "num_speculative_tokens": 15})
    env: dict[str, str] = field(default_factory=lambda: {"VLLM_USE_V2_MODEL_RUNNER": "1"})
    startup_timeout_s: float = 900.0
    log_tail_lines: int = 40

    def host_allowance(self) -> float:
        """Seconds a host's deadline grows by when the smoke load runs."""
        if not self.enabled:
            return 0.0
        return self.time_budget_s + (self.startup_timeout_s + 30 if self.mode == "launch" else 10)


INT_KEYS = {"requests", "concurrency", "max_tokens", "port", "collapse_after_position",
            "log_tail_lines"}
FLOAT_KEYS = {"time_budget_s", "min_acceptance_rate", "min_mean_acceptance_length",
              "fleet_median_ratio", "collapse_below", "startup_timeout_s"}


def check_override(source: str, where: str, raw: Any) -> None:
    """An inventory's `smoke:` override, checked as the inventory is read (inventory/hosts.py's
    FeatureCheck) so a bad one stops the run before any host is contacted."""
    validate_smoke(source, where, raw, SmokeSettings())


def validate_smoke(source: str, where: str, raw: Any, base: SmokeSettings) -> SmokeSettings:
    """SmokeSettings from a playbook `smoke:` mapping or an inventory override."""
    if raw is None:
        return base
    if not isinstance(raw, dict):
        raise InputError(source, where, "smoke", "must be a mapping")
    known = {f.name for f in fields(SmokeSettings)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name = "smoke.%s" % key
        if key not in known:
            raise InputError(source, where, name, "unknown key; accepted: %s"
                             % ", ".join(sorted(known)))
        if key == "enabled" and not isinstance(value, bool):
            raise InputError(source, where, name, "must be true or false")
        if key == "mode" and value not in ("attach", "launch"):
            raise InputError(source, where, name, "must be attach or launch")
        if key in INT_KEYS and (not is_int(value) or
                                value < (0 if key == "collapse_after_position" else 1)):
            raise InputError(source, where, name, "must be a positive integer")
        if key in FLOAT_KEYS and (not is_number(value) or value < 0):
            raise InputError(source, where, name, "must be a non-negative number")
        if key in ("command", "model") and (not isinstance(value, str) or not value):
            raise InputError(source, where, name, "must be a non-empty string")
        if key in ("spec", "env") and not isinstance(value, dict):
            raise InputError(source, where, name, "must be a mapping")
        if key == "env" and not all(isinstance(k, str) and isinstance(v, (str, int, float))
                                    for k, v in value.items()):
            raise InputError(source, where, name, "must map names to strings")
        values[key] = float(value) if key in FLOAT_KEYS else value
    if "env" in values:
        values["env"] = {k: str(v) for k, v in values["env"].items()}
    options = replace(base, **values)
    if "command" in values:
        prove_command(source, where, options)
    return options


# What a host can supply to the launch command (see smoke_plan); sample values for the
# inventory's, since the template is proven before any host is known.
TEMPLATE_NAMES = ("venv", "model", "port", "spec", "python")
UNDEFINED_NAME = re.compile(r"'([^']+)' is undefined")


def template_context(options: SmokeSettings, venv: str | None, python: str) -> dict[str, Any]:
    return {"venv": venv or "", "model": options.model, "port": options.port,
            "spec": options.spec, "python": python}


def prove_command(source: str, where: str | None, options: SmokeSettings) -> None:
    """Compile and render the launch command now, with jinja2's StrictUndefined, against
    the names a host can supply: an undefined name (`{{ gpu_count }}`) is bad input at
    load time, before any host is contacted, never an error at the first host."""
    try:
        compiled_command(options.command).render(
            **template_context(options, "/opt/venv", "/opt/venv/bin/python"))
    except TemplateError as exc:
        match = UNDEFINED_NAME.search(str(exc))
        if match:
            raise InputError(source, where, "smoke.command", "the template uses '%s', which "
                             "is not defined; a host supplies only %s"
                             % (match.group(1), ", ".join(TEMPLATE_NAMES)))
        raise InputError(source, where, "smoke.command", "bad template: %s" % exc)


_TEMPLATES = Environment(undefined=StrictUndefined, autoescape=False,
                         finalize=lambda value: shlex.quote(str(value)))
_TEMPLATES.filters["tojson"] = lambda value: json.dumps(value, sort_keys=True)


@lru_cache(maxsize=16)
def compiled_command(text: str) -> Any:
    """Compiled once per run, not once per host (a compile costs milliseconds)."""
    return _TEMPLATES.from_string(text)


@lru_cache(maxsize=1)
def prompt_set() -> dict[str, Any]:
    with open(PROMPT_SET, encoding="utf-8") as handle:
        return json.load(handle)


def smoke_plan(host: "Host", options: SmokeSettings) -> dict[str, Any]:
    """What the probe needs to run this host's load. In launch mode the URL follows the
    port; every value substituted into the command is shell-quoted by the template."""
    plan = asdict(options)
    if options.mode == "launch":
        plan["url"] = "http://127.0.0.1:%d" % options.port
        context = template_context(options, host.venv, host.interpreter)
        try:
            plan["command"] = compiled_command(options.command).render(**context)
        except TemplateError as exc:
            raise InputError("playbook", "host '%s'" % host.name, "smoke.command", str(exc))
    else:
        plan["url"] = host.vllm_url
    return plan
