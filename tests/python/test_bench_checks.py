"""Self-checks of a bench run: wait-pattern true times and loop/synchronized pairs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hushmon.bench.checks import (
    clock_invalid,
    clock_verdict,
    invalid_share,
    loop_vs_sync,
    pattern_checks,
)
from hushmon.bench.results import load_run, loads_run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"


def result(op: str, mean: float, **extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "op": op,
        "size": 0,
        "nprocs": 2,
        "method": "sync",
        "n_total": 20,
        "n_valid": 20,
        "n_used": 10,
        "mean": mean,
        "median": mean,
        "se": 0.0,
        "min": mean,
        "max": mean,
        "ci_level": 0.95,
        "ci_low": mean,
        "ci_high": mean,
    }
    base.update(extra)
    return base


def run_of(*results: dict[str, object]):
    return loads_run(json.dumps({"results": list(results)}))


@pytest.mark.parametrize(
    ("op", "mean", "global_mean", "passed"),
    [
        ("waitpatternup", 2.1e-6, 2.05e-6, True),  # within 10 % of 2 us
        ("waitpatternup", 2.3e-6, 2.0e-6, False),  # local 15 % off
        ("waitpatternup", 2.0e-6, 2.5e-6, False),  # global 25 % off: schedule wrong
        ("waitpatterndown", 1.85e-6, None, True),  # no global time: local decides
        ("waitpatternnull", 0.4e-6, 0.9e-6, True),  # under 1 us
        ("waitpatternnull", 0.4e-6, 1.2e-6, False),
    ],
)
def test_wait_patterns_against_true_time(
    op: str, mean: float, global_mean: float | None, passed: bool
) -> None:
    (check,) = pattern_checks(run_of(result(op, mean, global_mean=global_mean)))
    assert check.passed is passed


def test_true_time_grows_with_ranks() -> None:
    checks = pattern_checks(load_run(FIXTURES / "nprocs_sweep.json"))
    assert [(c.nprocs, c.true_s) for c in checks] == [(2, 2e-6), (3, 3e-6), (4, 4e-6)]
    assert [c.times_passed for c in checks] == [True, True, False]
    # Its clocks drifted 2.5 us apart, more than a tenth of any of these times.
    assert [c.clock.valid for c in checks] == [False, False, False]
    assert not any(c.passed for c in checks)


def test_loop_results_are_not_pattern_checks() -> None:
    assert pattern_checks(run_of(result("waitpatternup", 5e-6, method="loop"))) == []


def test_loop_vs_sync_pairs_same_op_size_nprocs() -> None:
    run = run_of(
        result("bcast", 1e-6, size=8),
        result("bcast", 1.5e-6, size=8, method="loop"),
        result("bcast", 2e-6, size=16, method="loop"),  # no synchronized partner
        result("bcast", 3e-6, size=8, nprocs=3, method="loop_barrier"),  # other nprocs
    )
    (pair,) = loop_vs_sync(run)
    assert (pair.op, pair.size, pair.nprocs, pair.loop_method) == ("bcast", 8, 2, "loop")
    assert pair.ratio == pytest.approx(1.5)
    assert pair.difference_s == pytest.approx(0.5e-6)


def test_fixture_has_a_pair_per_loop_result() -> None:
    run = load_run(FIXTURES / "sync_loop.json")
    pairs = loop_vs_sync(run)
    measured_ops = [
        r for r in run.results if r.method == "loop" and r.op in ("bcast", "allreduce", "barrier")
    ]
    assert len(pairs) == len(measured_ops)  # wait patterns (timer checks) are not paired
    assert all(p.ratio > 1.0 for p in pairs)


def test_ratio_of_missing_mean_is_nan() -> None:
    no_valid_launch = result("scan", 1e-6, n_valid=0)
    no_valid_launch["mean"] = None
    run = run_of(no_valid_launch, result("scan", 1e-6, method="loop"))
    (pair,) = loop_vs_sync(run)
    assert math.isnan(pair.ratio)


def test_invalid_share() -> None:
    run = run_of(result("bcast", 1e-6, n_total=40, n_valid=30), result("bcast", 1e-6, n_total=0))
    assert invalid_share(run.results[0]) == pytest.approx(0.25)
    assert math.isnan(invalid_share(run.results[1]))


def test_clocks_milliseconds_apart_fail_the_wait_pattern() -> None:
    # Real output of `--timer tsc` when each rank calibrated its own TSC: the
    # node's ranks 10 ms apart, Bcast 8 B "measured" at 9986 us, and a wait
    # pattern that looks perfect because each rank times its own spin.
    run = load_run(FIXTURES / "tsc_unshared_calibration.json")
    (check,) = pattern_checks(run)
    assert check.times_passed
    assert check.clock.valid is False and check.clock.error_s == pytest.approx(9.966153e-3)
    assert not check.passed
    bad = {r.op for r, _ in clock_invalid(run)}
    assert bad == {"waitpatternup", "bcast"}


def test_clock_error_allowed_is_a_share_of_the_time_or_the_late_tolerance() -> None:
    meta = {"clock_error_max_s": 60e-9, "clock_error_share": 0.1, "late_tolerance_us": 0.1}

    def verdict(mean: float, **extra: object) -> bool | None:
        doc = {"meta": meta, "results": [result("bcast", mean, size=8, **extra)]}
        run = loads_run(json.dumps(doc))
        return clock_verdict(run, run.results[0]).valid

    assert verdict(0.45e-6) is True  # 60 ns < the 100 ns late tolerance
    assert verdict(0.05e-6) is True  # near-zero times: the tolerance decides
    meta["clock_error_max_s"] = 300e-9
    assert verdict(2.0e-6) is False  # more than 10 % of 2 us
    assert verdict(4.0e-6) is True
    # The program's own verdict counts: false stays false.
    meta["clock_error_max_s"] = 10e-9
    assert verdict(2.0e-6, clock_valid=False) is False
    # Loop methods compare no clocks across ranks: not judged.
    assert verdict(2.0e-6, method="loop") is None
