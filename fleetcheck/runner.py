"""Schedules hosts on a bounded pool, one deadline per host, and turns each host's probe
answer into a HostResult. A host's failure is a value in the results, never an exception
that stops the fleet."""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from fleetcheck import __version__
from fleetcheck.checks.fixes import judge_fix
from fleetcheck.checks.integrity import TITLES as INTEGRITY_TITLES
from fleetcheck.checks.integrity import judge_integrity
from fleetcheck.checks.version import vllm_info
from fleetcheck.inventory import Host
from fleetcheck.playbook import Playbook
from fleetcheck.remote import decode_answer, host_plan, probe_command, probe_payload
from fleetcheck.results import (CheckResult, HostError, HostResult, RunResult,
                                host_status)
from fleetcheck.transport import Deadline, SshSettings, TransportError, run_on_host

DEFAULT_PARALLEL = 32
DEFAULT_TIMEOUT = 60.0


@dataclass
class RunOptions:
    settings: SshSettings
    parallel: int = DEFAULT_PARALLEL
    timeout: float = DEFAULT_TIMEOUT


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def judge_host(playbook: Playbook, facts: dict[str, Any]) -> tuple[Any, list[CheckResult]]:
    info = vllm_info(facts)
    checks = [judge_fix(check, facts, info.version) for check in playbook.checks]
    checks += judge_integrity(facts, playbook.integrity.import_check)
    return info, checks


def check_titles(playbook: Playbook) -> list[tuple[str, str]]:
    titles = [(c.id, c.title) for c in playbook.checks]
    if playbook.integrity.enabled:
        titles += list(INTEGRITY_TITLES.items())
    return titles


def skipped_checks(playbook: Playbook, reason: str) -> list[CheckResult]:
    return [CheckResult(id=cid, title=title, status="skip", message="not run: " + reason)
            for cid, title in check_titles(playbook)]


def check_host(host: Host, playbook: Playbook, signatures: list[dict[str, Any]],
               options: RunOptions) -> HostResult:
    started = time.monotonic()
    deadline = Deadline(host.timeout or options.timeout)
    error = None
    info = None
    checks: list[CheckResult] = []
    try:
        plan = host_plan(host, signatures, playbook.integrity.plan(),
                         time_budget_s=deadline.seconds)
        answer = run_on_host(host, probe_command(host), probe_payload(plan),
                             options.settings, deadline)
        facts = decode_answer(answer, host)
        info, checks = judge_host(playbook, facts)
    except TransportError as exc:
        error = HostError(kind=exc.kind, message=exc.message)
        checks = skipped_checks(playbook, "%s (%s)" % (exc.kind, exc.message))
    return HostResult(name=host.name, address=host.address, groups=host.groups,
                      status=host_status([] if error else checks, error),
                      error=error, duration_s=round(time.monotonic() - started, 3),
                      vllm=info, checks=checks)


def run_fleet(hosts: list[Host], playbook: Playbook, options: RunOptions,
              inventory_name: str, on_done: Callable[[HostResult], None] | None = None,
              on_start: Callable[[Host], None] | None = None) -> RunResult:
    """Check every host; results keep inventory order whatever order hosts finish in.
    On KeyboardInterrupt no new host starts and the result is marked incomplete."""
    run = RunResult(started_at=now_iso(), inventory=inventory_name, playbook=playbook.source,
                    fleetcheck_version=__version__)
    started = time.monotonic()
    signatures = playbook.probe_signatures()
    done: dict[str, HostResult] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, options.parallel),
                              thread_name_prefix="fleetcheck-host")
    futures: dict[Future[HostResult], Host] = {}

    def submit(host: Host) -> HostResult:
        if on_start:
            on_start(host)
        return check_host(host, playbook, signatures, options)

    try:
        for host in hosts:
            futures[pool.submit(submit, host)] = host
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in finished:
                result = future.result()
                done[result.name] = result
                if on_done:
                    on_done(result)
        run.complete = True
    except KeyboardInterrupt:
        for future in futures:
            future.cancel()
    finally:
        pool.shutdown(wait=run.complete, cancel_futures=True)
    for host in hosts:
        if host.name in done:
            run.hosts.append(done[host.name])
        else:
            run.not_finished.append(host.name)
            run.hosts.append(HostResult(
                name=host.name, address=host.address, groups=host.groups, status="error",
                error=HostError(kind="interrupted", message="run interrupted before this host finished"),
                checks=skipped_checks(playbook, "run interrupted")))
    run.finished_at = now_iso()
    run.duration_s = round(time.monotonic() - started, 3)
    return run
