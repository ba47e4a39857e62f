"""The result model: what a run learned, as values, and its JSON contract (schema 1).

Failures of a host are data here (status + error), never exceptions, so every host of the
inventory appears in every output whatever happened to it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Sequence

from fleetcheck.atomic_file import write_atomically
from fleetcheck.build_details import CHECK_ID as BUILD_CHECK_ID
from fleetcheck.build_details import BuildDetails
from fleetcheck.status import CHECK_STATUSES, HOST_STATUSES, READY, ErrorKind, Status, worst

SCHEMA_VERSION = 1


def now_iso() -> str:
    """A run's timestamps: UTC, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def epoch_seconds(stamp: str | None) -> float | None:
    """A run's timestamp as Unix seconds (UTC when it names no zone); None when it is not
    one."""
    try:
        moment = datetime.fromisoformat(stamp or "")
    except (TypeError, ValueError):
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


@dataclass(frozen=True)
class Evidence:
    file: str | None
    line: int | None
    text: str
    step: str | None = None  # a dataflow path's step: read, call, +1, return, source, ...

    def location(self) -> str:
        """'file:line: ', 'file: ' or '': where the text was found, as every report says it."""
        if not self.file:
            return ""
        return "%s:%d: " % (self.file, self.line) if self.line is not None else self.file + ": "

    def as_line(self) -> str:
        """The evidence on one line of text (terminal, JUnit): where, the step, the text."""
        return self.location() + ("[%s] " % self.step if self.step else "") + self.text


# details key of a check that never ran (its host failed first): status skip, but not a
# check that ran and found nothing to judge; reports and counts tell the two apart
NOT_RUN = "not_run"


@dataclass(frozen=True)
class CheckResult:
    """A verdict. Like every result it is a value, never changed once made (the results
    writer reuses a result's encoded JSON while it is the same object): a changed verdict
    is a new one (dataclasses.replace). `details` are build-expected's typed details, or
    for the other checks the JSON object they record."""

    id: str
    title: str
    status: Status
    message: str
    evidence: Sequence[Evidence] = ()
    details: dict[str, Any] | BuildDetails = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "evidence", tuple(self.evidence))

    @property
    def not_run(self) -> bool:
        return isinstance(self.details, dict) and bool(self.details.get(NOT_RUN))

    def details_dict(self) -> dict[str, Any]:
        """The details as the results file holds them."""
        return self.details.as_dict() if isinstance(self.details, BuildDetails) else self.details


@dataclass(frozen=True)
class HostError:
    kind: str
    message: str


@dataclass(frozen=True)
class VllmInfo:
    version: str | None = None
    metadata_version: str | None = None
    commit: str | None = None
    commit_source: str | None = None
    install: str | None = None
    site_packages: str | None = None
    python: str | None = None
    record_sha256: str | None = None  # sha256 of the dist-info's RECORD: which files the build has
    found_by: str | None = None  # how the install was found (inventory venv, running server ...)
    other_installs: list[dict[str, Any]] | None = None  # more vllm installs seen, not checked
    # a VCS install's origin (direct_url.json): url, requested_revision, commit, vcs
    source: dict[str, str] | None = None


@dataclass(frozen=True)
class HostResult:
    name: str
    address: str
    groups: Sequence[str]
    status: Status
    error: HostError | None = None
    duration_s: float = 0.0
    vllm: VllmInfo | None = None
    checks: Sequence[CheckResult] = ()
    smoke: dict[str, Any] | None = None
    analysis: str | None = None  # how the fix analysis was obtained, when shared or not
    # fleetcheck's own bugs that did not stop this host's checks (the shared analysis
    # failing on the controller): the host is judged, and its status is at least error
    internal_errors: Sequence[HostError] = ()
    # what each running server serves (checks/served_entries.py summaries); None: not looked at
    served: list[dict[str, Any]] | None = None
    # the container the probe ran in (engine, id, names); None: on the host itself
    container: dict[str, str] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        for name in ("groups", "checks", "internal_errors"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def build_key(self) -> tuple[str | None, str | None, str | None]:
        """The build the host runs: version, commit, RECORD sha256 (None where unknown)."""
        info = self.vllm
        if info is None:
            return (None, None, None)
        return (info.version, info.commit, info.record_sha256)


def status_with(host: HostResult, checks: Sequence[CheckResult]) -> Status:
    """The host's status once its checks change (a fleet check added or settled): its
    error and its recorded fleetcheck bugs still count."""
    return host_status(checks, host.error, host.internal_errors)


def host_status(checks: Sequence[CheckResult], error: HostError | None,
                internal_errors: Sequence[HostError] | None = None) -> Status:
    """The host's worst check; `error` when it has none, or when fleetcheck itself failed
    beside its checks (a bug is never a pass)."""
    if error is not None:
        return Status.UNREACHABLE if error.kind == ErrorKind.UNREACHABLE else Status.ERROR
    if not checks:
        return Status.ERROR
    return worst([c.status for c in checks] + ([Status.ERROR] if internal_errors else []))


@dataclass(frozen=True)
class RunResult:
    """A run, or the run so far (a checkpoint): a value like its hosts."""

    started_at: str
    inventory: str
    playbook: str
    finished_at: str | None = None
    complete: bool = False
    hosts: Sequence[HostResult] = ()
    fleetcheck_version: str = ""
    schema_version: int = SCHEMA_VERSION
    not_finished: Sequence[str] = ()
    duration_s: float = 0.0
    # what the whole run tells apart from any host (an expected build no host holds):
    # computed once, when the run ends (checks.plan.finish_run), and read back from its file
    warnings: Sequence[str] = ()

    def __post_init__(self) -> None:
        for name in ("hosts", "not_finished", "warnings"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def check_titles(self) -> dict[str, str]:
        """Every check id of the run with its title, in the order hosts first name them:
        the columns of the terminal table and of the HTML matrix."""
        titles: dict[str, str] = {}
        for host in self.hosts:
            for check in host.checks:
                titles.setdefault(check.id, check.title)
        return titles

    def summary(self) -> dict[str, Any]:
        counts = {status: 0 for status in HOST_STATUSES}
        for host in self.hosts:
            counts[host.status] += 1
        check_counts: dict[str, dict[str, int]] = {}
        for host in self.hosts:
            for check in host.checks:
                per = check_counts.setdefault(check.id, dict.fromkeys(CHECK_STATUSES + (NOT_RUN,),
                                                                      0))
                per[NOT_RUN if check.not_run else check.status] += 1
        return {"hosts": len(self.hosts), "by_status": counts, "checks": check_counts,
                "ready": self.complete and bool(self.hosts) and
                all(host.status in READY for host in self.hosts),
                "warnings": list(self.warnings)}

    def exit_code(self) -> int:
        """0 all pass (warnings allowed), 1 a check failed, 3 no failure but a host was
        unreachable or errored. (2, bad input, never reaches a RunResult.)"""
        statuses = {host.status for host in self.hosts}
        if Status.FAIL in statuses:
            return 1
        if statuses & {"error", "unreachable"} or not self.complete:
            return 3
        return 0

    def header(self) -> dict[str, Any]:
        return {"schema_version": self.schema_version, "complete": self.complete,
                "started_at": self.started_at, "finished_at": self.finished_at,
                "duration_s": self.duration_s, "inventory": self.inventory,
                "playbook": self.playbook, "fleetcheck_version": self.fleetcheck_version,
                "summary": self.summary(), "not_finished": list(self.not_finished)}


def evidence_dict(item: Evidence) -> dict[str, Any]:
    out = {"file": item.file, "line": item.line, "text": item.text}
    if item.step is not None:
        out["step"] = item.step
    return out


def host_dict(host: HostResult) -> dict[str, Any]:
    """A host as JSON data; written by hand because dataclasses.asdict deep-copies every
    value, which cost more than the SSH work per host at fleet scale."""
    return {"name": host.name, "address": host.address, "groups": list(host.groups),
            "status": host.status,
            "error": {"kind": host.error.kind, "message": host.error.message}
            if host.error else None,
            "duration_s": host.duration_s,
            "vllm": vars(host.vllm).copy() if host.vllm else None,
            "checks": [{"id": c.id, "title": c.title, "status": c.status, "message": c.message,
                        "evidence": [evidence_dict(e) for e in c.evidence],
                        "details": c.details_dict()} for c in host.checks],
            "smoke": host.smoke, "analysis": host.analysis,
            "internal_errors": [{"kind": e.kind, "message": e.message}
                                for e in host.internal_errors],
            **({"served": host.served} if host.served is not None else {}),
            **({"container": host.container} if host.container is not None else {})}


class ResultsWriter:
    """Writes one run's results file, again and again while hosts finish (checkpoints),
    always atomically: a temporary file in the same directory, then a rename, so a reader,
    a Ctrl-C or a kill -9 at any moment finds the previous whole file or the new one.
    Each host's JSON line is encoded once and reused while that host's result is the same
    object (results are frozen: a changed host is a new object), and a checkpoint costs
    little more than writing the bytes."""

    def __init__(self, path: str):
        self.path = path
        self._lines: dict[str, tuple[HostResult, str]] = {}

    def line(self, host: HostResult) -> str:
        cached = self._lines.get(host.name)
        if cached is not None and cached[0] is host:
            return cached[1]
        text = json.dumps(host_dict(host))
        self._lines[host.name] = (host, text)
        return text

    def parts(self, run: RunResult) -> list[str]:
        """One host per line: diffable and greppable, and encoded by json's C encoder
        (indentation would switch to the pure-Python one, ten times slower)."""
        header = json.dumps(run.header())
        return [header[:-1] + ', "hosts": [\n', ",\n".join(self.line(h) for h in run.hosts),
                "\n]}\n"]

    def write(self, run: RunResult) -> None:
        write_atomically(self.path, self.parts(run))


def dump_json(run: RunResult, path: str) -> None:
    """Write the results file atomically (see ResultsWriter)."""
    ResultsWriter(path).write(run)


def _check_from(data: dict[str, Any]) -> CheckResult:
    details = data.get("details", {})
    return CheckResult(id=data["id"], title=data.get("title", data["id"]),
                       status=Status(data["status"]), message=data.get("message", ""),
                       evidence=[Evidence(**e) for e in data.get("evidence", [])],
                       details=BuildDetails.from_dict(details)
                       if data["id"] == BUILD_CHECK_ID and "expected" in details else details)


def _host_from(data: dict[str, Any]) -> HostResult:
    return HostResult(name=data["name"], address=data.get("address", data["name"]),
                      groups=list(data.get("groups", [])), status=Status(data["status"]),
                      error=HostError(**data["error"]) if data.get("error") else None,
                      duration_s=data.get("duration_s", 0.0),
                      vllm=VllmInfo(**data["vllm"]) if data.get("vllm") else None,
                      checks=[_check_from(c) for c in data.get("checks", [])],
                      smoke=data.get("smoke"), analysis=data.get("analysis"),
                      internal_errors=[HostError(**e) for e in data.get("internal_errors", [])],
                      served=data.get("served"), container=data.get("container"))


class ResultsFileError(ValueError):
    """A file that is not results this fleetcheck reads; `problem` says why in words."""

    def __init__(self, path: str, problem: str):
        super().__init__("%s: %s" % (path, problem))
        self.problem = problem


def load_json(path: str) -> RunResult:
    with open(path, encoding="utf-8") as handle:
        try:
            data = json.load(handle)
        except json.JSONDecodeError as exc:
            raise ResultsFileError(path, "not JSON: %s at line %d, column %d"
                                   % (exc.msg, exc.lineno, exc.colno))
    if not isinstance(data, dict):
        raise ResultsFileError(path, "not a JSON object")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ResultsFileError(path, "schema_version %s; this fleetcheck reads schema %d" % (
            "missing" if data.get("schema_version") is None else repr(data["schema_version"]),
            SCHEMA_VERSION))
    return RunResult(started_at=data["started_at"], finished_at=data.get("finished_at"),
                     inventory=data.get("inventory", ""), playbook=data.get("playbook", ""),
                     complete=data.get("complete", False),
                     fleetcheck_version=data.get("fleetcheck_version", ""),
                     not_finished=data.get("not_finished", []),
                     duration_s=data.get("duration_s", 0.0),
                     warnings=list((data.get("summary") or {}).get("warnings", [])),
                     hosts=[_host_from(h) for h in data.get("hosts", [])])


def merge_runs(runs: list[RunResult], names: list[str]) -> RunResult:
    """One run from several (an inventory split across controllers): hosts in the order
    given; a host present twice keeps its later result. The merged run's warnings are the
    caller's to compute again: they are about all of its hosts together."""
    hosts: dict[str, HostResult] = {}
    for run in runs:
        for host in run.hosts:
            hosts.pop(host.name, None)
            hosts[host.name] = host
    return RunResult(started_at=min(r.started_at for r in runs),
                     inventory=" + ".join(names), playbook=runs[0].playbook,
                     finished_at=max((r.finished_at or "") for r in runs) or None,
                     complete=all(r.complete for r in runs),
                     fleetcheck_version=runs[0].fleetcheck_version,
                     not_finished=[n for r in runs for n in r.not_finished],
                     duration_s=max(r.duration_s for r in runs), hosts=list(hosts.values()))
