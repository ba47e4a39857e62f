"""Confidence intervals for acceptance, standard library only (the tests hold them to
scipy.stats; the runtime never needs scipy).

The request is the unit: drafts within one request follow its prompt and are correlated,
so the mean acceptance length and the acceptance rate are ratios of sums over requests
(accepted / drafts, accepted / draft tokens) with a t-interval over requests from the
ratio's linearised variance. A position's rate gets a Wilson interval over drafts, which
takes the drafts as independent and so is the least uncertainty there can be.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

CONFIDENCE = 0.95
MAX_REQUESTS = 100_000  # "would decide" is not counted past this


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    method: str  # "t" (over requests), "wilson" (over drafts)
    n: int  # requests (t) or trials (wilson)
    # the per-request standard deviation in the estimate's units (t only): what the
    # number of requests that would decide is computed from
    unit_sd: float | None = None

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def as_json(self) -> dict:
        out = {"low": self.low, "high": self.high, "confidence": CONFIDENCE,
               "method": self.method, "n": self.n}
        if self.unit_sd is not None:
            out["unit_sd"] = self.unit_sd
        return out


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    tail = 0.5 * regularized_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile, by bisection on the CDF (to double precision)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if t_cdf(mid, df) < p:
            low = mid
        else:
            high = mid
        if high - low <= 1e-13 * max(1.0, high):
            break
    return (low + high) / 2.0


def z_quantile(p: float) -> float:
    return NormalDist().inv_cdf(p)


def wilson(successes: float, trials: float, confidence: float = CONFIDENCE) -> Interval | None:
    """Wilson's score interval of a proportion; None with no trials."""
    if trials <= 0:
        return None
    z = z_quantile(0.5 + confidence / 2.0)
    p = successes / trials
    denominator = 1.0 + z * z / trials
    centre = (p + z * z / (2.0 * trials)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / trials + z * z / (4.0 * trials * trials)) / denominator
    return Interval(max(0.0, centre - half), min(1.0, centre + half), "wilson", int(trials))


def mean_interval(values: list[float], confidence: float = CONFIDENCE) -> Interval | None:
    """The t-interval of a mean; None with fewer than two values."""
    return ratio_interval(values, [1.0] * len(values), confidence)


def ratio_interval(numerators: list[float], denominators: list[float],
                   confidence: float = CONFIDENCE) -> Interval | None:
    """The t-interval (n - 1 degrees of freedom) of sum(numerators) / sum(denominators)
    over n units, from the ratio's linearised variance: s^2 of the residuals
    y_i - R x_i, over n, divided by the mean denominator squared. With equal denominators
    this is the plain t-interval of y_i / x. None with fewer than two units or no
    denominator."""
    n = len(numerators)
    total = sum(denominators)
    if n < 2 or total <= 0:
        return None
    ratio = sum(numerators) / total
    residuals = [y - ratio * x for y, x in zip(numerators, denominators)]
    mean_x = total / n
    unit_sd = math.sqrt(sum(e * e for e in residuals) / (n - 1)) / mean_x
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * unit_sd / math.sqrt(n)
    return Interval(ratio - half, ratio + half, "t", n, unit_sd)


def shifted(interval: Interval | None, offset: float, low: float | None = None,
            high: float | None = None) -> Interval | None:
    """The interval moved by `offset` and clipped to what the quantity can be."""
    if interval is None:
        return None
    lo, hi = interval.low + offset, interval.high + offset
    if low is not None:
        lo, hi = max(lo, low), max(hi, low)
    if high is not None:
        lo, hi = min(lo, high), min(hi, high)
    return Interval(lo, hi, interval.method, interval.n, interval.unit_sd)


def widened(interval: Interval | None, floor: Interval | None) -> Interval | None:
    """The union of two intervals of one quantity: the request-level interval never
    narrower than the draft-level one (a load whose requests all agree has no variance
    between them, but its drafts are still finitely many)."""
    if interval is None or floor is None:
        return interval or floor
    return Interval(min(interval.low, floor.low), max(interval.high, floor.high),
                    interval.method, interval.n, interval.unit_sd)


def requests_to_decide(estimate: float, unit_sd: float, line: float,
                       confidence: float = CONFIDENCE) -> int | None:
    """About how many requests would put the interval wholly on one side of `line`, if
    the estimate and the per-request spread stayed as measured: the least n with
    t(n-1) * sd / sqrt(n) < |estimate - line|. None when no number would (the estimate
    is on the line) or more than MAX_REQUESTS would."""
    gap = abs(estimate - line)
    if gap == 0:
        return None
    if unit_sd == 0:
        return 2
    p = 0.5 + confidence / 2.0

    def decides(n: int) -> bool:
        return t_quantile(p, n - 1) * unit_sd / math.sqrt(n) < gap

    low = max(2, math.ceil((z_quantile(p) * unit_sd / gap) ** 2))  # z: never more than t
    if low > MAX_REQUESTS:
        return None
    if decides(low):
        return low
    high = low
    while not decides(high):  # t's answer lies above: double until it decides
        low, high = high, high * 2
        if low > MAX_REQUESTS:
            return None
    while high - low > 1:  # low does not decide, high does
        mid = (low + high) // 2
        low, high = (low, mid) if decides(mid) else (mid, high)
    return high if high <= MAX_REQUESTS else None
