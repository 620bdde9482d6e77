"""The summaries follow the rollup tier: ``store status`` reports their
bytes and oldest period, compaction expires them with the rollups (by age
and under the budget), never before the raw data, on a real lake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hushmon import cli
from hushmon.store.lake import open_lake, open_lake_readonly
from hushmon.store.lake_compact import compact
from hushmon.store.lake_files import RAW_TABLE, ROLLUP_TABLE, DataFile
from hushmon.store.lake_retention import (
    NS_PER_DAY,
    NS_PER_HOUR,
    NS_PER_S,
    SUMMARY_TIER,
    Policy,
    plan_retention,
)

DAY0 = 20_000 * NS_PER_DAY  # 2024-10-04, a UTC midnight
DAYS = 1
STEP_S = 600  # raw values and summary periods every 10 minutes: a small lake
SENSORS = 3


def _fill(lake: Path) -> None:
    """DAYS days of raw values, of summaries stored merged, of top-level
    summary rows and of their messages' records, each at every step."""
    con = open_lake(lake)
    steps = DAYS * 86_400 // STEP_S
    step_ns = STEP_S * NS_PER_S
    try:
        con.execute(
            "INSERT INTO samples SELECT i % 4, ? + (i // 4) * ?, i FROM range(?) t(i)",
            [DAY0, step_ns, 4 * steps],
        ).fetchall()
        con.execute(
            """INSERT INTO job_summaries (job, time_ns, measurement, tags, field, count, sum,
                   mean, m2, min, max, sketch, origin)
               SELECT 'j1', ? + (i // ?) * ?, 'cpu', '', 'f' || (i % ?), 4, 8.0, 2.0, 0.0,
                      1.0, 3.0, '{}', 'merged'
               FROM range(?) t(i)""",
            [DAY0, SENSORS, step_ns, SENSORS, SENSORS * steps],
        ).fetchall()
        con.execute(
            """INSERT INTO summary_rows (msg_id, level, job, time_ns, measurement, tags, field,
                   count, sum, mean, m2, min, max)
               SELECT 'top:' || (i // ?), 'top', 'j1', ? + (i // ?) * ?, 'cpu', '',
                      'f' || (i % ?), 4, 8.0, 2.0, 0.0, 1.0, 3.0
               FROM range(?) t(i)""",
            [SENSORS, DAY0, SENSORS, step_ns, SENSORS, SENSORS * steps],
        ).fetchall()
        con.execute(
            """INSERT INTO summary_messages (msg_id, subject, level, rack, job, time_ns,
                   sources, overlapped, received_at)
               SELECT 'top:' || i, 'hm.sum.top', 'top', '', 'j1', ? + i * ?, 4, false,
                      TIMESTAMP '2024-10-04'
               FROM range(?) t(i)""",
            [DAY0, step_ns, steps],
        ).fetchall()
    finally:
        con.close()


def _rows(lake: Path, table: str, cut_ns: int) -> tuple[int, int]:
    """(rows before cut_ns, rows at or after it)."""
    con = open_lake_readonly(lake)
    try:
        row = con.execute(
            f"SELECT count(*) FILTER (time_ns < $c), count(*) FILTER (time_ns >= $c) FROM {table}",
            {"c": cut_ns},
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    return int(row[0]), int(row[1])


def _status(data: Path, now: str, capsys: pytest.CaptureFixture[str]) -> dict:
    argv = ["store", "status", "--data-dir", str(data), "--now", now, "--json", "-"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_summaries_outlive_raw_data_and_expire_with_the_rollups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    lake = data / "hushmon.lake"
    _fill(lake)
    # the default policy keeps everything; the first compaction flushes the
    # inlined rows into files, which status reads, and builds the rollups
    # (an hour's, 24 rows, inlined), the second flushes those
    for _ in range(2):
        compact(lake, now_ns=DAY0 + DAYS * NS_PER_DAY, grace_s=0, settle_s=0)
    now_ns = DAY0 + DAYS * NS_PER_DAY
    now = "2024-10-05T00:00:00"
    st = _status(data, now, capsys)
    summaries = st["tiers"]["summaries"]
    assert summaries["bytes"] > 0 and summaries["files"] >= 3
    assert summaries["oldest_ns"] == DAY0
    assert summaries["newest_ns"] == DAY0 + DAYS * NS_PER_DAY - STEP_S * NS_PER_S
    assert st["total_bytes"] >= summaries["bytes"] + st["tiers"]["raw"]["bytes"]
    policy = ["--raw-days", "0.25", "--rollup-days", "0.5", "--min-raw-hours", "1"]
    assert cli.main(["store", "policy", "--data-dir", str(data), *policy]) == 0
    capsys.readouterr()
    st = _status(data, now, capsys)
    cuts = {c["table"]: c for c in st["next_compaction"]["cuts"]}
    raw_cut, keep_cut = now_ns - 6 * NS_PER_HOUR, now_ns - 12 * NS_PER_HOUR
    assert cuts[RAW_TABLE]["cut_ns"] == raw_cut
    assert cuts[SUMMARY_TIER]["cut_ns"] == cuts[ROLLUP_TABLE]["cut_ns"] == keep_cut
    before = {t: _rows(lake, t, keep_cut) for t in ("job_summaries", "summary_rows")}
    messages = _rows(lake, "summary_messages", keep_cut)
    report = compact(lake, now_ns=now_ns, grace_s=0, settle_s=0)
    expected = sum(old for old, _new in before.values()) + messages[0]
    assert report.summary_rows_expired == expected > 0
    for table, (_old, new) in before.items():
        assert _rows(lake, table, keep_cut) == (0, new)
    assert _rows(lake, "summary_messages", keep_cut) == (0, messages[1])
    # raw data went 6 hours earlier than the summaries: a period between
    # the two cuts has its summaries and no raw values
    assert _rows(lake, RAW_TABLE, raw_cut)[0] == 0
    assert _rows(lake, "job_summaries", raw_cut)[0] > 0
    st = _status(data, now, capsys)
    assert st["tiers"]["summaries"]["oldest_ns"] >= keep_cut
    assert st["next_compaction"]["cuts"] == []


def _files(table: str, size_bytes: int, days: int = 3) -> list[DataFile]:
    """A file per UTC day from DAY0 on."""
    day = NS_PER_DAY
    return [
        DataFile(
            table, i, f"{table}-{d}", size_bytes, 10, 0, DAY0 + d * day, DAY0 + (d + 1) * day - 1
        )
        for i, d in enumerate(range(days))
    ]


def test_over_the_budget_raw_days_go_first_then_rollups_and_summaries_together() -> None:
    files = _files(RAW_TABLE, 1000) + _files(ROLLUP_TABLE, 100) + _files("job_summaries", 50)
    files += _files("summary_rows", 50)
    now_ns = DAY0 + 3 * NS_PER_DAY  # midnight after the last day
    total = 3 * 1000 + 3 * 100 + 6 * 50
    # two raw days (to the 24 h floor) are not enough: one more day of
    # rollups and summaries (200 bytes) must go too
    policy = Policy(raw_days=30, rollup_days=400, budget_bytes=total - 2000 - 150)
    plan = plan_retention(files, policy, fixed_bytes=0, now_ns=now_ns)
    cuts = {c.table: (c.cut_ns, c.reason, c.freed_bytes) for c in plan.cuts}
    day2 = DAY0 + 2 * NS_PER_DAY
    assert cuts[RAW_TABLE] == (day2, "budget", 2000)
    assert cuts[ROLLUP_TABLE] == (DAY0 + NS_PER_DAY, "budget", 100)
    assert cuts[SUMMARY_TIER] == (DAY0 + NS_PER_DAY, "budget", 100)
    assert plan.over_budget_after_bytes == 0
