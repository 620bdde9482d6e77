"""The job history's records and search (history/records.py, query.py) on
both stores: the embedded DuckDB file and a lake (DuckLake, real files)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from hushmon.errors import HushmonError
from hushmon.history.query import JobQuery, find_record, search
from hushmon.history.records import JobRecord, job_name, record_job, words
from hushmon.store.schema import open_store, open_store_readonly

H = 3_600_000_000_000  # an hour in ns
T0 = 1_790_000_000_000_000_000


def _records() -> list[JobRecord]:
    def rec(job: str, owner: str, name: str, state: str, hour: int, findings: list[str],
            nodes: int = 2, recorded: int = 1) -> JobRecord:  # fmt: skip
        r = JobRecord(job=job, owner=owner, name=name, state=state, start_ns=T0 + hour * H,
                      end_ns=T0 + hour * H + (hour + 1) * 60_000_000_000, nodes=nodes,
                      findings=words(findings), recorded_ns=recorded)  # fmt: skip
        r.worst = findings[0].split(":")[1] if findings else ""
        r.tags = words(f.split(":")[0] for f in findings if not f.endswith(":low"))
        return r

    return [
        rec("7", "alice", "butterfly", "COMPLETED", 0, ["network_bandwidth:high"]),
        rec("8", "bob", "snake", "FAILED", 1, ["imbalance:medium", "idle_cpu:low"], nodes=4),
        rec("9", "alice", "cg-solver", "RUNNING", 2, []),
        # job 9 again, later: it ended, with a digest (the newest row wins)
        rec("9", "alice", "cg-solver", "COMPLETED", 2, ["disk_swap:high"], recorded=5),
        rec("10", "carol", "Butterfly-big", "TIMEOUT", 3, ["idle_cpu:medium"], nodes=8),
    ]


@pytest.fixture(scope="module", params=["duckdb", "lake"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp(request.param) / (
        "hushmon.lake" if request.param == "lake" else "hushmon.duckdb"
    )
    open_store(path).close()
    recs = _records()
    record_job(path, recs[:3])  # two appends: the newer rows come in a later write
    record_job(path, recs[3:])
    return path


@pytest.fixture(scope="module")
def con(store: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    c = open_store_readonly(store)
    yield c
    c.close()


def _jobs(con: duckdb.DuckDBPyConnection, q: JobQuery) -> list[str]:
    return [r.job for r in search(con, q).records]


def test_newest_row_of_a_job_is_its_record(con: duckdb.DuckDBPyConnection) -> None:
    page = search(con, JobQuery())
    rec = find_record(con, "9", None)
    assert page.total == 4 and sorted(r.job for r in page.records) == ["10", "7", "8", "9"]
    assert rec is not None and rec.state == "COMPLETED" and rec.worst == "high"
    assert _jobs(con, JobQuery(state="RUNNING")) == []  # the older row is not searched


def test_filters(con: duckdb.DuckDBPyConnection) -> None:
    assert _jobs(con, JobQuery(owner="alice")) == ["9", "7"]
    assert _jobs(con, JobQuery(name="butterfly")) == ["10", "7"]  # any case, a part
    assert _jobs(con, JobQuery(state="failed")) == ["8"]
    assert _jobs(con, JobQuery(factor="idle_cpu")) == ["10", "8"]
    assert _jobs(con, JobQuery(factor="idle_cpu", severity="medium")) == ["10"]
    assert _jobs(con, JobQuery(severity="high")) == ["9", "7"]
    assert _jobs(con, JobQuery(tag="imbalance")) == ["8"]
    assert _jobs(con, JobQuery(tag="idle_cpu")) == ["10"]  # a low finding is no tag
    assert _jobs(con, JobQuery(since_ns=T0 + H, until_ns=T0 + 2 * H)) == ["9", "8"]
    assert _jobs(con, JobQuery(job="1*")) == ["10"]
    assert _jobs(con, JobQuery(job="8")) == ["8"]


def test_viewer_sees_only_their_own(con: duckdb.DuckDBPyConnection) -> None:
    assert _jobs(con, JobQuery(viewer="bob")) == ["8"]
    # a user naming someone else as owner still gets only their own
    assert _jobs(con, JobQuery(viewer="bob", owner="alice")) == []
    assert find_record(con, "7", "bob") is None and find_record(con, "8", "bob") is not None


def test_sort_and_pages(con: duckdb.DuckDBPyConnection) -> None:
    assert _jobs(con, JobQuery(sort="nodes", descending=True)) == [
        "10",
        "8",
        "7",
        "9",
    ]  # ties by id
    assert _jobs(con, JobQuery(sort="job", descending=False)) == ["7", "8", "9", "10"]
    assert _jobs(con, JobQuery(sort="duration", descending=True))[0] == "10"
    assert _jobs(con, JobQuery(sort="worst", descending=True)) == ["7", "9", "10", "8"]
    p2 = search(con, JobQuery(sort="start", descending=False, per_page=3, page=2))
    p9 = search(con, JobQuery(per_page=3, page=9))
    assert [r.job for r in p2.records] == ["10"] and p2.total == 4 and p2.pages == 2
    assert p9.records == [] and p9.total == 4


def test_bad_queries_are_refused(con: duckdb.DuckDBPyConnection) -> None:
    for q in (JobQuery(sort="owner; DROP TABLE x"), JobQuery(per_page=0),
              JobQuery(severity="awful"), JobQuery(tag="a' OR 1=1 --")):  # fmt: skip
        with pytest.raises(HushmonError):
            search(con, q)


def test_a_store_without_records_has_no_jobs(tmp_path: Path) -> None:
    path = tmp_path / "hushmon.duckdb"
    open_store(path).close()
    con = open_store_readonly(path)
    try:
        assert search(con, JobQuery()).total == 0
    finally:
        con.close()


def test_job_name_is_the_program_not_its_launcher(tmp_path: Path) -> None:
    prog = tmp_path / "butterfly"
    prog.write_text("#!/bin/sh\n")
    prog.chmod(0o755)
    assert job_name(["srun", "-N", "4", str(prog), "--cycles", "3"]) == "butterfly"
    assert job_name(["mpirun", "-np", "2", str(prog)]) == "butterfly"
    assert job_name(["/usr/bin/sleep", "3"]) == "sleep"
    assert job_name(["srun", "-N", "4", "no-such-program"]) == "srun"


def test_a_taggers_job_tags_are_searched_and_shown(tmp_path: Path) -> None:
    """``hushmon tag``'s table (job, tag, ...): its tags are found by the tag
    search and come first among a job's tags on the page."""
    path = tmp_path / "hushmon.duckdb"
    open_store(path).close()
    record_job(path, _records())
    con = open_store(path)
    con.execute("CREATE TABLE job_tags (job VARCHAR, tag VARCHAR, rule VARCHAR, hint VARCHAR, "
                "tagged_ns BIGINT)").fetchall()  # fmt: skip
    con.execute("INSERT INTO job_tags VALUES ('8', 'load_imbalance', 'r', 'h', 1), "
                "('8', 'lowload', 'r', 'h', 1)").fetchall()  # fmt: skip
    con.close()
    con = open_store_readonly(path)
    try:
        page = search(con, JobQuery(tag="load_imbalance"))
        assert [r.job for r in page.records] == ["8"] and page.tags_from == "job_tags"
        assert page.records[0].tags.split() == ["load_imbalance", "lowload", "imbalance"]
        assert _jobs(con, JobQuery(tag="imbalance")) == ["8"]  # the findings' tags still count
    finally:
        con.close()


def test_index_records_the_jobs_nobody_recorded(tmp_path: Path) -> None:
    """``hushmon serve index``: a job stored without ``hushmon run`` gets a
    record (nodes and span from its samples, findings from its digest
    when there is one); a job with a record, one outside the span and one
    still running are left; a second run adds nothing."""
    from hushmon.datadir import DataDir
    from hushmon.history.index import index_jobs
    from hushmon.store.synthetic import START_NS, Scenario, synthetic_store

    data = DataDir(tmp_path)
    db = tmp_path / "hushmon.duckdb"
    for job, start in (("31", START_NS), ("32", START_NS + H), ("33", START_NS + 2 * H),
                       ("34", START_NS - 30 * 24 * H)):  # fmt: skip
        synthetic_store(Scenario(nodes=2, seconds=10, job=job, start_ns=start), tmp_path, db)
    record_job(db, [JobRecord(job="32", owner="alice", source="run")])
    (tmp_path / "reports" / "31").mkdir(parents=True)
    (tmp_path / "reports" / "31" / "digest.json").write_text(
        '{"findings": [{"factor": "idle_cpu", "severity": "medium", "title": "Idle"}]}'
    )
    now = START_NS + 2 * H + 30 * 10**9  # job 33 ended 21 s ago: still settling
    first = index_jobs(db, data, since_days=7, settle_s=120, now_ns=now, slurm=False)
    assert (first.seen, first.recorded_before, first.added, first.settling) == (3, 1, 1, 1)
    con = open_store_readonly(db)
    try:
        rec = find_record(con, "31", None)
        assert rec is not None and rec.owner == "" and rec.nodes == 2 and rec.source == "index"
        assert rec.hosts == "node000 node001" and rec.end_ns - rec.start_ns == 9 * 10**9
        assert rec.worst == "medium" and rec.tags.split() == ["idle_cpu"]
        assert find_record(con, "34", None) is None  # outside the span
        assert find_record(con, "31", "alice") is None  # no owner: admins only
    finally:
        con.close()
    later = index_jobs(db, data, since_days=7, settle_s=120, now_ns=now + 600 * 10**9, slurm=False)
    assert (later.added, later.settling) == (1, 0)  # 33 now
    again = index_jobs(db, data, since_days=7, settle_s=120, now_ns=now + 600 * 10**9, slurm=False)
    assert again.added == 0


def test_a_servers_lake_connection_is_opened_again_every_so_many_uses(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hushmon serve keeps a lake open (history/reader.py) and opens it
    again every REOPEN_EVERY_QUERIES uses, since DuckLake's catalog keeps
    part of every query until then; the embedded file is opened per use."""
    from hushmon.history import reader as reader_module

    monkeypatch.setattr(reader_module, "REOPEN_EVERY_QUERIES", 3)
    reader = reader_module.StoreReader(lambda: store)
    seen = []
    for _ in range(7):
        with reader.connection() as c:
            seen.append(id(c))
            assert _jobs(c, JobQuery(owner="alice")) == ["9", "7"]
    if store.suffix == ".lake":
        assert reader.opens == 3  # uses 1-3, 4-6, 7
        assert seen[0] == seen[1] == seen[2] != seen[3]
    else:
        assert reader.opens == 0  # none kept
