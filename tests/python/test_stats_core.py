"""hushmon.stats against SciPy and published values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from hushmon.stats import (
    AlphaSpender,
    cliffs_delta,
    hedges_g,
    hodges_lehmann_shift,
    mann_whitney_u,
    median_ci,
    relative_difference,
    t_ci,
)
from hushmon.stats.intervals import median_ci_ranks
from hushmon.stats.ranktests import min_exact_p

RNG = np.random.default_rng(20261122)


def test_t_ci_matches_scipy() -> None:
    x = RNG.normal(430.7, 1.3, size=22)  # the seed's Table 3, 0 %
    ci = t_ci(x, 0.99)
    low, high = sps.t.interval(0.99, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    assert ci.low == pytest.approx(low, rel=1e-12)
    assert ci.high == pytest.approx(high, rel=1e-12)
    assert ci.estimate == pytest.approx(x.mean())
    assert math.isnan(t_ci([1.0]).low)


def test_median_ci_published_ranks() -> None:
    # Le Boudec, "Performance Evaluation", Table A.1 / Hoefler & Belli: n=10
    # at 95 % uses the 2nd and 9th order statistics (coverage 97.85 %).
    j, k, cov = median_ci_ranks(10, 0.95)  # type: ignore[misc]
    assert (j, k) == (2, 9)
    assert cov == pytest.approx(0.978515625)
    # n=6: only (1, 6) reaches 95 % (coverage 1 - 2/64)
    assert median_ci_ranks(6, 0.95) == (1, 6, pytest.approx(0.96875))
    assert median_ci_ranks(5, 0.95) is None
    # n = 100 at 95 %: ranks 40 and 61 (Le Boudec)
    j, k, _ = median_ci_ranks(100, 0.95)  # type: ignore[misc]
    assert (j, k) == (40, 61)


def test_median_ci_against_scipy_quantile_test() -> None:
    x = RNG.exponential(1.0, size=31)
    ci = median_ci(x, 0.95)
    ref = sps.quantile_test(x, q=np.median(x), p=0.5).confidence_interval(0.95)
    # SciPy's interval is the "exact" binomial one built the same way; both
    # are bounded by order statistics with at least 95 % coverage.
    assert ci.low == pytest.approx(ref.low)
    assert ci.high == pytest.approx(ref.high)
    assert ci.coverage >= 0.95


@pytest.mark.parametrize("alternative", ["greater", "less", "two-sided"])
@pytest.mark.parametrize(("nx", "ny"), [(3, 4), (7, 5), (12, 15)])
def test_mann_whitney_exact_matches_scipy(alternative: str, nx: int, ny: int) -> None:
    x = RNG.normal(0.3, 1, size=nx)
    y = RNG.normal(0, 1, size=ny)
    ours = mann_whitney_u(x, y, alternative, method="exact")  # type: ignore[arg-type]
    ref = sps.mannwhitneyu(x, y, alternative=alternative, method="exact")
    assert ours.u == pytest.approx(ref.statistic)
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)


@pytest.mark.parametrize("alternative", ["greater", "less", "two-sided"])
def test_mann_whitney_asymptotic_matches_scipy_with_ties(alternative: str) -> None:
    x = RNG.integers(0, 6, size=40).astype(float)
    y = RNG.integers(1, 7, size=35).astype(float)
    ours = mann_whitney_u(x, y, alternative, method="asymptotic")  # type: ignore[arg-type]
    ref = sps.mannwhitneyu(x, y, alternative=alternative, method="asymptotic")
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)


def test_mann_whitney_exact_with_ties_is_the_permutation_p() -> None:
    x = np.array([0.0, 0.0, 5.0, 7.0, 7.0])
    y = np.array([0.0, 1.0, 1.0, 5.0])
    ours = mann_whitney_u(x, y, "greater", method="exact")
    ref = sps.permutation_test(
        (x, y),
        lambda a, b: sps.mannwhitneyu(a, b, method="asymptotic").statistic,
        permutation_type="independent",
        alternative="greater",
        n_resamples=np.inf,
    )
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)


def test_mann_whitney_separation_and_min_p() -> None:
    r = mann_whitney_u([5, 6, 7, 8, 9], [0, 1, 2, 3, 4], "greater")
    assert r.p_value == pytest.approx(1 / 252)
    assert min_exact_p(5, 5) == pytest.approx(1 / 252)
    with pytest.raises(ValueError):
        mann_whitney_u([], [1.0])


def test_effect_sizes() -> None:
    x = np.array([3.0, 4.0, 5.0, 9.0])
    y = np.array([1.0, 2.0, 3.0])
    # pairs: 11 greater, 1 tie, 0 less of 12
    assert cliffs_delta(x, y) == pytest.approx(11 / 12)
    diffs = (x[:, None] - y[None, :]).ravel()
    assert hodges_lehmann_shift(x, y) == pytest.approx(np.median(diffs))
    a = RNG.normal(1, 1, 20)
    b = RNG.normal(0, 1, 25)
    d = (a.mean() - b.mean()) / math.sqrt((19 * a.var(ddof=1) + 24 * b.var(ddof=1)) / 43)
    assert hedges_g(a, b) == pytest.approx(d * (1 - 3 / (4 * 45 - 9)))
    rel = relative_difference(a + 100, b + 100, 0.99)
    welch = sps.ttest_ind(a, b, equal_var=False).confidence_interval(0.99)
    base = (b + 100).mean()
    assert rel.low == pytest.approx(100 * welch.low / base, rel=1e-9)
    assert rel.high == pytest.approx(100 * welch.high / base, rel=1e-9)


def test_alpha_spender_never_exceeds_alpha() -> None:
    spender = AlphaSpender(alpha=0.01, max_runs=20)
    levels = []
    for runs in range(1, 21):
        n_x, n_y = runs // 2, runs - runs // 2
        look = spender.look(runs, min_exact_p(n_x, n_y), lambda: 0.5)
        levels.append(look.level)
        assert not look.rejected
    assert sum(levels) <= 0.01 + 1e-15
    assert spender.spent <= 0.01 + 1e-15
    # early looks cannot reject (min p of 1 vs 1 run is 1/2): no alpha spent there
    assert levels[0] == 0.0


def test_sequential_aa_false_positive_rate_by_simulation() -> None:
    """The whole sequential rule on null data: detections <= alpha."""
    rng = np.random.default_rng(7)
    trials, detections = 400, 0
    for _ in range(trials):
        spender = AlphaSpender(alpha=0.05, max_runs=16)
        arms = rng.permutation([0, 1] * 8)
        values = rng.lognormal(0, 1, size=16)
        for runs in range(2, 17):
            a = values[:runs][arms[:runs] == 1]
            b = values[:runs][arms[:runs] == 0]
            if a.size == 0 or b.size == 0:
                continue
            look = spender.look(
                runs,
                min_exact_p(a.size, b.size),
                lambda a=a, b=b: mann_whitney_u(a, b, "greater").p_value,
            )
            if look.rejected:
                detections += 1
                break
    # alpha = 0.05: expected <= 20 of 400; 35 is beyond any plausible chance
    assert detections <= 35
