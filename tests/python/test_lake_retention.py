"""Retention tiers under a byte budget, `hushmon store status/policy/compact`
and their refusals, on real lakes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hushmon import cli
from hushmon.errors import HushmonError
from hushmon.store.lake import open_lake, open_lake_readonly
from hushmon.store.lake_bytes import parse_bytes
from hushmon.store.lake_compact import compact
from hushmon.store.lake_retention import NS_PER_DAY, NS_PER_HOUR, NS_PER_S
from hushmon.store.lake_status import lake_status
from hushmon.store.schema import open_store
from lakewriter import writing

DAY0 = 20_000 * NS_PER_DAY  # 2024-10-04, a UTC midnight
SERIES = 10
STEP_S = 10  # a value every 10 s: 8,640 per series and day


def _make_days(lake: Path, days: int, value_sql: str = "random() * 1000") -> None:
    """``days`` UTC days of raw data, random values (they do not compress)
    unless told, two commits a day as a collector's groups would be."""
    con = open_lake(lake)
    try:
        for d in range(days):
            for part in range(2):
                start = DAY0 + d * NS_PER_DAY + part * 12 * NS_PER_HOUR
                con.execute(
                    f"INSERT INTO samples SELECT i % ?, ? + (i // ?) * ?, {value_sql} "
                    "FROM range(?) t(i)",
                    [SERIES, start, SERIES, STEP_S * NS_PER_S, SERIES * 12 * 3600 // STEP_S],
                ).fetchall()
    finally:
        con.close()


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert cli.main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_the_budget_drops_the_oldest_raw_day_after_its_rollup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    lake = data / "hushmon.lake"
    _make_days(lake, 3)
    now = "2024-10-07T06:00:00"  # DAY0 + 3 days + 6 h
    base = ["--data-dir", str(data), "--now", now]
    compact(lake, now_ns=DAY0 + 3 * NS_PER_DAY, grace_s=0)  # rollups, one merged file
    st = _json(capsys, ["store", "status", *base, "--json", "-"])
    raw = st["tiers"]["raw"]
    assert raw["rows"] == 3 * SERIES * 86_400 // STEP_S
    assert (raw["oldest_ns"], raw["newest_ns"] // NS_PER_DAY) == (DAY0, DAY0 // NS_PER_DAY + 2)
    con = open_lake_readonly(lake)
    day0 = con.execute(
        "SELECT series_id, count(*), avg(value), min(value), max(value) FROM samples "
        "WHERE time_ns < ? GROUP BY ALL ORDER BY ALL",
        [DAY0 + NS_PER_DAY],
    ).fetchall()
    con.close()
    # a budget that one raw day (a third of the raw bytes) brings the lake under
    budget = st["total_bytes"] - raw["bytes"] // 6
    assert (
        cli.main(
            [
                "store",
                "policy",
                "--data-dir",
                str(data),
                "--raw-days",
                "30",
                "--rollup-days",
                "365",
                "--budget",
                str(budget),
                "--min-raw-hours",
                "12",
            ]
        )
        == 0
    )
    capsys.readouterr()
    st = _json(capsys, ["store", "status", *base, "--json", "-"])
    cuts = st["next_compaction"]["cuts"]
    assert [(c["table"], c["cut_ns"], c["reason"]) for c in cuts] == [
        ("samples", DAY0 + NS_PER_DAY, "budget")
    ]
    assert st["budget_used"] > 1.0
    report = _json(capsys, ["store", "compact", *base, "--grace", "0", "--json", "-"])
    assert report["raw_rows_deleted"] == SERIES * 86_400 // STEP_S
    assert report["rollup_minutes_redone"] == 0 and report["bytes_deleted"] > 0
    st = _json(capsys, ["store", "status", *base, "--json", "-"])
    assert st["tiers"]["raw"]["oldest_ns"] == DAY0 + NS_PER_DAY  # day 0 gone, day 1 whole
    assert st["tiers"]["rollups"]["oldest_ns"] == DAY0  # ... its rollups kept
    assert st["total_bytes"] <= budget and st["next_compaction"]["cuts"] == []
    con = open_lake_readonly(lake)
    rolled = con.execute(
        "SELECT series_id, sum(count), sum(sum) / sum(count), min(min), max(max) FROM samples_1m "
        "WHERE minute_ns < ? GROUP BY ALL ORDER BY ALL",
        [DAY0 + NS_PER_DAY],
    ).fetchall()
    con.close()
    assert [r[:2] for r in rolled] == [r[:2] for r in day0]
    for a, b in zip(rolled, day0, strict=True):
        assert a[2:] == pytest.approx(b[2:])


def test_the_budget_drops_the_oldest_raw_day_while_a_collector_writes(tmp_path: Path) -> None:
    """Retention plans from the files it sees while a collector's writer in
    another process commits (inlined rows and files, taking turns with the
    compaction's commits at the commit lock). The oldest raw day goes,
    nothing newer: the next day whole, every batch the writer committed
    stored once. Before the rewrite's flush shared its hold of the lock,
    the rewrite failed here ('Failed to read inlined-data aggregates')."""
    lake = tmp_path / "w.lake"
    _make_days(lake, 2)
    now_ns = DAY0 + 2 * NS_PER_DAY + 6 * NS_PER_HOUR
    compact(lake, now_ns=DAY0 + 2 * NS_PER_DAY, grace_s=0)  # rollups, one merged file
    st = lake_status(lake, None, now_ns=now_ns)
    raw_bytes = st["tiers"]["raw"]["bytes"]
    con = open_lake(lake)
    try:  # over budget by half a raw day: the oldest day must go, and only it
        con.execute(
            "INSERT INTO lake_policy VALUES (30, 365, ?, 12, current_timestamp)",
            [st["total_bytes"] - raw_bytes // 4],
        ).fetchall()
    finally:
        con.close()
    with writing(lake, DAY0 + 2 * NS_PER_DAY) as written:
        # the default grace: a collector's files written before its commit
        # are not orphans yet
        began_ns = time.time_ns()
        report = compact(lake, now_ns=now_ns)
        ended_ns = time.time_ns()
    assert [(c["table"], c["cut_ns"]) for c in report.plan["cuts"]] == [
        ("samples", DAY0 + NS_PER_DAY)
    ], report.plan
    assert report.raw_rows_deleted == SERIES * 86_400 // STEP_S
    assert written.commits_between(began_ns, ended_ns) >= 1, written
    con = open_lake_readonly(lake)
    try:
        days = con.execute(
            "SELECT time_ns // ? AS day, count(*) FROM samples GROUP BY ALL ORDER BY ALL",
            [NS_PER_DAY],
        ).fetchall()
        stored = con.execute("SELECT count(*) FROM transport_batches").fetchone()
    finally:
        con.close()
    day = DAY0 // NS_PER_DAY
    assert days == [(day + 1, SERIES * 86_400 // STEP_S), (day + 2, written.values)]
    assert stored == (written.batches,)


def test_the_budget_never_takes_the_newest_raw_hours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = tmp_path / "x.lake"
    _make_days(lake, 2)
    assert (
        cli.main(["store", "policy", "--db", str(lake), "--budget", "1", "--min-raw-hours", "30"])
        == 0
    )
    capsys.readouterr()
    now = "2024-10-06T00:00:00"  # DAY0 + 2 days: the floor is DAY0 + 18 h
    report = _json(
        capsys, ["store", "compact", "--db", str(lake), "--now", now, "--grace", "0", "--json", "-"]
    )
    assert report["plan"]["cuts"][0]["cut_ns"] == DAY0 + 18 * NS_PER_HOUR
    assert report["over_budget_bytes"] > 0
    assert "still over budget" not in capsys.readouterr().err  # --json -: stderr for people
    con = open_lake_readonly(lake)
    oldest = con.execute("SELECT min(time_ns) FROM samples").fetchone()[0]
    con.close()
    assert oldest == DAY0 + 18 * NS_PER_HOUR


def test_late_data_is_rolled_up_again_before_its_raw_day_expires(tmp_path: Path) -> None:
    lake = tmp_path / "late.lake"
    _make_days(lake, 1)
    compact(lake, now_ns=DAY0 + NS_PER_DAY, grace_s=0)  # rollups of day 0
    con = open_lake(lake)
    con.execute("INSERT INTO samples VALUES (3, ?, 5000.0)", [DAY0 + 61 * NS_PER_S]).fetchall()
    con.execute("INSERT INTO lake_policy VALUES (1, 10, NULL, 0, current_timestamp)").fetchall()
    con.close()
    report = compact(lake, now_ns=DAY0 + 2 * NS_PER_DAY + NS_PER_HOUR, grace_s=0)
    assert report.rollup_minutes_redone == 1
    assert report.raw_rows_deleted == SERIES * 86_400 // STEP_S + 1
    con = open_lake_readonly(lake)
    row = con.execute(
        "SELECT count, max FROM samples_1m WHERE series_id = 3 AND minute_ns = ?",
        [DAY0 + 60 * NS_PER_S],
    ).fetchone()
    con.close()
    assert row == (60 // STEP_S + 1, 5000.0)  # the minute's values and the late one


def test_a_compaction_held_to_64_mib_rolls_up_the_same(tmp_path: Path) -> None:
    """DuckDB's memory bound (it spills to <lake>/spill beyond it) leaves the
    rollups as they are with DuckDB's default (80 % of the machine)."""
    rollups = []
    for name, memory_mib in (("small", 64), ("default", None)):
        lake = tmp_path / f"{name}.lake"
        _make_days(lake, 2, value_sql="(i * 7919) % 1000")
        now_ns = DAY0 + 2 * NS_PER_DAY
        report = (
            compact(lake, now_ns=now_ns, grace_s=0)
            if memory_mib is None
            else compact(lake, now_ns=now_ns, grace_s=0, memory_mib=memory_mib)
        )
        assert report.memory_limit_mib == (memory_mib or 2048)
        assert report.rollup_rows_added > SERIES * 1440
        assert report.peak_rss_mib > 0
        assert (lake / "spill").is_dir()
        con = open_lake_readonly(lake)
        rollups.append(con.execute("SELECT * FROM samples_1m ORDER BY ALL").fetchall())
        con.close()
    assert rollups[0] == rollups[1]


def test_status_of_the_embedded_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.duckdb"
    con = open_store(db)
    con.execute("INSERT INTO series VALUES (1, 'n1', 'cpu', '', 'user_pct')").fetchall()
    con.execute("INSERT INTO samples VALUES (1, 5, 1.0), (1, 9, 2.0)").fetchall()
    con.close()
    st = _json(capsys, ["store", "status", "--db", str(db), "--json", "-"])
    assert (st["kind"], st["samples"], st["oldest_ns"], st["newest_ns"]) == ("embedded", 2, 5, 9)
    assert st["total_bytes"] == db.stat().st_size


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], words: str) -> None:
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("hushmon: ") and err.count("\n") == 1 and words in err, err


def test_bad_input_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = tmp_path / "ok.lake"
    open_lake(lake).close()
    _refused(capsys, ["store", "status", "--db", str(tmp_path / "none.lake")], "does not exist")
    _refused(capsys, ["store", "compact", "--db", str(tmp_path / "none.lake")], "does not exist")
    (tmp_path / "empty.lake").mkdir()
    _refused(capsys, ["store", "status", "--db", str(tmp_path / "empty.lake")], "is not a lake")
    (tmp_path / "f.duckdb").write_bytes(b"")
    _refused(capsys, ["store", "compact", "--db", str(tmp_path / "f.duckdb")], "is not a lake")
    bad = tmp_path / "bad.lake"
    bad.mkdir()
    (bad / "catalog.sqlite").write_bytes(b"this is not a database" * 100)
    _refused(capsys, ["store", "status", "--db", str(bad)], "cannot open lake")
    _refused(capsys, ["store", "policy", "--db", str(lake), "--budget", "12X"], "bad size '12X'")
    _refused(capsys, ["store", "policy", "--db", str(lake), "--budget", "0"], "at least 1 byte")
    _refused(
        capsys,
        ["store", "policy", "--db", str(lake), "--raw-days", "9", "--rollup-days", "3"],
        "shorter than --raw-days",
    )
    _refused(capsys, ["store", "compact", "--db", str(lake), "--now", "yesterday"], "bad --now")
    _refused(capsys, ["store", "compact", "--db", str(lake), "--memory-mib", "8"], "at least 64")
    con = open_lake(lake)
    con.execute("INSERT INTO hushmon_schema VALUES (99, current_timestamp)").fetchall()
    con.close()
    _refused(capsys, ["store", "status", "--db", str(lake)], "newer than this hushmon's")
    _refused(capsys, ["store", "compact", "--db", str(lake)], "newer than this hushmon's")


def test_parse_bytes() -> None:
    assert parse_bytes("500G") == 500 * 10**9
    assert parse_bytes("1.5TiB") == int(1.5 * 2**40)
    assert parse_bytes("200 MB") == 200 * 10**6
    assert parse_bytes("4096") == 4096
    for text in ("", "G", "-5G", "5 parsecs", "1e9"):
        with pytest.raises(HushmonError):
            parse_bytes(text)


def test_policy_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lake = tmp_path / "p.lake"
    open_lake(lake).close()
    assert (
        _json(capsys, ["store", "policy", "--db", str(lake), "--json", "-"])["budget_bytes"] is None
    )
    set_ = _json(
        capsys,
        ["store", "policy", "--db", str(lake), "--budget", "2T", "--raw-days", "7", "--json", "-"],
    )
    assert (set_["budget_bytes"], set_["raw_days"], set_["rollup_days"]) == (2 * 10**12, 7.0, 400.0)
    kept = _json(
        capsys, ["store", "policy", "--db", str(lake), "--rollup-days", "90", "--json", "-"]
    )
    assert (kept["budget_bytes"], kept["raw_days"], kept["rollup_days"]) == (2 * 10**12, 7.0, 90.0)
    none = _json(capsys, ["store", "policy", "--db", str(lake), "--budget", "none", "--json", "-"])
    assert none["budget_bytes"] is None
