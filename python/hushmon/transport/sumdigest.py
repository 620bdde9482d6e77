"""``hushmon digest JOB --from-summaries``: the job from its summaries alone.

What the in-network reduction keeps: per (period, sensor) count, sum,
mean, M2, min, max and a quantile sketch over the job's nodes. From that,
min / avg / max (and the spread) of every sensor over nodes per period,
and quantiles over the whole job. The digest's factors run on the same
data (:func:`hushmon.digest.summaries.load_summaries`: one JobData, the
reader for this source): those that need only the across-node statistics
(idle CPU share, swapping and disk) answer as from raw data, those that
need each node's values are skipped with that reason. What it cannot give
is listed in :data:`LOST` and written into the output.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.digest.factors.base import SEVERITIES, Finding, Skipped
from hushmon.errors import HushmonError
from hushmon.store.schema import open_store_readonly
from hushmon.transport.summary import Sketch, Summary, merge_all
from hushmon.transport.wire import SensorKey

LOST = (
    "no per-node values: no node x period heat maps, no per-node lines in plots",
    "no per-node factors (skipped, each with its reason): imbalance, network bandwidth, "
    "topology and rack uplinks, GPUs, the application timeline",
    "no states, correlations or vectors (need the raw per-period matrix per node)",
    "quantiles within the sketch's relative accuracy (alpha), not exact",
)


@dataclass
class SummaryDigest:
    job: str
    json_path: Path
    periods: int
    sensors: list[dict[str, Any]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def summary_lines(self) -> list[str]:
        lines = [
            f"digest of job {self.job} from summaries: {len(self.sensors)} sensor(s) over "
            f"{self.periods} period(s) -> {self.json_path}",
        ]
        for s in self.sensors:
            if s["name"] in _SHOWN:
                lines.append(
                    f"  {s['name']}: "
                    + "  ".join(f"{k} {_num(s[k])}" for k in ("min", "avg", "max", "p50", "p99"))
                )
        for f in sorted(self.findings, key=lambda f: SEVERITIES.index(f.severity)):
            lines.append(f"[{f.severity}] {f.title}: {f.hint}")
        for sk in self.skipped:
            lines.append(f"(skipped {sk.factor}: {sk.detail})")
        lines.append("lost compared to raw data:")
        lines.extend(f"  - {why}" for why in LOST)
        return lines


_SHOWN = (
    "cpu.user_pct[cpu=total]",
    "cpu.system_pct[cpu=total]",
    "mem.used_pct",
    "load.load1",
)


def _summary(r: tuple[Any, ...]) -> Summary:
    """count, sum, mean, m2, min, max, sketch (JSON) as job_summaries stores them."""
    return Summary(int(r[0]), r[1], r[2], r[3], r[4], r[5], Sketch.from_json(json.loads(r[6])))


def _read_all(con: Any, job: str) -> dict[SensorKey, list[tuple[int, Summary]]]:
    """Every (sensor, period) summary of the job, in one query (periods x sensors rows)."""
    rows = con.execute(
        """SELECT measurement, tags, field, time_ns, count, sum, mean, m2, min, max, sketch
           FROM job_summaries WHERE job = ? ORDER BY measurement, tags, field, time_ns""",
        [job],
    ).fetchall()
    out: dict[SensorKey, list[tuple[int, Summary]]] = {}
    for r in rows:
        out.setdefault(SensorKey(r[0], r[1], r[2]), []).append((int(r[3]), _summary(r[4:])))
    return out


def _num(x: float | None) -> str:
    """A figure for people; a quantile without a sketch is None."""
    return "-" if x is None else f"{x:.4g}"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def digest_from_summaries(db: Path, job: str, out_dir: Path) -> SummaryDigest:
    con = open_store_readonly(db)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        if "job_summaries" not in tables:
            raise HushmonError(f"{db} has no summaries: run 'hushmon collect' into it")
        per_sensor = _read_all(con, job)
    finally:
        con.close()
    times = sorted({t for rows in per_sensor.values() for t, _s in rows})
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
    from hushmon.digest.factors import run_factors
    from hushmon.digest.summaries import load_summaries

    data = load_summaries(db, job)
    result = run_factors(data)
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
        "resolution": {
            **(data.resolution.to_json() if data.resolution else {}),
            "factors": result.data_used,
        },
        "findings": [f.to_json() for f in result.findings],
        "skipped": [s.to_json() for s in result.skipped],
        "sensors": sensors,
    }
    jsonio.write_atomic(path, doc)
    return SummaryDigest(job, path, len(times), sensors, result.findings, result.skipped)
