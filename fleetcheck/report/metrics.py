"""Results as Prometheus metrics, in the text format node_exporter's textfile collector
reads: where a fleet's alerts already live. prometheus_client writes the text (names,
label escaping); the file is replaced atomically (a temp file beside it, then a rename), as
the collector requires, so a scrape never sees half a round.

The series follow the ecosystem's conventions: one series per status valued 0 or 1
(kube-state-metrics' states), `*_build_info{...} 1` for the build a host runs."""

from __future__ import annotations

import time
from typing import Any, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from fleetcheck.atomic_file import write_atomically
from fleetcheck.results import HostResult, RunResult, epoch_seconds
from fleetcheck.status import CHECK_STATUSES, HOST_STATUSES

PREFIX = "fleetcheck_"


def install_of(host: HostResult) -> str:
    """Where the install a host's checks judged lives (its site-packages), '' when none."""
    info = host.vllm
    return (info.site_packages or "") if info is not None else ""


def finished_timestamp(run: RunResult) -> float:
    """When the run ended, as Unix seconds (its start when it has no end)."""
    found = epoch_seconds(run.finished_at or run.started_at)
    return time.time() if found is None else found


def text_label(value: Any) -> str:
    return "" if value is None else str(value)


class ResultsCollector(Collector):
    """One run's results as metric families (collected once per write)."""

    def __init__(self, run: RunResult):
        self.run = run

    def collect(self) -> Iterator[GaugeMetricFamily]:
        run = self.run
        host_status = GaugeMetricFamily(
            PREFIX + "host_status", "1 for the host's status, 0 for the others",
            labels=["host", "status"])
        check_status = GaugeMetricFamily(
            PREFIX + "check_status", "1 for the check's status, 0 for the others",
            labels=["host", "install", "check", "status"])
        build = GaugeMetricFamily(
            PREFIX + "vllm_build_info", "The vLLM build a host's checked install holds",
            labels=["host", "install", "version", "commit"])
        served = GaugeMetricFamily(
            PREFIX + "served_info", "What each running vLLM server serves",
            labels=["host", "pid", "model", "drafter", "method"])
        rate = GaugeMetricFamily(
            PREFIX + "smoke_acceptance_rate", "Draft acceptance rate measured by the smoke "
            "load", labels=["host"])
        low = GaugeMetricFamily(
            PREFIX + "smoke_acceptance_rate_lower", "Lower bound of the acceptance rate's "
            "confidence interval", labels=["host"])
        high = GaugeMetricFamily(
            PREFIX + "smoke_acceptance_rate_upper", "Upper bound of the acceptance rate's "
            "confidence interval", labels=["host"])
        for host in run.hosts:
            for status in HOST_STATUSES:
                host_status.add_metric([host.name, status], 1.0 if host.status == status
                                       else 0.0)
            install = install_of(host)
            seen: set[str] = set()
            for check in host.checks:
                if check.id in seen:
                    continue
                seen.add(check.id)
                for status in CHECK_STATUSES:
                    check_status.add_metric([host.name, install, check.id, status],
                                            1.0 if check.status == status else 0.0)
            if host.vllm is not None and (host.vllm.version or host.vllm.commit):
                build.add_metric([host.name, install, text_label(host.vllm.version),
                                  text_label(host.vllm.commit)], 1.0)
            for server in served_servers(host):
                served.add_metric([host.name] + server, 1.0)
            measured = acceptance(host.smoke)
            if measured is not None:
                value, interval = measured
                rate.add_metric([host.name], value)
                if interval is not None:
                    low.add_metric([host.name], interval[0])
                    high.add_metric([host.name], interval[1])
        yield host_status
        yield check_status
        yield build
        yield served
        yield rate
        yield low
        yield high
        yield GaugeMetricFamily(PREFIX + "last_run_timestamp_seconds",
                                "When the last run finished (Unix seconds)",
                                value=finished_timestamp(run))
        yield GaugeMetricFamily(PREFIX + "run_duration_seconds", "How long the last run took",
                                value=float(run.duration_s))
        yield GaugeMetricFamily(PREFIX + "run_complete",
                                "1 when every host of the last run finished",
                                value=1.0 if run.complete else 0.0)


def served_servers(host: HostResult) -> list[list[str]]:
    """[pid, model, drafter, method] of each server judged (not the servers of other
    installs, nor the drafters only an expectation names), once per pid."""
    rows: dict[str, list[str]] = {}
    for entry in host.served or []:
        if not isinstance(entry, dict) or entry.get("pid") is None or \
                entry.get("judged") is False:
            continue
        target = entry.get("target") if isinstance(entry.get("target"), dict) else {}
        drafter = entry.get("drafter") if isinstance(entry.get("drafter"), dict) else {}
        names = entry.get("served_names") or []
        model = target.get("spec") or (names[0] if names else None)
        rows.setdefault(str(entry["pid"]), [str(entry["pid"]), text_label(model),
                                            text_label(drafter.get("spec")),
                                            text_label(entry.get("method"))])
    return list(rows.values())


def acceptance(smoke: dict[str, Any] | None) -> tuple[float, tuple[float, float] | None] | None:
    """(rate, (low, high) or None) when the smoke load measured one."""
    if not isinstance(smoke, dict):
        return None
    value = smoke.get("acceptance_rate")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    interval = (smoke.get("intervals") or {}).get("acceptance_rate")
    if isinstance(interval, dict) and all(isinstance(interval.get(k), (int, float))
                                          for k in ("low", "high")):
        return float(value), (float(interval["low"]), float(interval["high"]))
    return float(value), None


def metrics_text(run: RunResult) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ResultsCollector(run))
    return generate_latest(registry).decode("utf-8")


def write_metrics(run: RunResult, path: str) -> None:
    """The run's metrics at `path`, replaced whole (node_exporter reads `*.prom` files;
    the temporary file beside it is not one)."""
    write_atomically(path, [metrics_text(run)])
