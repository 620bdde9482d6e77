"""hushmon ingest: idempotent, transactional, explains what it skipped, never loses data."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from hushmon import cli
from hushmon.errors import HushmonError
from hushmon.store import ingest as ingest_mod
from hushmon.store.ingest import ingest_spool
from hushmon.store.query import export_job
from hushmon.store.schema import SCHEMA_VERSION
from hushmon.store.synthetic import Scenario, values_per_node_period, write_spool

SC = Scenario(nodes=3, seconds=20, job="j1", lines_per_file=100)


def _counts(db: Path) -> tuple[int, int, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return tuple(  # type: ignore[return-value]
            con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]
            for t in ("samples", "series", "job_activity")
        )
    finally:
        con.close()


@pytest.fixture()
def spool(tmp_path: Path) -> Path:
    write_spool(SC, tmp_path / "spool")
    return tmp_path / "spool"


def test_ingest_stores_every_value_once(tmp_path: Path, spool: Path) -> None:
    db = tmp_path / "s.duckdb"
    first = ingest_spool(db, spool)
    expected_values = SC.nodes * SC.seconds * (values_per_node_period(SC) - 1)  # minus job line
    assert first.values_stored == expected_values
    assert first.job_periods_stored == SC.nodes * SC.seconds
    assert first.jobs == ["j1"]
    assert first.rejected_lines == 0
    before = _counts(db)
    second = ingest_spool(db, spool)  # the same spool again changes nothing
    assert second.values_stored == 0
    assert second.files_already_ingested == first.files_ingested
    assert _counts(db) == before


def test_copies_under_other_names_are_duplicates(tmp_path: Path, spool: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest_spool(db, spool)
    before = _counts(db)
    again = tmp_path / "again"
    again.mkdir()
    for p in list(spool.iterdir())[:2]:
        shutil.copy(p, again / ("copy-" + p.name))
    report = ingest_spool(db, again)
    assert report.values_stored == 0
    assert report.duplicate_values > 0
    assert _counts(db) == before
    assert "already stored (duplicates)" in "\n".join(report.summary_lines())


def test_corrupt_lines_are_reported_with_file_and_line(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "n1-1-0.lp").write_text(
        "cpu,host=n1,cpu=total user_pct=10 1000000000\n"
        "this is not line protocol\n"
        "cpu,host=n1,cpu=total user_pct=oops 2000000000\n"
        "cpu,cpu=total user_pct=1 3000000000\n"
        "cpu,host=n1,cpu=total user_pct=30 4000000000\n"
        "job,host=n1,job=7 active=1i 1000000000\n",
        encoding="ascii",
    )
    report = ingest_spool(tmp_path / "s.duckdb", spool)
    assert report.values_stored == 2
    where = {(r.file, r.line): r.reason for r in report.rejected}
    assert set(where) == {("n1-1-0.lp", 2), ("n1-1-0.lp", 3), ("n1-1-0.lp", 4)}
    assert "bad number 'oops'" in where[("n1-1-0.lp", 3)]
    assert where[("n1-1-0.lp", 4)] == "no host tag"
    text = "\n".join(report.summary_lines())
    assert "rejected 3 corrupt line(s)" in text and "n1-1-0.lp:2:" in text


def test_open_spool_file_is_read_to_its_last_complete_line(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "n1-1-0.lp.open").write_bytes(
        b"load,host=n1 load1=1 1000000000\nload,host=n1 load1=2 2000000000\nload,host=n1 lo"
    )
    report = ingest_spool(tmp_path / "s.duckdb", spool)
    assert report.values_stored == 2 and report.partial_files == 1
    assert report.rejected_lines == 0


def test_newer_schema_is_refused_and_untouched(tmp_path: Path, spool: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest_spool(db, spool)
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO hushmon_schema (version) VALUES (?)", [SCHEMA_VERSION + 1])
    con.close()
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    with pytest.raises(HushmonError, match="newer than this hushmon"):
        ingest_spool(db, spool)
    with pytest.raises(HushmonError, match="newer than this hushmon"):
        export_job(db, "j1", tmp_path / "x.parquet", "parquet")
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


def test_foreign_duckdb_file_is_refused(tmp_path: Path, spool: Path) -> None:
    db = tmp_path / "other.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t (x INTEGER)")
    con.close()
    with pytest.raises(HushmonError, match="not a hushmon store"):
        ingest_spool(db, spool)


def test_failure_mid_batch_keeps_what_was_stored(
    tmp_path: Path, spool: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "s.duckdb"
    files = sorted(spool.iterdir())
    half = tmp_path / "half"
    half.mkdir()
    for p in files[: len(files) // 2]:
        shutil.move(p, half / p.name)
    ingest_spool(db, half)
    before = _counts(db)

    original = ingest_mod._Ingester._insert_samples

    def fail_after_insert(self, table, dedupe_batch, **kw):  # type: ignore[no-untyped-def]
        original(self, table, dedupe_batch, **kw)
        raise duckdb.IOException("disk full (simulated)")

    monkeypatch.setattr(ingest_mod._Ingester, "_insert_samples", fail_after_insert)
    with pytest.raises(HushmonError, match="disk full"):
        ingest_spool(db, spool)
    assert _counts(db) == before  # the failed batch was rolled back, nothing lost
    monkeypatch.undo()
    report = ingest_spool(db, spool)  # and the files are not marked as ingested
    assert report.values_stored > 0


def test_export_parquet_and_csv(tmp_path: Path, spool: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest_spool(db, spool)
    n = export_job(db, "j1", tmp_path / "j1.parquet", "parquet")
    table = pq.read_table(tmp_path / "j1.parquet")
    assert table.num_rows == n == SC.nodes * SC.seconds * (values_per_node_period(SC) - 1)
    assert table.column_names == ["host", "measurement", "tags", "field", "time_ns", "value"]
    assert export_job(db, "j1", tmp_path / "j1.csv", "csv") == n
    assert pacsv.read_csv(tmp_path / "j1.csv").num_rows == n
    with pytest.raises(HushmonError, match="job 'nope' is not in the store"):
        export_job(db, "nope", tmp_path / "x.csv", "csv")


def test_cli_errors_are_one_line(
    tmp_path: Path, spool: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.duckdb"
    assert cli.main(["ingest", "--db", str(db), "--spool", str(spool), "--json", "-"]) == 0
    captured = capsys.readouterr()  # --json -: stdout is the JSON alone
    assert "values in" in captured.err and json.loads(captured.out)["values_stored"] > 0
    assert cli.main(["ingest", "--db", str(db), "--spool", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith("hushmon: spool folder")
    assert cli.main(["ingest", "--db", str(db), "--export", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hushmon: job 'nope' is not in the store") and err.count("\n") == 1
    assert cli.main(["ingest", "--db", str(tmp_path / "none.duckdb"), "--list"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli.main(["ingest", "--db", str(db), "--list"]) == 0
    assert capsys.readouterr().out.startswith("j1\t3 node(s)")
