"""Summaries of docs/transport.md: merged partials against numpy statistics
of the raw values (exact count/sum/min/max, mean and variance to 1e-9,
quantiles within the sketch's alpha), and the JSON round trip."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from hushmon.transport.summary import ALPHA, Sketch, Summary, gamma_of, merge_all

QUANTILES = (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)


def _values(kind: str, rng: np.random.Generator, n: int) -> np.ndarray:
    if kind == "normal":
        return rng.normal(50.0, 20.0, n)  # crosses zero: negatives and positives
    if kind == "lognormal":
        return rng.lognormal(10.0, 3.0, n)  # bytes/s: many orders of magnitude
    if kind == "zeros":
        return np.where(rng.random(n) < 0.3, 0.0, rng.exponential(5.0, n))
    if kind == "constant":
        return np.full(n, 12.5)
    if kind == "integers":
        return rng.integers(-1000, 1000, n).astype(float)
    raise ValueError(kind)


def _split(values: np.ndarray, parts: int, rng: random.Random) -> list[np.ndarray]:
    cuts = sorted(rng.sample(range(1, len(values)), parts - 1)) if parts > 1 else []
    return [p for p in np.split(values, cuts) if len(p)]


@pytest.mark.parametrize("kind", ["normal", "lognormal", "zeros", "constant", "integers"])
@pytest.mark.parametrize("seed", range(8))
def test_merged_partials_equal_the_raw_statistics(kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    values = _values(kind, rng, int(rng.integers(2, 3000)))
    parts = [Summary.of(p) for p in _split(values, pick.randint(1, min(40, len(values))), pick)]
    pick.shuffle(parts)  # merge order must not matter
    # merge as a tree (racks, then the job), like the reducers
    racks = [merge_all(parts[i : i + 3]) for i in range(0, len(parts), 3)]
    merged = merge_all(racks)
    assert merged.count == len(values)
    assert merged.min == values.min() and merged.max == values.max()
    assert math.isclose(merged.sum, math.fsum(values), rel_tol=1e-12, abs_tol=1e-9)
    assert math.isclose(merged.mean, float(np.mean(values)), rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(merged.variance, float(np.var(values)), rel_tol=1e-9, abs_tol=1e-12)
    assert merged.sketch.count == len(values)
    for q in QUANTILES:
        truth = float(np.quantile(values, q, method="lower"))
        got = merged.quantile(q)
        # within alpha of the true value (a value on a bucket edge may land
        # in the next bucket through rounding of log(): a hair more)
        assert abs(got - truth) <= ALPHA * abs(truth) * (1 + 1e-9) + 1e-12, (q, got, truth)


def test_integer_values_sum_exactly() -> None:
    rng = np.random.default_rng(3)
    values = rng.integers(0, 10**6, 5000).astype(float)
    merged = merge_all(Summary.of(p) for p in np.array_split(values, 17))
    assert merged.sum == float(values.sum()) and merged.count == 5000


def test_bucket_follows_the_contract() -> None:
    s = Sketch()
    s.add_values(np.array([1.0, 12.0, 13.0, -12.0, 0.0, 0.0]))
    g = gamma_of(ALPHA)
    assert s.zero == 2
    assert s.pos == {
        0: 1,
        math.ceil(math.log(12.0) / math.log(g)): 1,
        math.ceil(math.log(13.0) / math.log(g)): 1,
    }
    assert s.neg == {math.ceil(math.log(12.0) / math.log(g)): 1}
    # the contract's example: 12 and 13 in buckets 125 and 129 (alpha 0.01)
    assert set(s.pos) == {0, 125, 129}


def test_json_round_trip_and_bad_input() -> None:
    s = Summary.of([1.0, 2.0, -3.0, 0.0])
    back = Summary.from_json(json.loads(json.dumps(s.to_json())))
    assert back == s
    with pytest.raises(ValueError, match="count"):
        Summary.from_json({"sum": 1.0, "mean": 1.0, "m2": 0, "min": 1, "max": 1})
    bad = s.to_json()
    bad["sketch"]["pos"] = {"1": 99}
    with pytest.raises(ValueError, match="sketch holds"):
        Summary.from_json(bad)
    with pytest.raises(ValueError, match="alpha"):
        Sketch.from_json({"alpha": 2.0})
    with pytest.raises(ValueError, match="cannot merge"):
        Sketch(0.01).merge(Sketch(0.02))
