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
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.digest.factors.base import SEVERITIES, Finding, Skipped
from hushmon.digest.summary_sensors import summary_sensor_rows
from hushmon.errors import HushmonError
from hushmon.store.schema import open_store_readonly

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


def _num(x: float | None) -> str:
    """A figure for people; a quantile without a sketch is None."""
    return "-" if x is None else f"{x:.4g}"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _write(path: Path, doc: dict[str, Any]) -> None:
    """digest-summaries.json, compact and atomic. Its periods are plain floats
    from DuckDB already (finite: the collector refuses others): jsonio's
    per-value conversion and indented (pure Python) encoding took 110 s for
    3600 periods x 99 sensors, json's C encoder a few seconds."""
    try:
        text = json.dumps(doc, allow_nan=False, separators=(",", ":"))
    except ValueError:  # a NaN after all: jsonio writes it as null
        jsonio.write_atomic(path, doc, indent=None)
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(path)


def digest_from_summaries(db: Path, job: str, out_dir: Path) -> SummaryDigest:
    con = open_store_readonly(db)
    try:
        found = summary_sensor_rows(con, job)
        if found is None:
            raise HushmonError(f"{db} has no summaries: run 'hushmon collect' into it")
        sensors = found
    finally:
        con.close()
    times = sorted({p["time_ns"] for sensor in sensors for p in sensor["periods"]})
    if not times:
        raise HushmonError(f"no summaries of job {job!r} in {db} (collected with hushmon collect?)")
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
        "findings": jsonio.plain([f.to_json() for f in result.findings]),
        "skipped": [s.to_json() for s in result.skipped],
        "sensors": sensors,
    }
    _write(path, doc)
    return SummaryDigest(job, path, len(times), sensors, result.findings, result.skipped)
