"""Schedules hosts on a bounded pool, one deadline per host, and turns each host's probe
answer into a HostResult. A host's failure is a value in the results, never an exception
that stops the fleet."""

from __future__ import annotations

import datetime
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

from fleetcheck import __version__
from fleetcheck.connection_settings import ConnectionSettings
from fleetcheck.checks.plan import CheckPlan, MissingFacts, finish_run
from fleetcheck.checks.served_entries import served_summary
from fleetcheck.checks.waived import apply_waivers
from fleetcheck.drafter_expectations import DrafterExpectation
from fleetcheck.engine_logs import fill_engine_logs
from fleetcheck.expectations import BuildExpectation
from fleetcheck.faults import inject, internal_error
from fleetcheck.inventory import Host
from fleetcheck.playbook import Playbook
from fleetcheck.status import ErrorKind, Status
from fleetcheck.text import printable
from fleetcheck.wire_protocol import (cut_answer_field, decode_answer, host_plan, probe_command,
                                      probe_payload)
from fleetcheck.results import HostError, HostResult, RunResult, host_status, now_iso
from fleetcheck.shared_analysis import ALONE, QUESTION, SharedAnalysis
from fleetcheck.smoke_settings import SmokeSettings, prompt_set, smoke_plan, validate_smoke
from fleetcheck.waivers import Waiver
from fleetcheck.connectors import Registry
from fleetcheck.connectors.base import Answerer, Deadline, Target, TransportError
from fleetcheck.connectors.dialogue import CANCEL_GRACE_S

if TYPE_CHECKING:  # the SSH library loads with the first SSH host, not with the runner
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
    analysis_cache: str | None = None  # directory of the analysis cache; None: --no-cache
    # host name -> its expected build (expectations.resolve); empty: no build-expected check
    expected: dict[str, BuildExpectation] = field(default_factory=dict)
    # host name -> the drafter it must serve (drafter_expectations.resolve_drafters)
    drafters: dict[str, DrafterExpectation] = field(default_factory=dict)
    load_config: bool = True  # --no-config-load: drafter-loaded skips the loader child
    # host name -> its inventory waivers (waivers.host_waivers); the playbook's per build
    waivers: dict[str, tuple[Waiver, ...]] = field(default_factory=dict)


def host_smoke(host: Host, playbook: Playbook, forced: bool | None) -> SmokeSettings | None:
    """The playbook's smoke settings with this host's inventory overrides, or None.
    --no-smoke turns every load off; --smoke turns the playbook's on, and a host whose
    inventory says `smoke: {enabled: false}` still stays out."""
    if forced is False:
        return None
    base = replace(playbook.smoke, enabled=True) if forced else playbook.smoke
    options = validate_smoke("inventory", "host '%s'" % host.name, host.smoke, base) \
        if host.smoke else base
    return options if options.enabled else None


def smoke_planned(host: Host, playbook: Playbook, options: RunOptions) -> bool:
    """Whether the host would have had a smoke load (for its list of checks not run)."""
    try:
        return host_smoke(host, playbook, options.smoke) is not None
    except Exception:  # proven at load time (cli); a host's placeholder must not fail
        return False


def checks_for(playbook: Playbook, smoke: bool, options: RunOptions) -> CheckPlan:
    """The checks a host gets: whether it has a smoke load and whether any host expects a
    build (then every host gets build-expected) are per run and host."""
    return CheckPlan(playbook, smoke=smoke, build=bool(options.expected))


def check_host(host: Host, playbook: Playbook, signatures: list[dict[str, Any]],
               options: RunOptions, cancel: threading.Event | None = None,
               shared: SharedAnalysis | None = None,
               registry: Registry | None = None) -> list[HostResult]:
    """One inventory host through its connector: usually one result; one per container
    found when the host says `container: auto`. Whatever goes wrong is this host's error:
    a TransportError keeps its kind, anything else is a fleetcheck bug (kind `internal`)."""
    started = time.monotonic()
    smoke = None
    try:
        smoke = host_smoke(host, playbook, options.smoke)
        deadline = Deadline((host.timeout or options.timeout) +
                            (smoke.host_allowance() if smoke else 0.0))
        reach = host.connection_settings()  # all a connector is given of the inventory
        connector = (registry or Registry(options.settings)).for_host(reach)
        if not connector.can_answer:
            shared = None  # asking needs stdin kept open for the controller's reply
        with connector.open(reach, deadline, cancel) as session:
            targets = connector.targets(reach, session, deadline, cancel)
            if not targets:  # a connector (a third party's) that found nothing to probe
                raise TransportError("container", "the %s connection found nothing to "
                                     "probe on this host" % host.connection)
            return [probe_target(host, reach, target, playbook, signatures, options, smoke,
                                 deadline, cancel, shared) for target in targets]
    except TransportError as exc:
        error = host_error(exc)
    except Exception as exc:  # a bug in fleetcheck: this host's data, never the fleet's end
        error = internal_error(exc, "checking this host")
    return [failed_host(host, host.name, playbook, options, smoke, error, started)]


def host_error(exc: TransportError) -> HostError:
    where = cut_answer_field(exc.received) if exc.received else None
    cut = "; the answer was cut inside the field %s" % printable(where.encode("utf-8"), 200) \
        if where else ""
    return HostError(kind=exc.kind, message=exc.message + cut)


def failed_host(host: Host, name: str, playbook: Playbook, options: RunOptions,
                smoke: SmokeSettings | None, error: HostError, started: float) -> HostResult:
    return HostResult(name=name, address=host.destination, groups=host.groups,
                      status=host_status([], error), error=error,
                      duration_s=round(time.monotonic() - started, 3),
                      checks=checks_for(playbook, smoke is not None, options).not_run(
                          "%s (%s)" % (error.kind, error.message)))


def shared_answerer(shared: SharedAnalysis, name: str, deadline: Deadline,
                    cancel: threading.Event | None) -> Answerer:
    """What answers the probe's one question (its build's key) during the dialogue."""
    def asked(line: bytes) -> bytes | None:
        try:
            inject("shared", name)
            return shared.answer(name, line, deadline, cancel)
        except Exception as exc:  # a bug: recorded for the host, which analyses alone
            shared.record_bug(name, exc, "answering this host's shared-analysis question")
            return ALONE if line.startswith(QUESTION) else None
    return asked


def no_question(line: bytes) -> None:
    """Without shared analysis the probe asks nothing: its first line stays its answer's."""
    return None


def probe_target(host: Host, reach: ConnectionSettings, target: Target, playbook: Playbook,
                 signatures: list[dict[str, Any]], options: RunOptions,
                 smoke: SmokeSettings | None, deadline: Deadline,
                 cancel: threading.Event | None, shared: SharedAnalysis | None) -> HostResult:
    """The probe on one target, judged; its failures are values."""
    started = time.monotonic()
    name = target.name
    try:
        plan = host_plan(host, signatures, playbook.integrity.plan(),
                         time_budget_s=deadline.seconds)
        plan["share_analysis"] = shared is not None
        if playbook.patches:
            plan["patches"] = playbook.patch_signatures()
        if host.name in options.drafters:  # resolved on the host even where no server runs
            plan["served"]["drafters"] = [options.drafters[host.name].repo]
        if not options.load_config:
            plan["served"]["load_config"] = False
        if smoke is not None:
            plan["smoke"] = smoke_plan(host, smoke)
            plan["prompts"] = prompt_set(smoke.prompt_set)["prompts"]
        inject("plan", name)
        asked = shared_answerer(shared, name, deadline, cancel) if shared is not None \
            else no_question
        plan["input_held"] = True  # stdin stays open to the end: its close is a cancel
        session = target.session
        if getattr(session, "reads_engine_log", False):
            plan["served"]["engine_log"] = True
        answer = session.run(probe_command(reach), probe_payload(plan), cancel, asked)
        plan_checks = checks_for(playbook, smoke is not None, options)
        facts = decode_answer(answer, reach, plan_checks.required_facts(shared is not None),
                              lambda found: fill_engine_logs(found, session, cancel))
        note = None
        if shared is not None:
            facts, note = shared.complete(name, facts)
        inject("judge", name)
        info, checks, numbers = plan_checks.judge(facts, options.expected.get(host.name), smoke)
    except TransportError as exc:
        error = host_error(exc)
    except MissingFacts as exc:
        error = HostError(kind=ErrorKind.PROTOCOL.value, message=str(exc))
    except Exception as exc:  # a bug in fleetcheck: this host's data, never the fleet's end
        error = internal_error(exc, "checking this host")
    else:
        bugs = shared.internal_errors(name) if shared is not None else []
        return HostResult(name=name, address=host.destination, groups=host.groups,
                          status=host_status(checks, None, bugs), error=None,
                          duration_s=round(time.monotonic() - started, 3),
                          vllm=info, checks=checks, smoke=numbers, analysis=note,
                          internal_errors=bugs, served=served_summary(facts),
                          container=target.session.placement())
    # where the probe was to run (a container found, a pod) says most when it failed there
    failed = replace(failed_host(host, name, playbook, options, smoke, error, started),
                     container=placement_of(target))
    if shared is None:
        return failed
    shared.abandon(name)
    return replace(failed, internal_errors=shared.internal_errors(name))


def placement_of(target: Target) -> dict[str, str] | None:
    try:
        return target.session.placement()
    except Exception:  # a third party's session: its placement is not worth the host
        return None


def assemble(run: RunResult, hosts: list[Host], done: dict[str, list[HostResult]],
             playbook: Playbook, options: RunOptions, started: float, reason: str,
             placeholders: dict[str, HostResult] | None = None) -> RunResult:
    """The run so far, every inventory host included (a host checked as several containers
    with each of its results): those not finished are marked so. `placeholders` keeps each
    unfinished host's entry from one call to the next (so the results writer encodes it
    once)."""
    placeholders = {} if placeholders is None else placeholders
    results: list[HostResult] = []
    not_finished: list[str] = []
    for host in hosts:
        if host.name in done:
            results.extend(done[host.name])
            continue
        not_finished.append(host.name)
        entry = placeholders.get(host.name)
        if entry is None:
            entry = placeholders[host.name] = HostResult(
                name=host.name, address=host.destination, groups=host.groups, status=Status.ERROR,
                error=HostError(kind="interrupted", message=reason),
                checks=checks_for(playbook, smoke_planned(host, playbook, options),
                                  options).not_run(reason))
        results.append(entry)
    return replace(run, hosts=results, not_finished=not_finished, finished_at=now_iso(),
                   duration_s=round(time.monotonic() - started, 3))


def failed_worker(host: Host, playbook: Playbook, options: RunOptions,
                  exc: BaseException) -> HostResult:
    """A host whose worker itself raised (check_host keeps its own failures as data, so
    this is a bug outside it): still a result, of kind `internal`."""
    error = internal_error(exc, "scheduling this host")
    return HostResult(name=host.name, address=host.destination, groups=host.groups,
                      status=Status.ERROR, error=error,
                      checks=checks_for(playbook, smoke_planned(host, playbook, options),
                                        options).not_run("internal (%s)" % error.message))


def analysis_cache(options: RunOptions, signatures: list[dict[str, Any]]) -> Any:
    if options.analysis_cache is None:
        return None
    from fleetcheck.analysis_cache import AnalysisCache
    return AnalysisCache(options.analysis_cache, signatures)


CHECKPOINT_CPU_SHARE = 0.05  # of the controller's CPU, at most, spent on checkpoints
CHECKPOINT_STALE_S = 1.0  # past this, a checkpoint is written whatever it costs


def stop_running(futures: dict[Future, Host]) -> list[Future]:
    """After a cancel: no host starts, and the running ones are given their grace to stop
    (each probe sees its stdin close, stops its load and tears down a server it launched)
    before the run ends; a second Ctrl-C ends the wait. Returns the hosts' futures that
    finished with a result."""
    for future in futures:
        future.cancel()
    try:
        wait([f for f in futures if not f.done()], timeout=CANCEL_GRACE_S + 5.0)
    except KeyboardInterrupt:
        pass
    return [f for f in futures if f.done() and not f.cancelled() and f.exception() is None]


def run_fleet(hosts: list[Host], playbook: Playbook, options: RunOptions,
              inventory_name: str, on_done: Callable[[HostResult], None] | None = None,
              on_start: Callable[[Host], None] | None = None,
              checkpoint: Callable[[RunResult], None] | None = None) -> RunResult:
    """Check every host; results keep inventory order whatever order hosts finish in.

    `checkpoint` receives the run so far: once before any host starts, then whenever hosts
    have finished, as often as that costs at most CHECKPOINT_CPU_SHARE of the controller's
    CPU (after every host on small fleets), and at least every CHECKPOINT_STALE_S (or 20x
    one checkpoint's cost, if more). A host is reported to `on_done` only once a checkpoint
    holds it, so a host the progress shows as done is in the file even after a kill -9.
    On KeyboardInterrupt no new host starts, running hosts are cancelled, and the result
    is marked incomplete."""
    run = RunResult(started_at=now_iso(), inventory=inventory_name, playbook=playbook.source,
                    fleetcheck_version=__version__)
    started = time.monotonic()
    signatures = playbook.probe_signatures()
    shared = SharedAnalysis(signatures, analysis_cache(options, signatures)) \
        if options.share_analysis else None
    done: dict[str, list[HostResult]] = {}
    unreported: list[HostResult] = []
    placeholders: dict[str, HostResult] = {}
    registry = Registry(options.settings)
    cancel = threading.Event()
    complete = False  # every host finished (no Ctrl-C)
    cpu_at_start = time.process_time()  # the budget counts this run's CPU, not start-up's
    spent = 0.0  # this thread's CPU seconds in checkpoints
    last_cost = 0.0
    last_written = time.monotonic()

    def write_checkpoint() -> None:
        nonlocal spent, last_cost, last_written
        began = time.thread_time()
        checkpoint(assemble(run, hosts, done, playbook, options, started,
                            "not finished when this file was written", placeholders))
        last_cost = time.thread_time() - began
        spent += last_cost
        last_written = time.monotonic()

    def report(results: list[HostResult]) -> None:
        if on_done:
            for result in results:
                try:
                    on_done(result)
                except Exception:  # a progress display must never stop the run
                    pass
        results.clear()

    def stale_after() -> float:
        """Seconds until a checkpoint is due whatever it costs."""
        return max(CHECKPOINT_STALE_S, 20 * last_cost) - (time.monotonic() - last_written)

    def checkpoint_due(final: bool) -> bool:
        if final:
            return True
        if spent + last_cost <= CHECKPOINT_CPU_SHARE * (time.process_time() - cpu_at_start):
            return True
        return stale_after() <= 0

    def submit(host: Host) -> tuple[str, list[HostResult]]:
        if cancel.is_set():
            raise TransportError("interrupted", "run interrupted before this host started")
        if on_start:
            on_start(host)
        try:
            return host.name, check_host(host, playbook, signatures, options, cancel, shared,
                                         registry)
        except Exception as exc:  # check_host keeps its failures as data; defence in depth
            return host.name, [failed_worker(host, playbook, options, exc)]

    pool = ThreadPoolExecutor(max_workers=max(1, options.parallel),
                              thread_name_prefix="fleetcheck-host")
    futures: dict[Future, Host] = {}
    try:
        if checkpoint:
            write_checkpoint()
        futures = {pool.submit(submit, host): host for host in hosts}
        pending = set(futures)
        while pending:
            wait_s = max(0.01, min(0.5, stale_after())) if unreported else 0.5
            finished, pending = wait(pending, timeout=wait_s, return_when=FIRST_COMPLETED)
            for future in finished:
                host = futures[future]
                try:
                    name, results = future.result()
                except Exception as exc:
                    name, results = host.name, [failed_worker(host, playbook, options, exc)]
                done[name] = results
                unreported.extend(results)
            if not unreported:
                continue
            if checkpoint is None:
                report(unreported)
            elif checkpoint_due(not pending):
                write_checkpoint()
                report(unreported)
        complete = True
    except KeyboardInterrupt:
        cancel.set()
        for future in stop_running(futures):  # hosts that finished all the same
            name, results = future.result()
            if not any(r.error is not None and r.error.kind == ErrorKind.INTERRUPTED.value
                       for r in results):
                done.setdefault(name, results)
    finally:
        pool.shutdown(wait=complete, cancel_futures=True)
    report(unreported)
    run = assemble(replace(run, complete=complete), hosts, done, playbook, options, started,
                   "run interrupted (Ctrl-C) before this host finished")
    return apply_waivers(finish_run(run, playbook, options.drafters), options.waivers,
                         playbook.waive, datetime.datetime.now(datetime.timezone.utc).date())
