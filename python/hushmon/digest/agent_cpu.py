"""hushmon's own CPU time during a job, for the energy factor's hushmon share.

The job's sensors leave the agent's own lines out (jobdata.py: they are the
monitor, not the job), so the agent's CPU time is read apart: the sum of
``hushmon_agent.cpu_us`` (CPU time of each complete cycle) on the job's nodes
in the periods they ran the job. It is kept on the JobData's ``__dict__``
(like the links' caches), where ``factors/energy.py`` looks for it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from hushmon.digest.jobdata import JobData
from hushmon.store.schema import open_store_readonly

KEY = "agent_cpu_s"

_SQL = """
SELECT sum(s.value) / 1e6
FROM samples s
JOIN series x ON x.series_id = s.series_id
JOIN job_activity a ON a.host = x.host AND a.time_ns = s.time_ns
WHERE a.job = $job AND x.measurement = 'hushmon_agent' AND x.field = 'cpu_us'
"""


def read_agent_cpu_s(db_path: Path, job: str) -> float | None:
    """The agents' CPU-seconds on the job's nodes while they ran it (None: no lines)."""
    con = open_store_readonly(Path(db_path))
    try:
        row = con.execute(_SQL, {"job": job}).fetchone()
    except duckdb.Error:
        return None  # a store without the agent's lines (or an older schema): not known
    finally:
        con.close()
    return None if row is None or row[0] is None else float(row[0])


def attach_agent_cpu(job: JobData, db_path: Path) -> None:
    job.__dict__[KEY] = read_agent_cpu_s(db_path, job.job)


def agent_cpu_s(job: JobData) -> float | None:
    value = job.__dict__.get(KEY)
    return None if value is None else float(value)
