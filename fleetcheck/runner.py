"""Schedules hosts on a bounded pool, one deadline per host, and turns each host's probe
answer into a HostResult. A host's failure is a value in the results, never an exception
that stops the fleet."""

from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Callable

from fleetcheck import __version__
from fleetcheck.checks.fixes import judge_fix
from fleetcheck.checks.integrity import TITLES as INTEGRITY_TITLES
from fleetcheck.checks.integrity import judge_integrity
from fleetcheck.checks.smoke import TITLE as SMOKE_TITLE
from fleetcheck.checks.smoke import fleet_checks, judge_smoke
from fleetcheck.checks.version import vllm_info
from fleetcheck.inventory import Host
from fleetcheck.playbook import Playbook
from fleetcheck.remote import (decode_answer, host_plan, printable, probe_command,
                               probe_payload)
from fleetcheck.results import (CheckResult, HostError, HostResult, RunResult,
                                host_status)
from fleetcheck.shared_analysis import SharedAnalysis
from fleetcheck.smoke import SmokeOptions, prompt_set, smoke_plan, validate_smoke
from fleetcheck.connectors import Registry
from fleetcheck.connectors.base import Deadline, Target, TransportError
from fleetcheck.connectors.ssh import SshSettings

DEFAULT_PARALLEL = 32
DEFAULT_TIMEOUT = 60.0


@dataclass
class RunOptions:
    settings: SshSettings
    parallel: int = DEFAULT_PARALLEL
    timeout: float = DEFAULT_TIMEOUT
    smoke: bool | None = None  # --smoke / --no-smoke; None: as the playbook says
    share_analysis: bool = True  # --no-shared-analysis: every host analyses its own files


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def judge_host(playbook: Playbook, smoke: SmokeOptions | None,
               facts: dict[str, Any]) -> tuple[Any, list[CheckResult], dict | None]:
    info = vllm_info(facts)
    checks = [judge_fix(check, facts, info.version) for check in playbook.checks]
    checks += judge_integrity(facts, playbook.integrity.import_check)
    numbers = None
    if smoke is not None:
        smoke_check, numbers = judge_smoke(facts["smoke"], smoke)
        checks.append(smoke_check)
    return info, checks, numbers


def check_titles(playbook: Playbook, smoke: bool) -> list[tuple[str, str]]:
    titles = [(c.id, c.title) for c in playbook.checks]
    if playbook.integrity.enabled:
        titles += list(INTEGRITY_TITLES.items())
    if smoke:
        titles += [("smoke-acceptance", SMOKE_TITLE)]
    return titles


def host_smoke(host: Host, playbook: Playbook, forced: bool | None) -> SmokeOptions | None:
    """The playbook's smoke settings with this host's inventory overrides, or None.
    --no-smoke turns every load off; --smoke turns the playbook's on, and a host whose
    inventory says `smoke: {enabled: false}` still stays out."""
    if forced is False:
        return None
    base = replace(playbook.smoke, enabled=True) if forced else playbook.smoke
    options = validate_smoke("inventory", "host '%s'" % host.name, host.smoke, base) \
        if host.smoke else base
    return options if options.enabled else None


def skipped_checks(playbook: Playbook, reason: str, smoke: bool) -> list[CheckResult]:
    """Every check the host would have had, marked as not run, so no host is missing
    from a matrix or a JUnit file."""
    return [CheckResult(id=cid, title=title, status="skip", message="not run: " + reason)
            for cid, title in check_titles(playbook, smoke)]


def check_host(host: Host, playbook: Playbook, signatures: list[dict[str, Any]],
               options: RunOptions, cancel: threading.Event | None = None,
               shared: SharedAnalysis | None = None,
               registry: Registry | None = None) -> list[HostResult]:
    """One inventory host through its connector: usually one result; one per container
    found when the host says `container: auto`."""
    started = time.monotonic()
    smoke = host_smoke(host, playbook, options.smoke)
    deadline = Deadline((host.timeout or options.timeout) +
                        (smoke.host_allowance() if smoke else 0.0))
    connector = (registry or Registry(options.settings)).for_host(host)
    if not connector.can_answer:
        shared = None  # asking needs stdin kept open for the controller's reply
    try:
        with connector.open(host, deadline, cancel) as session:
            targets = connector.targets(host, session, deadline, cancel)
            return [probe_target(host, target, playbook, signatures, smoke, deadline,
                                 cancel, shared) for target in targets]
    except TransportError as exc:
        return [failed_host(host, host.name, playbook, smoke, exc, started)]


def failed_host(host: Host, name: str, playbook: Playbook, smoke: SmokeOptions | None,
                exc: TransportError, started: float) -> HostResult:
    error = HostError(kind=exc.kind, message=exc.message)
    return HostResult(name=name, address=host.address, groups=host.groups,
                      status=host_status([], error), error=error,
                      duration_s=round(time.monotonic() - started, 3),
                      checks=skipped_checks(playbook, "%s (%s)" % (exc.kind, exc.message),
                                            smoke is not None))


def probe_target(host: Host, target: Target, playbook: Playbook,
                 signatures: list[dict[str, Any]], smoke: SmokeOptions | None,
                 deadline: Deadline, cancel: threading.Event | None,
                 shared: SharedAnalysis | None) -> HostResult:
    """The probe on one target, judged; its failures are values."""
    started = time.monotonic()
    name = target.name
    note = None
    try:
        plan = host_plan(host, signatures, playbook.integrity.plan(),
                         time_budget_s=deadline.seconds)
        plan["share_analysis"] = shared is not None
        if smoke is not None:
            plan["smoke"] = smoke_plan(host, smoke)
            plan["prompts"] = prompt_set()["prompts"]
        asked = None
        if shared is not None:
            def asked(line: bytes) -> bytes | None:
                return shared.answer(name, line, deadline, cancel)
        answer = target.session.run(probe_command(host), probe_payload(plan), cancel, asked)
        facts = decode_answer(answer, host)
        try:
            if shared is not None:
                note = shared.complete(name, facts)
            info, checks, numbers = judge_host(playbook, smoke, facts)
        except TransportError:
            raise
        except Exception as exc:  # JSON from the host, but not of the probe's shape
            raise TransportError("protocol", "answer is JSON but not shaped like the probe's "
                                 "facts (%s: %s)" % (type(exc).__name__, printable(
                                     str(exc).encode("utf-8", "replace"))))
    except TransportError as exc:
        if shared is not None:
            shared.abandon(name)
        return failed_host(host, name, playbook, smoke, exc, started)
    return HostResult(name=name, address=host.address, groups=host.groups,
                      status=host_status(checks, None), error=None,
                      duration_s=round(time.monotonic() - started, 3),
                      vllm=info, checks=checks, smoke=numbers, analysis=note)


def add_fleet_checks(run: RunResult, playbook: Playbook) -> None:
    """Checks that need every host: acceptance against the fleet median."""
    numbers = {h.name: h.smoke for h in run.hosts if h.smoke}
    if not numbers:
        return
    verdicts = fleet_checks(run.hosts, numbers, playbook.smoke)
    for host in run.hosts:
        if host.error is None and host.smoke is not None:
            host.checks.append(verdicts[host.name])
            host.status = host_status(host.checks, None)


def assemble(run: RunResult, hosts: list[Host], done: dict[str, list[HostResult]],
             playbook: Playbook,
             options: RunOptions, started: float, reason: str) -> RunResult:
    """The run so far, every inventory host included: those not finished are marked so."""
    run.hosts = []
    run.not_finished = []
    for host in hosts:
        if host.name in done:
            run.hosts.extend(done[host.name])
            continue
        run.not_finished.append(host.name)
        run.hosts.append(HostResult(
            name=host.name, address=host.address, groups=host.groups, status="error",
            error=HostError(kind="interrupted", message=reason),
            checks=skipped_checks(playbook, reason,
                                  host_smoke(host, playbook, options.smoke) is not None)))
    run.finished_at = now_iso()
    run.duration_s = round(time.monotonic() - started, 3)
    return run


def run_fleet(hosts: list[Host], playbook: Playbook, options: RunOptions,
              inventory_name: str, on_done: Callable[[HostResult], None] | None = None,
              on_start: Callable[[Host], None] | None = None,
              checkpoint: Callable[[RunResult], None] | None = None,
              checkpoint_every_s: float = 1.0) -> RunResult:
    """Check every host; results keep inventory order whatever order hosts finish in.
    `checkpoint` receives the run so far (at most once per `checkpoint_every_s`), so a
    killed controller still leaves a results file. On KeyboardInterrupt no new host starts,
    running hosts are cancelled, and the result is marked incomplete."""
    run = RunResult(started_at=now_iso(), inventory=inventory_name, playbook=playbook.source,
                    fleetcheck_version=__version__)
    started = time.monotonic()
    signatures = playbook.probe_signatures()
    shared = SharedAnalysis(signatures) if options.share_analysis else None
    done: dict[str, list[HostResult]] = {}
    registry = Registry(options.settings)
    cancel = threading.Event()
    pool = ThreadPoolExecutor(max_workers=max(1, options.parallel),
                              thread_name_prefix="fleetcheck-host")

    def submit(host: Host) -> tuple[str, list[HostResult]]:
        if cancel.is_set():
            raise TransportError("interrupted", "run interrupted before this host started")
        if on_start:
            on_start(host)
        return host.name, check_host(host, playbook, signatures, options, cancel, shared,
                                     registry)

    last_checkpoint = time.monotonic()
    try:
        pending = {pool.submit(submit, host) for host in hosts}
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in finished:
                name, results = future.result()
                done[name] = results
                if on_done:
                    for result in results:
                        on_done(result)
            if checkpoint and time.monotonic() - last_checkpoint >= checkpoint_every_s:
                began = time.monotonic()
                checkpoint(assemble(RunResult(**vars(run)), hosts, done, playbook, options,
                                    started, "not finished when this file was written"))
                last_checkpoint = time.monotonic()
                # never spend more than ~5% of the controller on checkpoints
                checkpoint_every_s = max(checkpoint_every_s, 20 * (last_checkpoint - began))
        run.complete = True
    except KeyboardInterrupt:
        cancel.set()
    finally:
        pool.shutdown(wait=run.complete, cancel_futures=True)
    assemble(run, hosts, done, playbook, options, started, "run interrupted (Ctrl-C) before "
             "this host finished")
    if run.complete:
        add_fleet_checks(run, playbook)
    return run
