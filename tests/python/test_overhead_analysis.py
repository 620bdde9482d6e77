"""hushmon overhead's arithmetic on synthetic runs: anomaly detection, the
slowdown table and its intervals, the interleaved plan, strict parsing."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from hushmon.errors import HushmonError
from hushmon.overhead.analysis import analyse, anomalous, modified_z, text_table
from hushmon.overhead.execute import RunResult
from hushmon.overhead.plan import plan
from hushmon.overhead.spec import Config, parse_config, parse_list


def runs(kernel: str, mode: str, times: list[float], start: int = 0) -> list[RunResult]:
    return [
        RunResult(start + i, i, kernel, "1-2-S", mode, t, t + 0.5, 1.0) for i, t in enumerate(times)
    ]


def test_one_slow_run_is_anomalous_and_only_that_one() -> None:
    times = [1.00, 1.01, 0.99, 1.02, 1.00, 0.98, 1.01, 1.60, 1.00, 0.99]
    flags = anomalous(times)
    assert flags.tolist() == [i == 7 for i in range(10)]
    assert modified_z(times)[7] > 3.5


def test_mad_floor_keeps_nearly_equal_runs() -> None:
    # MAD 0: without the floor 1.0005 would be infinitely far from the median.
    times = [1.0, 1.0, 1.0, 1.0, 1.0005, 1.0]
    assert not anomalous(times).any()
    assert anomalous([1.0, 1.0, 1.0, 1.0, 1.02, 1.0]).tolist() == [False] * 4 + [True, False]


def test_too_few_runs_flag_nothing() -> None:
    assert not anomalous([1.0, 5.0]).any()


def test_table_recovers_a_known_slowdown_and_reports_the_outlier() -> None:
    # Evenly spread +-0.2 % around the centre, in a scrambled order.
    spread = 0.002 * np.linspace(-1, 1, 10)[[3, 8, 0, 5, 9, 1, 6, 2, 7, 4]]
    base = list(1.0 + spread)
    slow = list(1.03 * (1.0 + spread[::-1]))
    slow[4] = 2.5  # an interrupted run
    results = runs("ep", "none", base) + runs("ep", "collectd", slow, start=10)
    a = analyse(results, ["ep"], ["1-2-S"], ["none", "collectd"], level=0.95, seed=1)
    (s,) = a["slowdowns"]  # type: ignore[misc]
    assert s.mean_pct == pytest.approx(3.0, abs=0.5)
    assert s.mean_low < 3.0 < s.mean_high
    assert s.median_pct == pytest.approx(3.0, abs=0.5)
    assert s.median_low < s.median_pct < s.median_high
    assert s.n == 9 and s.n_base == 10 and s.anomalies == 1
    # Over all runs the outlier would have made it about 18 %.
    assert s.mean_pct_all_runs > 15
    (anomaly,) = a["anomalies"]  # type: ignore[misc]
    assert anomaly["index"] == 14 and anomaly["direction"] == "slow"
    assert a["averages_mean_pct"] == {"collectd": pytest.approx(s.mean_pct)}
    table = text_table(a)
    assert "collectd" in table and "ep" in table and "9/10" in table


def test_no_difference_gives_an_interval_around_zero() -> None:
    rng = np.random.default_rng(5)
    base = list(2.0 + 0.01 * rng.standard_normal(10))
    same = list(2.0 + 0.01 * rng.standard_normal(10))
    a = analyse(runs("is", "none", base) + runs("is", "hushmon", same, 10),
                ["is"], ["1-2-S"], ["none", "hushmon"])  # fmt: skip
    (s,) = a["slowdowns"]  # type: ignore[misc]
    assert s.mean_low < 0 < s.mean_high
    assert abs(s.mean_pct) < 1


def test_failed_runs_are_listed_not_counted() -> None:
    results = runs("cg", "none", [1.0, 1.0, 1.0]) + runs("cg", "pcp", [1.1, 1.1], 3)
    results.append(RunResult(5, 2, "cg", "1-2-S", "pcp", None, 3.0, 1.0, "cg: wrong"))
    a = analyse(results, ["cg"], ["1-2-S"], ["none", "pcp"])
    assert a["failed_runs"] == [
        {"index": 5, "kernel": "cg", "config": "1-2-S", "mode": "pcp", "error": "cg: wrong"}
    ]
    (s,) = a["slowdowns"]  # type: ignore[misc]
    assert s.n == 2 and s.mean_pct == pytest.approx(10.0)


def test_plan_interleaves_every_cell_once_per_round() -> None:
    configs = [Config(1, 2, "S"), Config(1, 1, "W")]
    order = plan(["ep", "is"], configs, ["none", "hushmon", "collectd"], 4, seed=9)
    assert len(order) == 2 * 2 * 3 * 4
    assert [r.index for r in order] == list(range(len(order)))
    for rnd in range(4):
        cells = Counter((r.kernel, r.config, r.mode) for r in order if r.round == rnd)
        assert len(cells) == 12 and set(cells.values()) == {1}
    # randomized: rounds differ, and the same seed gives the same order
    first = [(r.kernel, r.mode) for r in order if r.round == 0]
    second = [(r.kernel, r.mode) for r in order if r.round == 1]
    assert first != second
    assert order == plan(["ep", "is"], configs, ["none", "hushmon", "collectd"], 4, seed=9)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1-2", "expected NODES-PPN-CLASS"),
        ("1-2-Q", "class Q"),
        ("0-2-S", "must be 1 .. 1024"),
        ("2-1-S", "multi-node test bed"),
    ],
)
def test_bad_config_is_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(HushmonError, match=message):
        parse_config(text)


def test_config_and_lists() -> None:
    c = parse_config("1-4-w")
    assert (c.nodes, c.ppn, c.cls, c.ranks, str(c)) == (1, 4, "W", 4, "1-4-W")
    assert parse_list("is,ep", ["ep", "is"], "--kernels") == ["is", "ep"]
    with pytest.raises(HushmonError, match="unknown 'xx'"):
        parse_list("ep,xx", ["ep", "is"], "--kernels")
    with pytest.raises(HushmonError, match="twice"):
        parse_list("ep,ep", ["ep", "is"], "--kernels")
