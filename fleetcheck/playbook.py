"""Playbooks: the fix signatures a run checks, as data a user can extend.

A check is finders (what code to look for, where) plus ordered outcomes (which
combination of findings means pass, warn or fail). Validation happens once, on the
controller, so a typo in a finder name is an input error, not a silent "fail" per host.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from fleetcheck.input_error import InputError
from fleetcheck.drafter_expectations import DrafterExpectation, parse_drafter
from fleetcheck.expectations import BuildExpectation, playbook_expectation
from fleetcheck.patches import PatchCheck, patch_from_entry
from fleetcheck.waivers import Waiver, playbook_waivers
from fleetcheck.yamlfile import comment_cut, read_yaml_and_text
from fleetcheck.probe.lexer import compile_pattern
from fleetcheck.smoke_settings import SmokeSettings, validate_smoke
from fleetcheck.text import is_number
from fleetcheck.status import Status

PACKAGED_PLAYBOOK = os.path.join(os.path.dirname(__file__), "playbooks", "dflash.yaml")
FINDER_KINDS = {"pattern": {"files", "patterns"}, "string": {"files", "text"},
                "key-offset": {"files", "key"},
                "value-source": {"files", "call", "argument", "sources"},
                "decision": {"files", "function"},
                "run": {"files", "question"}}
OPTIONAL_KEYS = {"key-offset": {"container"}, "value-source": {"constants"},
                 "run": {"key", "module"}}
# what each question of a `run` finder files its findings under (probe/executor_findings.py)
RUN_FINDINGS = {"offset": (":0", ":1", ":2+", ":<0", ":wrong", ":?"),
                "window": (":config", ":conditional", ":wrong", ":rejected", ":?"),
                "drop": (":kept", ":dropped", ":opt-in", ":?")}
KEY_OFFSET_FINDINGS = (":0", ":1", ":2+", ":<0", ":?")
DECISION_FINDINGS = (":true", ":false", ":?")
OUTCOME_STATUSES = {Status.PASS, Status.WARN, Status.FAIL}
CHECK_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Outcome:
    status: Status
    message: str
    when: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()


@dataclass
class FixCheck:
    id: str
    title: str
    finders: dict[str, dict[str, Any]]
    outcomes: list[Outcome]
    modules: dict[str, dict[str, str]] = field(default_factory=dict)
    reference: str | None = None
    fixed_in: str | None = None

    def signature(self) -> dict[str, Any]:
        """What the remote probe needs for this check (plain JSON data)."""
        return {"id": self.id, "modules": self.modules, "find": self.finders}


@dataclass
class IntegrityOptions:
    """The install-* checks: on by default; `deep` hashes every RECORD file."""

    enabled: bool = True
    deep: bool = False
    import_check: bool = True
    import_timeout: float = 20.0

    def plan(self) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        return {"deep": self.deep, "import_check": self.import_check,
                "import_timeout": self.import_timeout}


@dataclass
class Playbook:
    name: str
    source: str
    checks: list[FixCheck]
    description: str = ""
    integrity: IntegrityOptions = field(default_factory=IntegrityOptions)
    smoke: SmokeSettings = field(default_factory=SmokeSettings)
    expect: BuildExpectation = field(default_factory=BuildExpectation)
    expect_drafter: DrafterExpectation | None = None  # expect: drafter:
    patches: list[PatchCheck] = field(default_factory=list)  # patches: and --patch
    check_sources: dict[str, str] = field(default_factory=dict)  # check id -> its file
    waive: tuple[tuple[str, Waiver], ...] = ()  # (build, waiver): waivers.playbook_waivers

    def probe_signatures(self) -> list[dict[str, Any]]:
        return [check.signature() for check in self.checks]

    def patch_signatures(self) -> list[dict[str, Any]]:
        return [patch.signature() for patch in self.patches]

    def add_patch(self, patch: PatchCheck, source: str) -> None:
        """A diff as one more check; its id must be new (fix checks' and other diffs')."""
        taken = {check.id for check in self.checks} | {p.id for p in self.patches}
        if patch.id in taken:
            raise InputError(source, None, "id", "the check id %r is taken already: give the "
                             "diff another file name, or an id (patches: [{file, id}])" % patch.id)
        self.patches.append(patch)


def _str_list(source: str, where: str, name: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(source, where, name, "must be a list of strings")
    return tuple(value)


def _finder(source: str, where: str, name: str, raw: Any) -> dict[str, Any]:
    fwhere = "%s finder '%s'" % (where, name)
    if not isinstance(raw, dict):
        raise InputError(source, fwhere, None, "must be a mapping")
    kind = raw.get("kind")
    if kind not in FINDER_KINDS:
        raise InputError(source, fwhere, "kind", "must be one of %s" % ", ".join(
            sorted(FINDER_KINDS)))
    allowed = FINDER_KINDS[kind] | OPTIONAL_KEYS.get(kind, set()) | {"kind"}
    for key in raw:
        if key not in allowed:
            raise InputError(source, fwhere, str(key), "unknown key for kind %s" % kind)
    for key in FINDER_KINDS[kind]:
        if key not in raw:
            raise InputError(source, fwhere, key, "missing")
    finder = {"kind": kind, "files": list(_str_list(source, fwhere, "files", raw["files"]))}
    if not finder["files"]:
        raise InputError(source, fwhere, "files", "must name at least one file or glob")
    for path in finder["files"]:
        if path.startswith("/") or ".." in path.split("/"):
            raise InputError(source, fwhere, "files", "%r must stay inside site-packages" % path)
    if kind == "pattern":
        finder["patterns"] = list(_str_list(source, fwhere, "patterns", raw["patterns"]))
        if not finder["patterns"]:
            raise InputError(source, fwhere, "patterns", "must hold at least one pattern")
        for pattern in finder["patterns"]:
            if not any(kind_ == "N" or (kind_ == "S" and re.search(r"\w", value))
                       for kind_, value in compile_pattern(pattern)):
                raise InputError(source, fwhere, "patterns", "%r has no name or word to "
                                 "search for" % pattern)
    elif kind == "string":
        if not isinstance(raw["text"], str) or not re.search(r"\w", raw["text"]):
            raise InputError(source, fwhere, "text", "must be a string with a word in it")
        finder["text"] = raw["text"]
    elif kind == "key-offset":
        for key in ("key", "container"):
            if key in raw and (not isinstance(raw[key], str) or not raw[key].strip()):
                raise InputError(source, fwhere, key, "must be a non-empty string")
            if key in raw:
                finder[key] = raw[key]
    elif kind == "run":
        if raw["question"] not in RUN_FINDINGS:
            raise InputError(source, fwhere, "question", "must be one of %s" % ", ".join(
                sorted(RUN_FINDINGS)))
        finder["question"] = raw["question"]
        for key in ("key", "module"):
            if key in raw and (not isinstance(raw[key], str) or not IDENTIFIER.match(raw[key])):
                raise InputError(source, fwhere, key, "must be a Python identifier")
            if key in raw:
                finder[key] = raw[key]
    elif kind == "decision":
        if not isinstance(raw["function"], str) or not IDENTIFIER.match(raw["function"]):
            raise InputError(source, fwhere, "function", "must be a Python identifier")
        finder["function"] = raw["function"]
    else:
        for key in ("call", "argument"):
            if not isinstance(raw[key], str) or not IDENTIFIER.match(raw[key]):
                raise InputError(source, fwhere, key, "must be a Python identifier")
            finder[key] = raw[key]
        sources = raw["sources"]
        if not isinstance(sources, dict) or not sources:
            raise InputError(source, fwhere, "sources", "must map labels to lists of names")
        finder["sources"] = {}
        for label, names in sources.items():
            label = str(label)
            if label in ("constant", "?") or not CHECK_ID.match(label):
                raise InputError(source, fwhere, "sources.%s" % label, "labels are lowercase "
                                 "words other than 'constant'")
            names = list(_str_list(source, fwhere, "sources.%s" % label, names))
            if not names or not all(IDENTIFIER.match(n) for n in names):
                raise InputError(source, fwhere, "sources.%s" % label,
                                 "must list the key, attribute or method names it stands for")
            finder["sources"][label] = names
        finder["constants"] = {}
        constants = raw.get("constants") or {}
        if not isinstance(constants, dict):
            raise InputError(source, fwhere, "constants", "must map labels to lists of values")
        for label, values in constants.items():
            label = str(label)
            if label in ("constant", "?") or label in finder["sources"] or \
                    not CHECK_ID.match(label):
                raise InputError(source, fwhere, "constants.%s" % label, "labels are lowercase "
                                 "words other than 'constant' and the sources' labels")
            values = list(_str_list(source, fwhere, "constants.%s" % label, values))
            if not values:
                raise InputError(source, fwhere, "constants.%s" % label,
                                 "must list the constants (as Python writes them) it stands for")
            finder["constants"][label] = values
    return finder


def finding_names(finders: dict[str, dict[str, Any]]) -> set[str]:
    names = set()
    for name, finder in finders.items():
        if finder["kind"] == "key-offset":
            names.update(name + suffix for suffix in KEY_OFFSET_FINDINGS)
        elif finder["kind"] == "decision":
            names.update(name + suffix for suffix in DECISION_FINDINGS)
        elif finder["kind"] == "run":
            names.update(name + suffix for suffix in RUN_FINDINGS[finder["question"]])
        elif finder["kind"] == "value-source":
            names.update(name + ":" + label for label in
                         list(finder["sources"]) + list(finder["constants"]) +
                         ["constant", "?"])
        else:
            names.add(name)
    return names


def _check(source: str, index: int, raw: Any) -> FixCheck:
    where = "checks[%d]" % index
    if not isinstance(raw, dict):
        raise InputError(source, where, None, "must be a mapping")
    known = {"id", "title", "reference", "fixed_in", "modules", "find", "outcomes"}
    for key in raw:
        if key not in known:
            raise InputError(source, where, str(key), "unknown key")
    check_id = raw.get("id")
    if not isinstance(check_id, str) or not CHECK_ID.match(check_id):
        raise InputError(source, where, "id", "must be lowercase letters, digits and '-'")
    where = "check '%s'" % check_id
    finders_raw = raw.get("find")
    if not isinstance(finders_raw, dict) or not finders_raw:
        raise InputError(source, where, "find", "must be a non-empty mapping of finders")
    finders = {str(n): _finder(source, where, str(n), f) for n, f in finders_raw.items()}
    modules = raw.get("modules") or {}
    if not isinstance(modules, dict):
        raise InputError(source, where, "modules", "must be a mapping")
    for mname, spec in modules.items():
        if not isinstance(spec, dict) or set(spec) != {"registry", "arch"}:
            raise InputError(source, where, "modules.%s" % mname,
                             "must be {registry: FILE, arch: NAME}")
    names = finding_names(finders)
    outcomes_raw = raw.get("outcomes")
    if not isinstance(outcomes_raw, list) or not outcomes_raw:
        raise InputError(source, where, "outcomes", "must be a non-empty list")
    outcomes = []
    for i, item in enumerate(outcomes_raw):
        owhere = "%s outcomes[%d]" % (where, i)
        if not isinstance(item, dict):
            raise InputError(source, owhere, None, "must be a mapping")
        for key in item:
            if key not in {"when", "unless", "status", "message", "evidence"}:
                raise InputError(source, owhere, str(key), "unknown key")
        if not isinstance(item.get("status"), str) or item["status"] not in OUTCOME_STATUSES:
            raise InputError(source, owhere, "status", "must be pass, warn or fail")
        if not isinstance(item.get("message"), str):
            raise InputError(source, owhere, "message", "must be a string")
        outcome = Outcome(status=Status(item["status"]), message=item["message"].strip(),
                          when=_str_list(source, owhere, "when", item.get("when")),
                          unless=_str_list(source, owhere, "unless", item.get("unless")),
                          evidence=_str_list(source, owhere, "evidence", item.get("evidence")))
        for ref in outcome.when + outcome.unless + outcome.evidence:
            if ref not in names:
                raise InputError(source, owhere, "when",
                                 "unknown finding %r; defined: %s" % (ref, ", ".join(sorted(names))))
        outcomes.append(outcome)
    for key in ("reference", "title"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise InputError(source, where, key, "must be a string")
    title = raw.get("title") or check_id
    return FixCheck(id=check_id, title=str(title), finders=finders, outcomes=outcomes,
                    modules=modules, reference=raw.get("reference"),
                    fixed_in=str(raw["fixed_in"]) if raw.get("fixed_in") else None)


# `extends:` names a packaged playbook by its name
PACKAGED_PLAYBOOKS = {"dflash": PACKAGED_PLAYBOOK}
OWN_KEYS = {"name", "description", "checks", "integrity", "smoke", "expect", "waive",
            "patches"}
COMPOSE_KEYS = {"extends", "drop"}


def load_playbooks(paths: list[str] | None) -> Playbook:
    """The playbook of a run from every --playbook given, in order: the first is read
    whole (with what it extends); each later one adds its checks, and may set nothing
    else. A check id two files define is an error naming both."""
    if not paths:
        return load_playbook()
    playbook = load_playbook(paths[0])
    for path in paths[1:]:
        more = load_playbook(path)
        data, _ = read_yaml_and_text(path)
        for key in ("integrity", "smoke", "expect", "extends", "waive", "drop"):
            if key in data:
                raise InputError(path, None, key, "only the first --playbook (%s) sets %s; a "
                                 "later one adds checks" % (paths[0], key))
        for check in more.checks:
            if check.id in playbook.check_sources:
                raise InputError(path, "check '%s'" % check.id, "id", "defined twice: also in "
                                 "%s" % playbook.check_sources[check.id])
            playbook.checks.append(check)
            playbook.check_sources[check.id] = path
        for patch in more.patches:
            playbook.add_patch(patch, path)
        playbook.source += " + " + path
    return playbook


def load_playbook(path: str | None = None) -> Playbook:
    source = path or PACKAGED_PLAYBOOK
    data, text = read_yaml_and_text(source)
    if not isinstance(data, dict):
        raise InputError(source, None, None, "playbook must be a mapping")
    for key in ("reference", "fixed_in", "title"):
        for line, value, comment in comment_cut(text, key):
            raise InputError(source, "line %d" % line, key, "reads %r: the %r after it is a "
                             "YAML comment; quote the whole value (%s: \"%s %s\")"
                             % (value, comment, key, value, comment))
    for key in data:
        if key not in OWN_KEYS | COMPOSE_KEYS:
            raise InputError(source, None, str(key), "unknown key")
    base = _extended(source, data)
    patches_raw = data.get("patches") or []
    if not isinstance(patches_raw, list):
        raise InputError(source, None, "patches", "must be a list of diffs (paths or "
                         "{file, id, title, reference})")
    checks_raw = data.get("checks", [] if base is not None or patches_raw else None)
    if not isinstance(checks_raw, list) or (not checks_raw and base is None
                                            and not patches_raw):
        raise InputError(source, None, "checks", "must be a non-empty list")
    own_checks = [_check(source, i, c) for i, c in enumerate(checks_raw)]
    inherited: list[FixCheck] = []
    if base is not None:
        inherited = _kept(source, base, data.get("drop"))
    elif "drop" in data:
        raise InputError(source, None, "drop", "drops checks of the playbook it extends: "
                         "set extends: first")
    sources = {c.id: base.check_sources[c.id] for c in inherited} if base else {}
    for check in own_checks:
        if check.id in sources:
            raise InputError(source, "check '%s'" % check.id, "id", "defined twice%s" % (
                "" if sources[check.id] == source else ": also in %s" % sources[check.id]))
        sources[check.id] = source
    checks = inherited + own_checks
    if not checks and not patches_raw:
        raise InputError(source, None, "drop", "drops every check: nothing left to run")

    def own(key: str, read: Callable[[], Any], inherited: Any) -> Any:
        return read() if key in data or base is None else inherited

    playbook = Playbook(
        name=str(data.get("name") or os.path.basename(source)), source=source,
        checks=checks, description=str(data.get("description") or ""),
        integrity=own("integrity", lambda: _integrity(source, data.get("integrity")),
                      base and base.integrity),
        smoke=own("smoke", lambda: validate_smoke(source, None, data.get("smoke"),
                                                  SmokeSettings()), base and base.smoke),
        expect=own("expect", lambda: playbook_expectation(data.get("expect"), source),
                   base and base.expect),
        expect_drafter=own("expect", lambda: _expected_drafter(source, data.get("expect")),
                           base and base.expect_drafter),
        check_sources=sources,
        waive=own("waive", lambda: playbook_waivers(data.get("waive"), source),
                  base and base.waive))
    for index, entry in enumerate(patches_raw):
        playbook.add_patch(patch_from_entry(entry, source, "patches[%d]" % index), source)
    return playbook


def _extended(source: str, data: dict[str, Any]) -> Playbook | None:
    """The packaged playbook `extends:` names (its checks come first), or None."""
    name = data.get("extends")
    if name is None:
        return None
    if name not in PACKAGED_PLAYBOOKS:
        raise InputError(source, None, "extends", "names a packaged playbook: one of %s, got %r"
                         % (", ".join(sorted(PACKAGED_PLAYBOOKS)), name))
    return load_playbook(PACKAGED_PLAYBOOKS[name])


def _kept(source: str, base: Playbook, drop: Any) -> list[FixCheck]:
    """The extended playbook's checks, less the ones `drop:` lists (each must be one)."""
    dropped = _str_list(source, "drop", "drop", drop) if drop is not None else ()
    known = {c.id for c in base.checks}
    for check_id in dropped:
        if check_id not in known:
            raise InputError(source, "drop", check_id, "is not a check of %s (its checks: %s)"
                             % (base.name, ", ".join(sorted(known))))
    return [c for c in base.checks if c.id not in dropped]


def _expected_drafter(source: str, raw: Any) -> DrafterExpectation | None:
    if not isinstance(raw, dict) or raw.get("drafter") is None:
        return None
    return parse_drafter(raw["drafter"], source, "expect", "drafter",
                         "playbook %s: expect.drafter" % source)


def _integrity(source: str, raw: Any) -> IntegrityOptions:
    if raw is None:
        return IntegrityOptions()
    where = "integrity"
    if not isinstance(raw, dict):
        raise InputError(source, where, None, "must be a mapping")
    options = IntegrityOptions()
    for key, value in raw.items():
        if key in ("enabled", "deep", "import_check"):
            if not isinstance(value, bool):
                raise InputError(source, where, key, "must be true or false")
        elif key == "import_timeout":
            if not is_number(value) or value <= 0:
                raise InputError(source, where, key, "must be a positive number of seconds")
            value = float(value)
        else:
            raise InputError(source, where, str(key), "unknown key")
        setattr(options, key, value)
    return options
