"""What the live views know: the newest period of every job, from the
summaries of docs/transport.md, merged as they come.

Pure logic (no network): :meth:`LiveState.add` takes one message (subject,
payload, when it arrived) and :meth:`LiveState.snapshot` gives a JSON-able
picture for ``hushmon top`` and ``hushmon serve``. Several summaries of one
(job, period) have disjoint sources and are merged; one whose sources were
all merged already is a duplicate; one of an older period than the newest
is counted as late and not shown (the store keeps it, the live view moves
on). Job-wide summaries (``hm.sum.job.<job>``) give the job's figures; rack
partials (``hm.sum.rack.<rack>``) give a row per rack, which is one node's
own values when a single node of the job is in that rack: summaries carry no
other per-node values.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hushmon.live.sensors import APP_MEASUREMENTS, KEY_SENSORS, ParsedSensor, parse_sensor, pick
from hushmon.transport import wire
from hushmon.transport.summary import Summary

Source = tuple[str, int, int]  # host, epoch, seq
HISTORY = 300  # periods per job kept for the page's plots (5 min at 1 s)


@dataclass
class Period:
    """One (job, period) at one level: its summaries merged so far."""

    time_ns: int
    received_ns: int
    sources: set[Source] = field(default_factory=set)
    sensors: dict[ParsedSensor, Summary] = field(default_factory=dict)

    @property
    def hosts(self) -> list[str]:
        return sorted({s[0] for s in self.sources})


@dataclass
class JobLive:
    job: str
    whole: Period | None = None  # from hm.sum.job.<job>
    racks: dict[str, Period] = field(default_factory=dict)
    # the job-wide figures of the periods before ``whole``, oldest first
    past: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=HISTORY))
    # The newest job-wide period that held application values: a program
    # sends once per iteration (or per 100 ms), so at short sampling
    # periods most periods have none, and the views would show them only
    # now and then.
    with_app: Period | None = None


@dataclass
class Parsed:
    level: str
    job: str
    rack: str
    time_ns: int
    sources: set[Source]
    sensors: dict[ParsedSensor, Summary]


def parse_payload(
    subject: str, payload: bytes, keep: Callable[[ParsedSensor], bool] | None = None
) -> Parsed | str:
    """A summary message, or why it is not one (never raises)."""
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"{subject}: not JSON ({exc})"
    if not isinstance(obj, dict):
        return f"{subject}: payload is not an object"
    level = obj.get("level")
    if level not in ("job", "rack"):
        return f"{subject}: level {level!r} is neither 'job' nor 'rack'"
    want = wire.SUM_JOB_PREFIX if level == "job" else wire.SUM_RACK_PREFIX
    if not subject.startswith(want):
        return f"{subject}: a {level} summary on a subject outside {want}>"
    job, time_ns, rack = obj.get("job"), obj.get("time_ns"), obj.get("rack", "")
    if not isinstance(job, str) or not job:
        return f"{subject}: no job"
    if not isinstance(time_ns, int) or isinstance(time_ns, bool):
        return f"{subject}: time_ns is not an integer"
    if level == "rack" and (not isinstance(rack, str) or not rack):
        return f"{subject}: rack summary without rack"
    sources: set[Source] = set()
    raw_sources = obj.get("sources", [])
    if not isinstance(raw_sources, list):
        return f"{subject}: sources is not a list"
    for s in raw_sources:
        if not (isinstance(s, list) and len(s) == 3 and isinstance(s[0], str)):
            return f"{subject}: source {s!r} is not [host, epoch, seq]"
        try:
            sources.add((s[0], int(s[1]), int(s[2])))
        except (TypeError, ValueError):
            return f"{subject}: source {s!r} is not [host, epoch, seq]"
    raw_sensors = obj.get("sensors")
    if not isinstance(raw_sensors, dict):
        return f"{subject}: sensors is not an object"
    sensors: dict[ParsedSensor, Summary] = {}
    for key, value in raw_sensors.items():
        sensor = parse_sensor(key)
        if sensor is None:
            return f"{subject}: bad sensor key {key!r}"
        if keep is not None and not keep(sensor):
            continue  # a reader that shows fewer sensors reads fewer
        try:
            # the views show no quantiles: the sketch is not read
            sensors[sensor] = Summary.from_json(value, with_sketch=False)
        except ValueError as exc:
            return f"{subject}: sensor {key!r}: {exc}"
    return Parsed(level, job, rack if level == "rack" else "", time_ns, sources, sensors)


def _fold(current: Period | None, p: Parsed, received_ns: int) -> tuple[Period, str]:
    """The period after adding ``p``, and what happened: new, merged, dup, late."""
    if current is None or p.time_ns > current.time_ns:
        return Period(p.time_ns, received_ns, set(p.sources), dict(p.sensors)), "new"
    if p.time_ns < current.time_ns:
        return current, "late"
    if p.sources and p.sources <= current.sources:
        return current, "dup"
    for sensor, summary in p.sensors.items():
        mine = current.sensors.get(sensor)
        if mine is None:
            current.sensors[sensor] = summary
        else:
            mine.merge(summary)
    current.sources |= p.sources
    current.received_ns = received_ns
    return current, "merged"


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _stat(s: Summary) -> dict[str, Any]:
    return {"count": s.count, "min": _num(s.min), "avg": _num(s.mean), "max": _num(s.max)}


def key_sensors(sensors: dict[ParsedSensor, Summary]) -> list[dict[str, Any]]:
    out = []
    for ks in KEY_SENSORS:
        found = pick(ks, sensors)
        if found is None:
            continue
        which, summary = found
        out.append({"label": ks.label, "unit": ks.unit, "which": which, **_stat(summary)})
    return out


def app_metrics(job: str, sensors: dict[ParsedSensor, Summary]) -> list[dict[str, Any]]:
    """The application's own values, merged over ranks per name. A node's
    app lines of another job that shares it are left out."""
    out = []
    for measurement, name_tag, field_name, unit in APP_MEASUREMENTS:
        by_name: dict[str, Summary] = {}
        ranks: dict[str, set[str]] = {}
        for sensor, summary in sensors.items():
            if sensor.measurement != measurement or sensor.field != field_name:
                continue
            if job != wire.NO_JOB and sensor.tag("job") not in ("", job):
                continue
            name = sensor.tag(name_tag)
            merged = by_name.setdefault(name, Summary())
            merged.merge(summary)  # into a new Summary: the period's stays as it is
            ranks.setdefault(name, set()).add(sensor.tag("rank"))
        for name in sorted(by_name):
            label = name if measurement == "app" else f"phase {name}"
            out.append(
                {"name": label, "unit": unit, "ranks": len(ranks[name]), **_stat(by_name[name])}
            )
    return out


def _has_app(sensors: dict[ParsedSensor, Summary]) -> bool:
    names = {m for m, *_ in APP_MEASUREMENTS}
    return any(sensor.measurement in names for sensor in sensors)


def compact(job: str, period: Period) -> dict[str, Any]:
    """A period as the page plots it: ``[min, avg, max]`` per series name
    (a key sensor's label, ``app <name>`` for an application metric)."""
    series: dict[str, list[float | None]] = {}
    units: dict[str, str] = {}
    for s in key_sensors(period.sensors):
        series[s["label"]], units[s["label"]] = [s["min"], s["avg"], s["max"]], s["unit"]
    for a in app_metrics(job, period.sensors):
        name = f"app {a['name']}"
        series[name], units[name] = [a["min"], a["avg"], a["max"]], a["unit"]
    return {"time_ns": period.time_ns, "series": series, "units": units}


@dataclass
class LiveState:
    jobs: dict[str, JobLive] = field(default_factory=dict)
    messages: int = 0
    bad: int = 0
    late: int = 0
    duplicates: int = 0
    last_error: str = ""
    # which sensors to read (None: all); hushmon metrics reads only what it serves
    keep: Callable[[ParsedSensor], bool] | None = None

    def add(self, subject: str, payload: bytes, received_ns: int) -> str:
        """Takes one summary message; '' or why it was refused (counted)."""
        self.messages += 1
        p = parse_payload(subject, payload, self.keep)
        if isinstance(p, str):
            self.bad += 1
            self.last_error = p
            return p
        job = self.jobs.setdefault(p.job, JobLive(p.job))
        if p.level == "job":
            before = job.whole
            job.whole, what = _fold(job.whole, p, received_ns)
            if what == "new" and before is not None:
                job.past.append(compact(job.job, before))
            if what in ("new", "merged") and _has_app(p.sensors):
                job.with_app = job.whole
        else:
            job.racks[p.rack], what = _fold(job.racks.get(p.rack), p, received_ns)
        if what == "late":
            self.late += 1
        elif what == "dup":
            self.duplicates += 1
        return ""

    def _job_period(self, job: JobLive) -> tuple[Period | None, str]:
        """The job-wide figures: its job summary, or its racks' newest
        period merged while no job summary has come."""
        if job.whole is not None:
            return job.whole, "job"
        if not job.racks:
            return None, ""
        newest = max(r.time_ns for r in job.racks.values())
        merged: Period | None = None
        for r in job.racks.values():
            if r.time_ns != newest:
                continue
            copy = Period(r.time_ns, r.received_ns, set(r.sources), {})
            copy.sensors = {k: Summary().merge(v) for k, v in r.sensors.items()}
            if merged is None:
                merged = copy
            else:
                for k, v in copy.sensors.items():
                    if k in merged.sensors:
                        merged.sensors[k].merge(v)
                    else:
                        merged.sensors[k] = v
                merged.sources |= copy.sources
                merged.received_ns = max(merged.received_ns, copy.received_ns)
        return merged, "racks"

    def history(self) -> dict[str, list[dict[str, Any]]]:
        """Per job with a job-wide summary, its kept periods, oldest first,
        the newest (still open to merges) last."""
        out = {}
        for job in self.jobs.values():
            if job.whole is not None:
                out[job.job] = [*job.past, compact(job.job, job.whole)]
        return out

    def snapshot(self, now_ns: int, stale_s: float = math.inf) -> dict[str, Any]:
        """Jobs whose newest period is at most ``stale_s`` old (by the
        period's own time), newest first, as plain JSON."""
        jobs: list[dict[str, Any]] = []
        hidden = 0
        for job in self.jobs.values():
            period, origin = self._job_period(job)
            if period is None:
                continue
            if (now_ns - period.time_ns) / 1e9 > stale_s:
                hidden += 1
                continue
            racks = []
            for rack in sorted(job.racks):
                r = job.racks[rack]
                if r.time_ns < period.time_ns:
                    continue  # the job has left the rack, or the rack is behind
                racks.append(
                    {
                        "rack": rack,
                        "time_ns": r.time_ns,
                        "nodes": r.hosts,
                        "sensors": key_sensors(r.sensors),
                    }
                )
            app = app_metrics(job.job, period.sensors)
            app_time_ns = period.time_ns
            if not app and job.with_app is not None and origin == "job":
                app = app_metrics(job.job, job.with_app.sensors)
                app_time_ns = job.with_app.time_ns
            jobs.append(
                {
                    "job": job.job,
                    "from": origin,
                    "time_ns": period.time_ns,
                    "lag_s": (now_ns - period.time_ns) / 1e9,
                    "age_s": (now_ns - period.received_ns) / 1e9,
                    "nodes": period.hosts,
                    "n_sensors": len(period.sensors),
                    "sensors": key_sensors(period.sensors),
                    "racks": racks,
                    # the newest period's, else the newest period's that had some
                    "app": app,
                    "app_time_ns": app_time_ns,
                }
            )
        jobs.sort(key=lambda j: (-j["time_ns"], j["job"]))
        return {
            "now_ns": now_ns,
            "jobs": jobs,
            "stale_jobs": hidden,
            "messages": self.messages,
            "bad": self.bad,
            "late": self.late,
            "duplicates": self.duplicates,
            "last_error": self.last_error,
        }
