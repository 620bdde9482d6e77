"""Store schema 1 -> 2: a store written before the transport gains its
tables and keeps its data."""

from __future__ import annotations

from pathlib import Path

import duckdb

from hushmon.store.schema import _TABLES, SCHEMA_VERSION, open_store


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
        assert versions == [1, SCHEMA_VERSION] and SCHEMA_VERSION == 2
        assert con.execute("SELECT count(*) FROM transport_batches").fetchall() == [(0,)]
        assert con.execute("SELECT count(*) FROM job_activity").fetchall() == [(1,)]
    finally:
        con.close()
    open_store(db).close()  # opening again adds no version row
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM hushmon_schema").fetchall() == [(2,)]
    con.close()
