"""Each of a job's nodes' CPU model and online CPU count, from the agent's
``cpu_info`` lines (node metadata: c/agent/samplers/proc_cpuinfo.c writes one
at start and hourly, the model as a tag).

The roofline factor maps a node that no probe record names in its host list
to its node type by these (model + online CPUs: the key ``hushmon probe``
stores its ceilings under). A node whose agent was restarted on other
hardware has several ``cpu_info`` series: the one written last at or before
the job's end counts (else the first after it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from hushmon.store.schema import open_store_readonly

_SERIES_SQL = """
SELECT series_id, host, tags FROM series
WHERE measurement = 'cpu_info' AND field = 'cpus'
  AND host IN (SELECT DISTINCT host FROM job_activity WHERE job = $job)
"""

# Only the few cpu_info series' samples: one a node per agent start and hour.
_LAST_SQL = """
SELECT series_id,
       max(time_ns) FILTER (WHERE time_ns <= $end) AS before_end,
       min(time_ns) AS first,
       arg_max(value, time_ns) AS cpus
FROM samples
WHERE list_contains($ids, series_id)
GROUP BY series_id
"""


@dataclass(frozen=True)
class CpuModel:
    model: str  # as the agent wrote it (a tag: see ceilings.normal_model)
    cpus: int  # online CPUs


def _model_of(tags: str) -> str | None:
    for part in tags.split(","):
        key, eq, value = part.partition("=")
        if eq and key == "model":
            return value
    return None


def read_cpu_models(db_path: Path, job: str, end_ns: int) -> dict[str, CpuModel]:
    """host -> its CPU model for the job's nodes that have ``cpu_info`` lines."""
    con = open_store_readonly(Path(db_path))
    try:
        series = con.execute(_SERIES_SQL, {"job": job}).fetchall()
        if not series:
            return {}
        ids = [int(s[0]) for s in series]
        last = {
            int(r[0]): (r[1], r[2], r[3])
            for r in con.execute(_LAST_SQL, {"ids": ids, "end": end_ns}).fetchall()
        }
    except duckdb.Error:
        return {}  # a store without these lines (or an older schema): none known
    finally:
        con.close()
    best: dict[str, tuple[tuple[int, int], CpuModel]] = {}
    for sid, host, tags in series:
        model = _model_of(str(tags))
        got = last.get(int(sid))
        if model is None or got is None or got[2] is None:
            continue
        before, first, cpus = got
        # the latest at or before the job's end first, else the earliest after it
        rank = (1, int(before)) if before is not None else (0, -int(first))
        if host not in best or rank > best[host][0]:
            best[str(host)] = (rank, CpuModel(model, int(cpus)))
    return {h: m for h, (_, m) in best.items()}
