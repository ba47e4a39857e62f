"""intervals.py (standard library only) against scipy.stats, the oracle here and only
here: the t quantile, the t-interval of a mean, Wilson's interval, the ratio's interval
over requests, and the number of requests that would decide."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from fleetcheck.intervals import (mean_interval, ratio_interval, requests_to_decide,
                                  t_quantile, widened, wilson)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 10, 29, 79, 199, 1000])
@pytest.mark.parametrize("p", [0.5, 0.8, 0.95, 0.975, 0.995, 0.9995, 0.025])
def test_t_quantile_is_scipys(p, df):
    assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("values", [
    [1.0, 2.0], [4.2, 5.1, 3.9, 6.0], [2.5] * 3 + [2.6], [1.0, 1.3, 4.0, 3.3, 2.2, 1.9, 4.0, 3.1],
])
def test_mean_interval_is_scipys_t_interval(values):
    got = mean_interval(values)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=sum(values) / len(values),
                                 scale=stats.sem(values))
    assert got.method == "t" and got.n == len(values)
    assert (got.low, got.high) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))


@pytest.mark.parametrize("k, n", [(0, 10), (1, 10), (5, 10), (10, 10), (11, 1000), (300, 1000),
                                  (0, 40), (37, 40), (1, 3)])
def test_wilson_is_scipys(k, n):
    want = stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
    got = wilson(k, n)
    assert got.low == pytest.approx(want.low, abs=1e-12)
    assert got.high == pytest.approx(want.high, abs=1e-12)
    assert got.n == n and got.method == "wilson"


def test_ratio_with_equal_denominators_is_the_t_interval_of_the_ratios():
    accepted, drafts = [12, 30, 18, 25, 9], [20] * 5
    got = ratio_interval(accepted, drafts)
    ratios = [a / d for a, d in zip(accepted, drafts)]
    low, high = stats.t.interval(0.95, 4, loc=sum(ratios) / 5, scale=stats.sem(ratios))
    assert (got.low, got.high) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))


def test_ratio_interval_is_centred_on_the_ratio_of_sums_with_the_linearised_variance():
    accepted, drafts = [5, 40, 12, 3], [10, 50, 30, 4]
    got = ratio_interval(accepted, drafts)
    ratio = sum(accepted) / sum(drafts)
    assert (got.low + got.high) / 2 == pytest.approx(ratio)
    residuals = [a - ratio * d for a, d in zip(accepted, drafts)]
    sd = math.sqrt(sum(e * e for e in residuals) / 3) / (sum(drafts) / 4)
    assert got.unit_sd == pytest.approx(sd)
    assert got.high - ratio == pytest.approx(stats.t.ppf(0.975, 3) * sd / 2)
    # requests of different sizes: the pooled ratio, not the mean of the ratios
    assert ratio != pytest.approx(sum(a / d for a, d in zip(accepted, drafts)) / 4)


def test_no_interval_without_two_requests_or_trials():
    assert ratio_interval([3], [4]) is None and mean_interval([1.0]) is None
    assert ratio_interval([0, 0], [0, 0]) is None and wilson(0, 0) is None


def test_widened_takes_the_union():
    t, w = ratio_interval([0, 0, 0], [10, 10, 10]), wilson(0, 30)
    assert (t.low, t.high) == (0.0, 0.0)
    assert widened(t, w).high == w.high > 0 and widened(t, w).method == "t"


@pytest.mark.parametrize("estimate, sd, line", [(4.0, 1.5, 4.3), (0.2, 0.3, 0.05),
                                                (5.0, 2.0, 4.75), (1.0, 0.1, 1.2)])
def test_requests_to_decide_is_the_least_n_whose_t_half_width_clears_the_gap(estimate, sd, line):
    n = requests_to_decide(estimate, sd, line)
    gap = abs(estimate - line)
    assert stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n) < gap
    assert n == 2 or stats.t.ppf(0.975, n - 2) * sd / math.sqrt(n - 1) >= gap


def test_requests_to_decide_on_the_line_is_none():
    assert requests_to_decide(4.0, 1.0, 4.0) is None
    assert requests_to_decide(4.0, 1.0, 4.0000001) is None  # more than MAX_REQUESTS
