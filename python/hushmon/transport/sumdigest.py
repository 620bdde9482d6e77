"""``hushmon digest JOB --from-summaries``: the job from its summaries alone.

What the in-network reduction keeps: per (period, sensor) count, sum,
mean, M2, min, max and a quantile sketch over the job's nodes. From that,
min / avg / max (and the spread) of every sensor over nodes per period,
and quantiles over the whole job. What it cannot give is listed in
:data:`LOST` and written into the output.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.errors import HushmonError
from hushmon.store.schema import open_store_readonly
from hushmon.transport.collect_summaries import read_job_summaries
from hushmon.transport.summary import Summary, merge_all
from hushmon.transport.wire import SensorKey

LOST = (
    "no per-node values: no node x period heat maps, no per-node lines in plots",
    "no per-node factors: imbalance by node, the slowest node, idle CPUs of one node",
    "no topology or rack-uplink analysis (needs which node sent what)",
    "no states, correlations or vectors (need the raw per-period matrix per node)",
    "quantiles within the sketch's relative accuracy (alpha), not exact",
)


@dataclass
class SummaryDigest:
    job: str
    json_path: Path
    periods: int
    sensors: list[dict[str, Any]] = field(default_factory=list)

    def summary_lines(self) -> list[str]:
        lines = [
            f"digest of job {self.job} from summaries: {len(self.sensors)} sensor(s) over "
            f"{self.periods} period(s) -> {self.json_path}",
        ]
        for s in self.sensors:
            if s["name"] in _SHOWN:
                lines.append(
                    f"  {s['name']}: min {s['min']:.4g}  avg {s['avg']:.4g}  max {s['max']:.4g}"
                    f"  p50 {s['p50']:.4g}  p99 {s['p99']:.4g}"
                )
        lines.append("lost compared to raw data:")
        lines.extend(f"  - {why}" for why in LOST)
        return lines


_SHOWN = (
    "cpu.user_pct[cpu=total]",
    "cpu.system_pct[cpu=total]",
    "mem.used_pct",
    "load.load1",
)


def _periods(con: Any, job: str) -> Iterator[int]:
    rows = con.execute(
        "SELECT DISTINCT time_ns FROM job_summaries WHERE job = ? ORDER BY time_ns", [job]
    ).fetchall()
    return (int(r[0]) for r in rows)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def digest_from_summaries(db: Path, job: str, out_dir: Path) -> SummaryDigest:
    con = open_store_readonly(db)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        if "job_summaries" not in tables:
            raise HushmonError(f"{db} has no summaries: run 'hushmon collect' into it")
        per_sensor: dict[SensorKey, list[tuple[int, Summary]]] = {}
        times = list(_periods(con, job))
        for t in times:
            for key, s in read_job_summaries(con, job, t).items():
                per_sensor.setdefault(key, []).append((t, s))
    finally:
        con.close()
    if not times:
        raise HushmonError(f"no summaries of job {job!r} in {db} (collected with hushmon collect?)")
    sensors = []
    for key in sorted(per_sensor):
        rows = per_sensor[key]
        total = merge_all(s for _t, s in rows)
        sensors.append(
            {
                "name": key.name,
                "min": total.min,
                "avg": total.mean,
                "max": total.max,
                "std": math.sqrt(total.variance) if total.count else None,
                "p50": _finite(total.quantile(0.5)),
                "p99": _finite(total.quantile(0.99)),
                "values": total.count,
                "periods": [
                    {"time_ns": t, "min": s.min, "avg": s.mean, "max": s.max, "count": s.count}
                    for t, s in rows
                ],
            }
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "digest-summaries.json"
    doc = {
        "job": job,
        "source": "summaries",
        "periods": len(times),
        "start_ns": times[0],
        "end_ns": times[-1],
        "alpha": 0.01,
        "lost_compared_to_raw": list(LOST),
        "sensors": sensors,
    }
    jsonio.write_atomic(path, doc)
    return SummaryDigest(job, path, len(times), sensors)
