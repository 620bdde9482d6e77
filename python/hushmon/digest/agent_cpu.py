"""hushmon's own CPU time during a job, for the energy factor's hushmon share.

The job's sensors leave the agent's own lines out (jobdata.py: they are the
monitor, not the job), so the agent's CPU time is read apart:
``hushmon_agent.cpu_us`` (CPU time of each complete cycle) on the job's nodes
in the periods they ran the job, as a total and per node and period (the
energy factor prices each period's CPU time at that period's energy per
busy CPU-second). Both are kept on the JobData's ``__dict__`` (like the
links' caches), where ``factors/energy.py`` looks for them.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np

from hushmon.digest.jobdata import JobData
from hushmon.store.schema import open_store_readonly

KEY = "agent_cpu_s"
BY_PERIOD_KEY = "agent_cpu_s_by_period"

_SQL = """
SELECT x.host, s.time_ns, sum(s.value) / 1e6
FROM samples s
JOIN series x ON x.series_id = s.series_id
JOIN job_activity a ON a.host = x.host AND a.time_ns = s.time_ns
WHERE a.job = $job AND x.measurement = 'hushmon_agent' AND x.field = 'cpu_us'
GROUP BY x.host, s.time_ns
"""


def read_agent_cpu_rows(db_path: Path, job: str) -> list[tuple[str, int, float]] | None:
    """(host, time_ns, CPU-seconds) of the agents on the job's nodes while they ran
    it (None: no lines)."""
    con = open_store_readonly(Path(db_path))
    try:
        rows = con.execute(_SQL, {"job": job}).fetchall()
    except duckdb.Error:
        return None  # a store without the agent's lines (or an older schema): not known
    finally:
        con.close()
    out = [(str(h), int(t), float(v)) for h, t, v in rows if v is not None]
    return out or None


def read_agent_cpu_s(db_path: Path, job: str) -> float | None:
    """The agents' CPU-seconds on the job's nodes while they ran it (None: no lines)."""
    rows = read_agent_cpu_rows(db_path, job)
    return None if rows is None else sum(r[2] for r in rows)


def by_period(job: JobData, rows: list[tuple[str, int, float]]) -> np.ndarray:
    """hosts x periods of the job: each row's CPU-seconds in the period (or bin) that
    holds its time: the last period starting at or before it."""
    out = np.zeros((len(job.hosts), len(job.times_ns)))
    index = {h: i for i, h in enumerate(job.hosts)}
    for host, t_ns, cpu_s in rows:
        h = index.get(host)
        t = int(np.searchsorted(job.times_ns, t_ns, side="right")) - 1
        if h is not None and t >= 0:
            out[h, t] += cpu_s
    return out


def attach_agent_cpu(job: JobData, db_path: Path) -> None:
    rows = read_agent_cpu_rows(db_path, job.job)
    job.__dict__[KEY] = None if rows is None else sum(r[2] for r in rows)
    job.__dict__[BY_PERIOD_KEY] = None if rows is None else by_period(job, rows)


def agent_cpu_s(job: JobData) -> float | None:
    value = job.__dict__.get(KEY)
    return None if value is None else float(value)


def agent_cpu_s_by_period(job: JobData) -> np.ndarray | None:
    """hosts x periods of the agents' CPU-seconds (None: not read or no lines)."""
    value = job.__dict__.get(BY_PERIOD_KEY)
    return None if value is None else np.asarray(value)
