"""Geometry for the report's inline SVG charts (no plotting service, no external JS):
acceptance bars with their intervals and the fleet median, per-position acceptance curves
with their intervals, host-state bar.
Only numbers and host names go in; the template escapes every name."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from fleetcheck.results import HostResult

BAR_HEIGHT = 16
LABEL_WIDTH = 220
PLOT_WIDTH = 420


@dataclass
class Bar:
    name: str
    value: float
    y: int
    width: float
    status: str
    low: float | None = None  # the 95% interval, when there is one
    high: float | None = None
    low_x: float | None = None
    high_x: float | None = None


@dataclass
class AcceptanceChart:
    bars: list[Bar]
    median: float | None
    median_x: float | None
    scale_max: float
    height: int
    label_width: int = LABEL_WIDTH
    plot_width: int = PLOT_WIDTH


def interval(smoke: dict, name: str) -> dict | None:
    found = (smoke.get("intervals") or {}).get(name)
    return found if isinstance(found, dict) else None


def acceptance_chart(hosts: list[HostResult]) -> AcceptanceChart | None:
    """Mean acceptance length per host with its 95% interval as a whisker, lowest first
    (the hosts to look at on top), against the fleet median."""
    measured = [(h, h.smoke["mean_acceptance_length"]) for h in hosts
                if h.smoke and h.smoke.get("mean_acceptance_length") is not None]
    if not measured:
        return None
    measured.sort(key=lambda pair: pair[1])
    values = [v for _, v in measured]
    highs = [(interval(h.smoke, "mean_acceptance_length") or {}).get("high") or v
             for h, v in measured]
    scale_max = max(max(highs), max(values), 1.0) * 1.1
    median = statistics.median(values)

    def x(value: float) -> float:
        return round(LABEL_WIDTH + PLOT_WIDTH * min(value, scale_max) / scale_max, 1)

    bars = []
    for i, (h, v) in enumerate(measured):
        ci = interval(h.smoke, "mean_acceptance_length")
        bars.append(Bar(name=h.name, value=v, y=i * (BAR_HEIGHT + 4) + 4,
                        width=round(PLOT_WIDTH * v / scale_max, 1), status=h.status,
                        low=ci["low"] if ci else None, high=ci["high"] if ci else None,
                        low_x=x(ci["low"]) if ci else None, high_x=x(ci["high"]) if ci else None))
    return AcceptanceChart(bars=bars, median=median, median_x=x(median), scale_max=scale_max,
                           height=len(bars) * (BAR_HEIGHT + 4) + 24)


def position_curve(per_position: list[float], intervals: list | None = None, width: int = 300,
                   height: int = 90) -> dict:
    """Polyline points for acceptance rate (0..1) by draft position, with each position's
    95% Wilson interval as a vertical segment and a band through them. A curve that falls
    to 0 after position 4-5 with tight intervals is the missing-window signature; a weak
    drafter's curve is low everywhere, or wide where it has few drafts."""
    if not per_position:
        return {}
    step = width / max(1, len(per_position) - 1)

    def y(rate: float) -> float:
        return round(10 + (1 - min(1.0, max(0.0, rate))) * height, 1)

    points = " ".join("%.1f,%.1f" % (30 + i * step, y(r)) for i, r in enumerate(per_position))
    segments = []
    for i, (rate, ci) in enumerate(zip(per_position, intervals or [])):
        if isinstance(ci, dict):
            segments.append({"x": round(30 + i * step, 1), "y_low": y(ci["low"]),
                             "y_high": y(ci["high"]), "position": i, "rate": rate,
                             "low": ci["low"], "high": ci["high"]})
    band = ""
    if segments and len(segments) == len(per_position):
        band = " ".join("%.1f,%.1f" % (s["x"], s["y_high"]) for s in segments) + " " + \
            " ".join("%.1f,%.1f" % (s["x"], s["y_low"]) for s in reversed(segments))
    return {"points": points, "width": width + 40, "height": height + 30,
            "last_x": 30 + (len(per_position) - 1) * step, "positions": len(per_position),
            "base_y": 10 + height, "segments": segments, "band": band}


def state_bar(counts: dict[str, int], width: int = 600) -> list[dict]:
    """Segments of one horizontal bar, one per host state, proportional to the count."""
    total = sum(counts.values())
    segments, x = [], 0.0
    for state, count in counts.items():
        if not count:
            continue
        w = width * count / total
        segments.append({"state": state, "count": count, "x": round(x, 1), "width": round(w, 1)})
        x += w
    return segments
