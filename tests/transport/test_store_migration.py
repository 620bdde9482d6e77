"""Store schema 1 -> 2: a store written before the transport gains its
tables and keeps its data; 2 -> 3 (summaries appended, merged when read):
what a version-2 collector stored is read through the view."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from hushmon.digest.summary_sensors import merged_sketches
from hushmon.store import lake
from hushmon.store.schema import _TABLES, SCHEMA_VERSION, open_store, open_store_readonly
from hushmon.store.summary_view import has_job_summaries, summaries_relation
from hushmon.transport.collect_summaries import read_job_summaries
from hushmon.transport.wire import SensorKey


def test_version_1_store_is_migrated(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    for statement in _TABLES[:5]:  # the five tables of version 1
        con.execute(statement)
    con.execute("INSERT INTO hushmon_schema (version) VALUES (1)")
    con.execute("INSERT INTO job_activity VALUES ('j', 'n1', 1)")
    con.close()
    con = open_store(db)
    try:
        versions = [
            r[0] for r in con.execute("SELECT version FROM hushmon_schema ORDER BY 1").fetchall()
        ]
        assert versions == [1, SCHEMA_VERSION] and SCHEMA_VERSION == 4
        assert con.execute("SELECT count(*) FROM transport_batches").fetchall() == [(0,)]
        assert con.execute("SELECT count(*) FROM job_activity").fetchall() == [(1,)]
    finally:
        con.close()
    open_store(db).close()  # opening again adds no version row
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM hushmon_schema").fetchall() == [(2,)]
    con.close()


def _v2_tables(tables: tuple[str, ...]) -> list[str]:
    new_in_3 = ("summary_rows", "summary_rebuilt", "source_list", "source_hashes")
    return [t for t in tables if not any(name in t for name in new_in_3)]


V2_SUMMARY = (
    "INSERT INTO job_summaries (job, time_ns, measurement, tags, field, count, sum, mean, m2, "
    "min, max, sketch, origin) VALUES ('j', 5, 'mem', '', 'used_pct', 2, 3.0, 1.5, 0.5, 1.0, "
    """2.0, '{"alpha":0.01,"zero":0,"pos":{"0":1,"35":1},"neg":{}}', 'merged')"""
)


@pytest.mark.parametrize("kind", ["duckdb", "lake"])
def test_version_2_summaries_are_read_through_the_view_after_migration(
    tmp_path: Path, kind: str
) -> None:
    if kind == "duckdb":
        db = tmp_path / "old.duckdb"
        con = duckdb.connect(str(db))
        for statement in _v2_tables(_TABLES):
            con.execute(statement)
        con.execute("INSERT INTO hushmon_schema (version) VALUES (2)")
    else:
        db = tmp_path / "old.lake"
        con = lake.open_lake(db)  # then made a version-2 lake again
        con.execute("BEGIN TRANSACTION")
        for table in ("summary_rows", "summary_rebuilt", "hushmon_schema"):
            con.execute(f"DROP TABLE {table}")
        con.execute("DROP VIEW merged_summaries")
        con.execute("DROP VIEW summary_parts")
        con.execute("ALTER TABLE summary_messages DROP COLUMN source_list")
        con.execute("ALTER TABLE summary_messages DROP COLUMN source_hashes")
        con.execute(lake._TABLES[0])
        con.execute("INSERT INTO hushmon_schema VALUES (2, current_timestamp)")
        con.execute("COMMIT")
    con.execute(V2_SUMMARY)
    con.close()
    # a reader before any writer migrated it reads the stored table
    ro = open_store_readonly(db)
    try:
        assert summaries_relation(ro) == "job_summaries" and has_job_summaries(ro, "j")
        assert read_job_summaries(ro, "j", 5)[SensorKey("mem", "", "used_pct")].count == 2
        assert merged_sketches(ro, "job_summaries", "j")[("mem", "", "used_pct")].pos == {
            0: 1,
            35: 1,
        }
    finally:
        ro.close()
    con = open_store(db)
    try:
        assert summaries_relation(con) == "merged_summaries" and has_job_summaries(con, "j")
        got = read_job_summaries(con, "j", 5)[SensorKey("mem", "", "used_pct")]
        assert (got.count, got.sum, got.min, got.max, got.sketch.pos) == (
            2,
            3.0,
            1.0,
            2.0,
            {0: 1, 35: 1},
        )
        columns = {r[0] for r in con.execute("DESCRIBE summary_messages").fetchall()}
        assert {"source_list", "source_hashes"} <= columns
        assert con.execute("SELECT max(version) FROM hushmon_schema").fetchall() == [(4,)]
    finally:
        con.close()
