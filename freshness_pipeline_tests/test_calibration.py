"""The verification sample's calibration test (science.calibration): quiet when the forecasts
are right, loud when pages change more (or less) than forecast, and blind to everything but
verified fetches that compared content."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from freshness_pipeline.science.calibration import calibration, verify_calibration


def draws(n: int, scale: float, seed: int) -> tuple[pl.Series, pl.Series]:
    """Forecasts p and outcomes drawn with probability min(1, scale x p)."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.6, n)
    changed = rng.random(n) < np.minimum(1.0, scale * p)
    return pl.Series(p), pl.Series(changed)


@pytest.mark.parametrize("seed", range(5))
def test_right_forecasts_stay_within_three_standard_errors(seed):
    cal = calibration(*draws(2_000, 1.0, seed))
    assert cal.n == 2_000
    assert abs(cal.z) < 3.0
    assert cal.observed == pytest.approx(cal.predicted, abs=0.04)


@pytest.mark.parametrize(("scale", "sign"), [(1.5, 1.0), (0.6, -1.0)])
def test_rates_too_low_or_too_high_show_in_z(scale, sign):
    cal = calibration(*draws(400, scale, 7))
    assert sign * cal.z > 3.0


def test_z_is_the_standardized_count_and_brier_the_mean_square():
    cal = calibration(pl.Series([0.5, 0.5, 0.2, 0.8]), pl.Series([True, True, False, True]))
    # changes 3, forecast 2.0, variance 0.25 + 0.25 + 0.16 + 0.16 = 0.82
    assert cal.z == pytest.approx(1.0 / math.sqrt(0.82))
    assert cal.brier == pytest.approx((0.25 + 0.25 + 0.04 + 0.04) / 4)
    assert (cal.predicted, cal.observed) == (pytest.approx(0.5), pytest.approx(0.75))


def test_unusable_rows_are_skipped_and_certain_forecasts_give_no_z():
    cal = calibration(
        pl.Series([None, 1.5, -0.1, float("nan"), 1.0, 0.0]),
        pl.Series([True, True, True, True, True, None]),
    )
    assert cal.n == 1  # only (1.0, True): the others lack a probability or an outcome
    assert cal.z == 0.0
    empty = calibration(pl.Series([], dtype=pl.Float64), pl.Series([], dtype=pl.Boolean))
    assert empty.n == 0 and empty.z == 0.0 and math.isnan(empty.predicted)


def test_only_verified_fetches_that_compared_content_count():
    # what the fetch stage writes: the plan's reason and forecast beside each outcome
    results = pl.DataFrame(
        {
            "url": [f"u{i}" for i in range(7)] + ["not-planned"],
            "plan_reason": ["verify", "verify", "verify", "priority", "verify", "verify", "verify"]
            + ["verify"],
            "outcome": [
                "changed",  # counted
                "not_modified",  # counted: unchanged
                "new",  # a first fetch compares nothing
                "changed",  # chosen by priority: not a random sample
                "error",  # saw no content
                "changed",  # a sitemap hint set its forecast: the fetch stage left it null
                "unchanged",  # counted
                "changed",  # no forecast to compare with
            ],
            "expected_change": [0.1, 0.2, 0.3, 0.4, 0.5, None, 0.7, None],
        }
    )
    cal = verify_calibration(results)
    assert cal.n == 3
    assert cal.predicted == pytest.approx((0.1 + 0.2 + 0.7) / 3)
    assert cal.observed == pytest.approx(1 / 3)


def test_results_without_forecasts_judge_nothing():
    results = pl.DataFrame({"url": ["u"], "plan_reason": ["verify"], "outcome": ["changed"]})
    assert verify_calibration(results).n == 0
    assert verify_calibration(results.clear()).n == 0


def test_the_exact_tail_is_the_binomial_one_when_every_forecast_is_equal():
    """With equal forecasts the count is binomial: the exact tail can be checked by hand."""
    from freshness_pipeline.science.calibration import count_p_value

    p = np.full(7, 0.3)
    pmf = [math.comb(7, k) * 0.3**k * 0.7 ** (7 - k) for k in range(8)]
    assert count_p_value(p, 0) == pytest.approx(2 * pmf[0])
    assert count_p_value(p, 6) == pytest.approx(2 * (pmf[6] + pmf[7]))
    assert count_p_value(p, 2) == pytest.approx(1.0)  # the middle: capped at 1
    # past the exact limit, the normal approximation agrees with the exact sum
    many = np.random.default_rng(0).uniform(0.1, 0.5, 6_000)
    few = many[:5_000]
    hits = int(few.sum() + 3 * math.sqrt((few * (1 - few)).sum()))
    exact = count_p_value(few, hits)
    approx = count_p_value(np.r_[few, np.zeros(1_001)], hits)  # zeros add nothing
    assert approx == pytest.approx(exact, rel=0.1)


def test_a_handful_of_pages_is_judged_by_the_exact_tail_not_by_z():
    """Seven pages forecast at 0.3 that all stayed unchanged give z = -1.7: no alarm, and the
    exact tail says the same (p = 0.16); 7 pages at 0.05 with one change give z = +1.7 but the
    exact tail is 0.6. Where z alone would cry wolf (one change among pages forecast at
    0.001: z = +11), the exact tail (p = 0.014) does not call it a surprise either."""
    quiet = calibration(pl.Series([0.3] * 7), pl.Series([False] * 7))
    assert not quiet.surprising and quiet.p_value == pytest.approx(2 * 0.7**7)
    rare = calibration(pl.Series([0.001] * 7), pl.Series([True] + [False] * 6))
    assert rare.z > 10 and not rare.surprising
    assert "consistent" in rare.verdict()
    # and a real miss is one: 40 pages forecast at 0.05, 12 changed
    miss = calibration(pl.Series([0.05] * 40), pl.Series([True] * 12 + [False] * 28))
    assert miss.surprising and "more often" in miss.verdict()
