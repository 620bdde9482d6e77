"""Compaction stores closed periods' summaries merged: readers see the same
job before and after, the partials are gone, a late partial is counted once."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from hushmon.digest.summary_sensors import summary_sensor_rows
from hushmon.store import lake_summaries_compact
from hushmon.store.lake import open_lake
from hushmon.store.lake_compact import compact
from hushmon.store.lake_status import lake_status
from hushmon.transport.collect_summaries import read_job_summaries

JOB = "77"
T0 = 1_790_000_000_000_000_000
S = 1_000_000_000
PERIODS = 6
CLOSE_S = 3600
NOW = T0 + (PERIODS - 2) * S + CLOSE_S * S  # the first 4 periods are closed


def _rack_row(rack: int, period: int, field: str) -> tuple[Any, ...]:
    # 40 nodes per rack; values differ per rack, period and field
    n = 40
    mean = 10.0 + rack * 3 + period * 0.5 + (1.0 if field == "b" else 0.0)
    m2 = 2.5 * n * (1 + rack)
    keys = [100 + rack + period, 130 + rack]
    counts = [n - 10, 10]
    return (f"m{rack}:{period}", "rack", JOB, T0 + period * S, "cpu", "host=*", field,
            n, mean * n, mean, m2, mean - 4, mean + 4 + rack,
            0.01, 0, keys, counts, [], [])  # fmt: skip


def _lake(path: Path, racks: range, periods: range) -> None:
    con = open_lake(path)
    try:
        rows = [_rack_row(r, p, f) for r in racks for p in periods for f in ("a", "b")]
        con.executemany(
            "INSERT INTO summary_rows VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?)",
            rows,
        )
    finally:
        con.close()


def _read(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    con = open_lake(path)
    try:
        sensors = summary_sensor_rows(con, JOB) or []
        periods = []
        for p in range(PERIODS):
            got = read_job_summaries(con, JOB, T0 + p * S)
            periods.append(
                {
                    k.name: (s.count, s.mean, s.m2, s.min, s.max, s.sketch.quantile(0.5))
                    for k, s in got.items()
                }
            )
        return sensors, periods
    finally:
        con.close()


def _count(path: Path, sql: str) -> int:
    con = open_lake(path)
    try:
        row = con.execute(sql).fetchone()
        return int(row[0]) if row else 0
    finally:
        con.close()


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def test_closed_periods_are_stored_merged_and_read_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two commits of two periods each (a slice is a minute of periods at a site)
    monkeypatch.setattr(lake_summaries_compact, "SLICE_S", 2)
    lake = tmp_path / "a.lake"
    _lake(lake, range(2), range(PERIODS))
    before = _read(lake)
    assert lake_status(lake, None, now_ns=NOW)["next_compaction"]["summary_periods_to_store"] == 4

    report = compact(lake, now_ns=NOW, grace_s=0, summary_close_s=CLOSE_S)

    assert report.summary_periods_stored == 4
    assert report.summary_rows_stored == 4 * 2
    assert report.summary_partial_rows_deleted == 4 * 2 * 2
    # exactly what the view returned: moments bit for bit, same quantiles
    assert _read(lake) == before
    assert _count(lake, f"SELECT count(*) FROM summary_rows WHERE time_ns < {T0 + 4 * S}") == 0
    assert _count(lake, "SELECT count(*) FROM summary_rows") == 2 * 2 * 2  # open periods kept
    assert _count(lake, "SELECT count(*) FROM job_summaries WHERE origin = 'merged'") == 8
    assert lake_status(lake, None, now_ns=NOW)["next_compaction"]["summary_periods_to_store"] == 0
    again = compact(lake, now_ns=NOW, grace_s=0, summary_close_s=CLOSE_S)
    assert again.summary_periods_stored == again.summary_late_periods_merged == 0
    assert _read(lake) == before


def test_a_late_partial_is_counted_once(tmp_path: Path) -> None:
    lake = tmp_path / "a.lake"
    _lake(lake, range(2), range(PERIODS))
    compact(lake, now_ns=NOW, grace_s=0, summary_close_s=CLOSE_S)
    stored = _read(lake)
    # rack 2's partial of period 1 arrives after its period was stored
    _lake(lake, range(2, 3), range(1, 2))
    # the stored row wins until the next compaction: not counted twice
    assert _read(lake) == stored
    report = compact(lake, now_ns=NOW, grace_s=0, summary_close_s=CLOSE_S)
    assert report.summary_late_periods_merged == 1
    assert report.summary_periods_stored == 0
    assert _count(lake, f"SELECT count(*) FROM summary_rows WHERE time_ns < {T0 + 4 * S}") == 0
    # now the same as a lake that had all three partials of period 1 from the start
    reference = tmp_path / "ref.lake"
    _lake(reference, range(2), range(PERIODS))
    _lake(reference, range(2, 3), range(1, 2))
    got, want = _read(lake), _read(reference)
    assert got[1][1] != stored[1][1]
    assert {v[0] for v in got[1][1].values()} == {3 * 40}  # three racks of 40 nodes
    assert _close(got, want)
