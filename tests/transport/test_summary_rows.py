"""The collector's fast check of a summary message's sensors (summary_rows.py)
gives the exact path's columns, and accepts nothing the exact path refuses."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from hushmon.transport.collect_summaries import _exact_sensors, parse_summary
from hushmon.transport.summary import Summary
from hushmon.transport.summary_rows import SensorRows, fast_rows, fast_sources


def _sensors() -> dict[str, Any]:
    out = {
        "cpu,cpu=total user_pct": Summary.of([1.0, 2.5, 40.0, 0.0]).to_json(),
        "mem used_pct": Summary.of([-3.0, 7.25]).to_json(),
        "net,dev=eth0 rx_bytes": Summary.of([1e9, 2e9, 3e9]).to_json(),
    }
    return json.loads(json.dumps(out))  # as a message decodes


def _same(a: SensorRows, b: SensorRows) -> None:
    assert a.keys == b.keys and a.count == b.count
    assert (a.sum, a.mean, a.m2, a.min, a.max) == (b.sum, b.mean, b.m2, b.min, b.max)
    assert (a.alpha, a.zero) == (b.alpha, b.zero)
    assert a.pos == b.pos and a.neg == b.neg


def test_fast_rows_equal_the_exact_path() -> None:
    raw = _sensors()
    fast = fast_rows(raw)
    exact = _exact_sensors(raw)
    assert fast is not None and not isinstance(exact, str)
    _same(fast, SensorRows.of(exact))
    keys, counts = fast.pos.arrow()
    stored = zip(keys.to_pylist()[1], counts.to_pylist()[1], strict=True)
    assert list(stored) == list(exact[fast.keys[1]].sketch.pos.items())


def _set(path: tuple[str, ...], value: object) -> dict[str, Any]:
    raw = _sensors()
    node: Any = raw["mem used_pct"]
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return raw


MUTATIONS = [
    (("count",), 0),
    (("count",), True),
    (("count",), 2**63),
    (("count",), 2.0),
    (("sum",), float("nan")),
    (("mean",), float("inf")),
    (("m2",), "1"),
    (("min",), True),
    (("max",), 2**1000),
    (("max",), 10**400),
    (("min",), 100.0),  # min > max
    (("sketch",), []),
    (("sketch", "alpha"), 1.0),
    (("sketch", "alpha"), 0),
    (("sketch", "zero"), -1),
    (("sketch", "zero"), 5),  # the sketch then holds more values than count
    (("sketch", "pos"), []),
    (("sketch", "pos"), {"1,2": 1}),
    (("sketch", "pos"), {"12345678": 1}),
    (("sketch", "pos"), {"2000000": 1}),
    (("sketch", "pos"), {"x": 1}),
    (("sketch", "pos"), {"5": -1}),
    (("sketch", "pos"), {"5": 1.0}),
    (("sketch", "pos"), {"5": 2**63}),
    (("sketch", "neg"), {"-0": True}),
]


@pytest.mark.parametrize(("path", "value"), MUTATIONS)
def test_what_the_exact_path_refuses_the_fast_path_never_accepts(
    path: tuple[str, ...], value: object
) -> None:
    raw = _set(path, value)
    assert isinstance(_exact_sensors(copy.deepcopy(raw)), str)
    assert fast_rows(raw) is None


def test_a_sensor_twice_goes_to_the_exact_path_which_merges_it() -> None:
    raw = _sensors()
    raw["cpu,cpu=total,x=1 user_pct"] = raw.pop("cpu,cpu=total user_pct")
    raw["cpu,x=1,cpu=total user_pct"] = Summary.of([5.0]).to_json()
    assert fast_rows(raw) is None
    exact = _exact_sensors(raw)
    assert not isinstance(exact, str) and len(exact) == 3


SOURCES = [
    [["n1", 1]],
    [["n1,n2", 1, 1]],
    [["n1", True, 1]],
    [["n1", 1, 0]],
    [["n1", -1, 1]],
    [["n1", 1, 2**63]],
    [["n.1", 1, 1]],
    [[1, 1, 1]],
    [["n1", 1.0, 1]],
    ["n1"],
]


@pytest.mark.parametrize("sources", SOURCES)
def test_sources_the_exact_check_refuses_are_never_accepted_fast(sources: list[Any]) -> None:
    payload = {"v": 1, "level": "rack", "rack": "r1", "job": "j1", "time_ns": 1,
               "sources": [["n0", 1, 1], *sources], "sensors": _sensors()}  # fmt: skip
    assert isinstance(parse_summary("hm.sum.rack.r1", json.dumps(payload).encode()), str)
    assert fast_sources(payload["sources"]) is None  # type: ignore[arg-type]


def test_valid_sources_are_taken_fast_as_they_are() -> None:
    raw = [["n1", 1, 5], ["n-2_x", 0, 2**63 - 1]]
    assert fast_sources(raw) == [("n1", 1, 5), ("n-2_x", 0, 2**63 - 1)]
