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

PROMPT_SET = os.path.join(os.path.dirname(__file__), "prompts", "smoke-v2.json")
DEFAULT_COMMAND = ("{{ venv }}/bin/vllm serve {{ model }} --port {{ port }} "
                   "--speculative-config {{ spec | tojson }}")


@dataclass(frozen=True)
class Reference:
    """A mean acceptance length known to be right for a drafter, k and prompt set; a
    key left out matches any."""

    mean_acceptance_length: float
    drafter: str | None = None
    method: str | None = None
    num_speculative_tokens: int | None = None
    prompt_set: str | None = None

    def label(self) -> str:
        said = ["%s %s" % (k.replace("_", " "), v) for k, v in (
            ("drafter", self.drafter), ("method", self.method),
            ("k", self.num_speculative_tokens), ("prompt set", self.prompt_set)) if v is not None]
        return "the reference %.2f%s" % (self.mean_acceptance_length,
                                         " (%s)" % ", ".join(said) if said else "")


@dataclass
class SmokeSettings:
    """Defaults fit a pre-rollout gate: 40 requests (about a minute on a GPU at 128
    tokens each) tell a broken drafter (the incident's ~1.1%) from a working one at once;
    a regression against a reference needs the interval to clear its line, which the
    verdict says how many requests would take."""

    enabled: bool = False
    mode: str = "attach"
    requests: int = 40
    max_tokens: int = 128
    time_budget_s: float = 180.0
    prompt_set: str | None = None
    broken_acceptance_rate: float = 0.05
    broken_first_position: float = 0.3
    reference: tuple[Reference, ...] = ()
    reference_fraction: float = 0.95
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


INT_KEYS = {"requests", "max_tokens", "port", "collapse_after_position", "log_tail_lines"}
FLOAT_KEYS = {"time_budget_s", "broken_acceptance_rate", "broken_first_position",
              "reference_fraction", "collapse_below", "startup_timeout_s"}
REFERENCE_KEYS = {f.name for f in fields(Reference)}


def parse_reference(source: str, where: str | None, raw: Any) -> tuple[Reference, ...]:
    """`reference:` as a number (any drafter), a mapping, or a list of mappings."""
    name = "smoke.reference"
    if is_number(raw):
        raw = {"mean_acceptance_length": raw}
    items = raw if isinstance(raw, list) else [raw]
    out = []
    for i, item in enumerate(items):
        at = name if not isinstance(raw, list) else "%s[%d]" % (name, i)
        if not isinstance(item, dict):
            raise InputError(source, where, at, "must be a number or a mapping with "
                             "mean_acceptance_length")
        unknown = sorted(set(item) - REFERENCE_KEYS)
        if unknown:
            raise InputError(source, where, "%s.%s" % (at, unknown[0]), "unknown key; "
                             "accepted: %s" % ", ".join(sorted(REFERENCE_KEYS)))
        length = item.get("mean_acceptance_length")
        if not is_number(length) or length < 1:
            raise InputError(source, where, at + ".mean_acceptance_length",
                             "must be a number of at least 1")
        k = item.get("num_speculative_tokens")
        if k is not None and (not is_int(k) or k < 1):
            raise InputError(source, where, at + ".num_speculative_tokens",
                             "must be a positive integer")
        for key in ("drafter", "method", "prompt_set"):
            if item.get(key) is not None and (not isinstance(item[key], str) or not item[key]):
                raise InputError(source, where, "%s.%s" % (at, key), "must be a non-empty string")
        out.append(Reference(float(length), item.get("drafter"), item.get("method"), k,
                             item.get("prompt_set")))
    return tuple(out)


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
        if key in ("command", "model", "prompt_set") and (not isinstance(value, str) or
                                                         not value):
            raise InputError(source, where, name, "must be a non-empty string")
        if key == "prompt_set":
            value = os.path.join(os.path.dirname(os.path.abspath(source)), value) \
                if os.path.isfile(source) and not os.path.isabs(value) else value
            read_prompt_set(value, source, where)
        if key == "reference":
            value = parse_reference(source, where, value)
        if key in ("broken_acceptance_rate", "broken_first_position", "reference_fraction") \
                and is_number(value) and value > 1:
            raise InputError(source, where, name, "must be a fraction between 0 and 1")
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


def read_prompt_set(path: str, source: str = "playbook", where: str | None = None) -> dict:
    """A prompt set: {"version": NAME, "prompts": [{"id", "content"}, ...]}, each id once."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise InputError(source, where, "smoke.prompt_set", "cannot read %s: %s" % (path, exc))
    prompts = data.get("prompts") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("version"), str) or \
            not isinstance(prompts, list) or not prompts or not all(
                isinstance(p, dict) and isinstance(p.get("id"), str) and
                isinstance(p.get("content"), str) for p in prompts):
        raise InputError(source, where, "smoke.prompt_set", "%s must hold a version and a "
                         "non-empty list of prompts, each with an id and content" % path)
    ids = [p["id"] for p in prompts]
    if len(set(ids)) != len(ids):
        raise InputError(source, where, "smoke.prompt_set", "%s names a prompt id twice: "
                         "each prompt is one independent request" % path)
    return data


@lru_cache(maxsize=8)
def prompt_set(path: str | None = None) -> dict[str, Any]:
    """The packaged set, or the playbook's `prompt_set` file (validated when it was read)."""
    return read_prompt_set(path or PROMPT_SET)


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
