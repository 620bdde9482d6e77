"""Reading a job back from the store: its nodes, span and samples.

A job's samples are the node samples taken on its nodes at the periods the
agent saw it running there (``job_activity``); per-job measurements that
carry a ``job`` tag (cgroup) are kept only for this job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from hushmon.errors import HushmonError
from hushmon.store.schema import open_store_readonly

JOB_SAMPLES_SQL = """
SELECT se.host, se.measurement, se.tags, se.field, s.time_ns, s.value
FROM job_activity j
JOIN series se ON se.host = j.host
JOIN samples s ON s.series_id = se.series_id AND s.time_ns = j.time_ns
WHERE j.job = $job
  AND s.time_ns BETWEEN $start AND $end
  AND (NOT contains(se.tags, 'job=')
       OR list_contains(string_split(se.tags, ','), 'job=' || $job))
"""


@dataclass(frozen=True)
class JobInfo:
    job: str
    hosts: list[str]
    start_ns: int
    end_ns: int
    periods: int

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


def list_jobs(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute("SELECT job FROM jobs ORDER BY start_ns").fetchall()]


def job_info(con: duckdb.DuckDBPyConnection, job: str) -> JobInfo:
    rows = con.execute(
        """SELECT host, min(time_ns), max(time_ns), count(*) FROM job_activity
           WHERE job = ? GROUP BY host ORDER BY host""",
        [job],
    ).fetchall()
    if not rows:
        known = list_jobs(con)
        hint = f"known jobs: {', '.join(known[-10:])}" if known else "the store has no jobs"
        raise HushmonError(f"job {job!r} is not in the store ({hint})")
    return JobInfo(
        job=job,
        hosts=[r[0] for r in rows],
        start_ns=min(int(r[1]) for r in rows),
        end_ns=max(int(r[2]) for r in rows),
        periods=max(int(r[3]) for r in rows),
    )


def job_samples(con: duckdb.DuckDBPyConnection, info: JobInfo) -> pa.Table:
    """host, measurement, tags, field, time_ns, value of the job, as Arrow."""
    params = {"job": info.job, "start": info.start_ns, "end": info.end_ns}
    return con.execute(JOB_SAMPLES_SQL, params).to_arrow_table()


EXPORT_FORMATS = ("parquet", "csv")


def export_job(db_path: Path, job: str, out: Path, fmt: str) -> int:
    """Write the job's samples (long format) to Parquet or CSV; returns the row count."""
    if fmt not in EXPORT_FORMATS:
        raise HushmonError(f"unknown export format {fmt!r} (choose {', '.join(EXPORT_FORMATS)})")
    con = open_store_readonly(db_path)
    try:
        info = job_info(con, job)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        options = "FORMAT parquet, COMPRESSION zstd" if fmt == "parquet" else "FORMAT csv, HEADER"
        sql = f"COPY ({JOB_SAMPLES_SQL} ORDER BY host, measurement, tags, field, time_ns) TO "
        con.execute(
            sql + f"'{_quote(tmp)}' ({options})",
            {"job": info.job, "start": info.start_ns, "end": info.end_ns},
        ).fetchall()
        tmp.replace(out)
        rows = con.execute(
            f"SELECT count(*) FROM ({JOB_SAMPLES_SQL})",
            {"job": info.job, "start": info.start_ns, "end": info.end_ns},
        ).fetchall()
        return int(rows[0][0])
    except duckdb.Error as exc:
        raise HushmonError(f"export of job {job} failed: {str(exc).splitlines()[0]}") from exc
    finally:
        con.close()


def _quote(path: Path) -> str:
    return str(path).replace("'", "''")
