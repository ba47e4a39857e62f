"""Geometry for the report's inline SVG charts (no plotting service, no external JS):
acceptance bars with the fleet median, per-position acceptance curves, host-state bar.
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


@dataclass
class AcceptanceChart:
    bars: list[Bar]
    median: float | None
    median_x: float | None
    scale_max: float
    height: int
    label_width: int = LABEL_WIDTH
    plot_width: int = PLOT_WIDTH


def acceptance_chart(hosts: list[HostResult]) -> AcceptanceChart | None:
    measured = [(h, h.smoke["mean_acceptance_length"]) for h in hosts
                if h.smoke and h.smoke.get("mean_acceptance_length") is not None]
    if not measured:
        return None
    values = [v for _, v in measured]
    scale_max = max(max(values), 1.0) * 1.1
    median = statistics.median(values)
    bars = [Bar(name=h.name, value=v, y=i * (BAR_HEIGHT + 4) + 4,
                width=round(PLOT_WIDTH * v / scale_max, 1), status=h.status)
            for i, (h, v) in enumerate(measured)]
    return AcceptanceChart(bars=bars, median=median,
                           median_x=round(LABEL_WIDTH + PLOT_WIDTH * median / scale_max, 1),
                           scale_max=scale_max, height=len(bars) * (BAR_HEIGHT + 4) + 24)


def position_curve(per_position: list[float], width: int = 300, height: int = 90) -> dict:
    """Polyline points for acceptance rate (0..1) by draft position."""
    if not per_position:
        return {}
    step = width / max(1, len(per_position) - 1)
    points = " ".join("%.1f,%.1f" % (30 + i * step, 10 + (1 - min(1.0, max(0.0, r))) * height)
                      for i, r in enumerate(per_position))
    return {"points": points, "width": width + 40, "height": height + 30,
            "last_x": 30 + (len(per_position) - 1) * step, "positions": len(per_position),
            "base_y": 10 + height}


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
