"""Live rules: the rule files marked ``live = true`` on each period's job
summary (``hm.sum.job.<job>``, the top reducer's), each alert once per job
and rule until it clears.

Pure logic (no network; ``alert.py`` connects it). Why here and not in the
top reducer (C): the rules are TOML files with expressions that
``tags/expr.py`` evaluates; the reducer would need a second TOML reader and
evaluator in C to stay in step with ``hushmon tag``, and the work is small
(one job summary per job and period; bench/bench_alert.py: 0.23 ms of CPU
a summary of 16 nodes, 0.71 of what parsing all of it costs, since only the
sensors the live rules read are parsed; load 31-40 on this 2-vCPU VM),
where the reducer's hot path is the raw batches of every node.

A period's facts (the same dotted names as a stored job's, where the
summary has them): ``<measurement>.<field>.avg/.min/.max`` over the job's
nodes for the job-wide sensors (no tags, ``cpu=total``, or ``scope=host``
when the node-scope one is absent; ``gpu`` over every GPU),
``cpu.busy_pct`` (100 - idle - iowait), ``job.nodes``, ``job.duration_s``
(since the job's first summary seen). A rule's ``hold_s``: how long its
condition must hold in consecutive periods before the alert."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hushmon.errors import HushmonError
from hushmon.live.sensors import ParsedSensor
from hushmon.live.state import Parsed
from hushmon.tags.expr import Missing
from hushmon.tags.rules import Rule, RuleSet
from hushmon.transport import wire
from hushmon.transport.summary import Summary

FIRING, CLEARED = "firing", "cleared"
NS = 1_000_000_000


@dataclass(frozen=True)
class Alert:
    job: str
    rule: str
    tag: str
    state: str  # firing or cleared
    hint: str
    period_ns: int  # the summary period that raised or cleared it
    nodes: tuple[str, ...]
    nhr_class: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job, "rule": self.rule, "tag": self.tag, "state": self.state,
            "hint": self.hint, "period_ns": self.period_ns, "nodes": list(self.nodes),
            "nhr_class": self.nhr_class,
        }  # fmt: skip


@dataclass
class _RuleState:
    since_ns: int | None = None  # the first period of the condition's current run
    firing: bool = False


@dataclass
class _Job:
    first_ns: int
    period_ns: int = -1
    sources: set[tuple[str, int, int]] = field(default_factory=set)
    sensors: dict[ParsedSensor, Summary] = field(default_factory=dict)
    seen_ns: int = 0  # when its newest summary arrived (wall clock)
    rules: dict[str, _RuleState] = field(default_factory=dict)


def _stat(into: dict[str, Any], name: str, s: Summary) -> None:
    if s.count:
        into[f"{name}.avg"], into[f"{name}.min"], into[f"{name}.max"] = s.mean, s.min, s.max


def period_facts(sensors: dict[ParsedSensor, Summary]) -> dict[str, Any]:
    """One period's job-wide facts from its merged summaries."""
    node: dict[str, Summary] = {}
    host: dict[str, Summary] = {}
    gpu: dict[str, Summary] = {}
    for sensor, summary in sensors.items():
        tags = dict(sensor.tags)
        scope = tags.pop("scope", "")
        name = f"{sensor.measurement}.{sensor.field}"
        if sensor.measurement == "gpu" and set(tags) == {"gpu"}:
            merged = gpu.setdefault(name, Summary())
            merged.merge(summary)
            continue
        if tags and tags != {"cpu": "total"}:
            continue
        (host if scope == "host" else node)[name] = summary
    chosen = {**host, **node, **gpu}  # the node's own scope over the host's
    facts: dict[str, Any] = {}
    for name, summary in chosen.items():
        if all(part.isidentifier() for part in name.split(".")):
            _stat(facts, name, summary)
    idle = chosen.get("cpu.idle_pct")
    if idle is not None and idle.count:
        wait = chosen.get("cpu.iowait_pct")
        w = wait.mean if wait is not None and wait.count else 0.0
        facts["cpu.busy_pct.avg"] = 100.0 - idle.mean - w
        facts["cpu.busy_pct.min"] = 100.0 - idle.max
        facts["cpu.busy_pct.max"] = 100.0 - idle.min
    return facts


class LiveRules:
    """Job summaries in, alerts out."""

    def __init__(self, rules: RuleSet, keep_s: float = 600.0) -> None:
        self.rules: tuple[Rule, ...] = tuple(r for r in rules.rules if r.live)
        self.params = rules.params
        self.keep_ns = int(keep_s * NS)
        self.jobs: dict[str, _Job] = {}
        self.hold_ns: dict[str, int] = {}
        # the summary sensors the live rules read (measurement.field): the
        # reader parses only these (a summary's JSON parse is most of the cost)
        self.wanted: set[str] = set()
        for rule in self.rules:
            exprs = (*rule.guards, rule.condition, *(e for e, _ in rule.hint_fields))
            for name in {n for e in exprs for n in e.names()} | set(rule.requires):
                parts = name.split(".")
                if len(parts) >= 2:
                    self.wanted.add(f"{parts[0]}.{parts[1]}")
        if "cpu.busy_pct" in self.wanted:
            self.wanted |= {"cpu.idle_pct", "cpu.iowait_pct"}
        for rule in self.rules:
            hold = 0.0
            if rule.hold_s is not None:
                try:
                    hold = float(rule.hold_s.evaluate({}, self.params))
                except (Missing, HushmonError, TypeError, ValueError):
                    raise HushmonError(f"{rule.source}: hold_s is not a number") from None
            if not hold >= 0 or math.isinf(hold):
                raise HushmonError(f"{rule.source}: hold_s must be 0 or more seconds")
            self.hold_ns[rule.name] = int(hold * NS)

    def keep(self, sensor: ParsedSensor) -> bool:
        """For parse_payload: a sensor some live rule reads."""
        return f"{sensor.measurement}.{sensor.field}" in self.wanted

    def add(self, p: Parsed, received_ns: int) -> list[Alert]:
        if p.level != "job" or p.job == wire.NO_JOB:
            return []  # "-": the nodes that run no job (no allocation to alert on)
        job = self.jobs.setdefault(p.job, _Job(first_ns=p.time_ns))
        job.seen_ns = received_ns
        if p.time_ns < job.period_ns:
            return []  # late: the rules have moved on
        if p.time_ns > job.period_ns:
            # the parsed summaries are this message's own: kept, not copied
            job.period_ns, job.sources, job.sensors = p.time_ns, set(p.sources), dict(p.sensors)
        elif p.sources and p.sources <= job.sources:
            return []  # a duplicate
        else:
            for sensor, summary in p.sensors.items():
                mine = job.sensors.get(sensor)
                if mine is None:
                    job.sensors[sensor] = summary
                else:
                    mine.merge(summary)
            job.sources |= p.sources
        facts = period_facts(job.sensors)
        nodes = tuple(sorted({s[0] for s in job.sources}))
        facts["job.nodes"] = len(nodes)
        facts["job.duration_s"] = (p.time_ns - job.first_ns) / NS
        return [a for rule in self.rules if (a := self._rule(p.job, job, rule, facts, nodes))]

    def _rule(
        self, name: str, job: _Job, rule: Rule, facts: dict[str, Any], nodes: tuple[str, ...]
    ) -> Alert | None:
        state = job.rules.setdefault(rule.name, _RuleState())
        if any(r not in facts for r in rule.requires):
            return None  # this period's summary lacks it: neither raise nor clear
        try:
            holds = bool(rule.condition.evaluate(facts, self.params))
            guards = all(g.evaluate(facts, self.params) for g in rule.guards)
        except Missing:
            return None
        if not holds:
            was = state.firing
            state.since_ns, state.firing = None, False
            if was:
                hint = f"cleared: {rule.condition.text} no longer holds"
                return Alert(name, rule.name, rule.tag, CLEARED, hint, job.period_ns, nodes,
                             rule.nhr_class)  # fmt: skip
            return None
        if state.since_ns is None:
            state.since_ns = job.period_ns
        if state.firing or not guards:
            return None
        if job.period_ns - state.since_ns < self.hold_ns[rule.name]:
            return None
        state.firing = True
        return Alert(name, rule.name, rule.tag, FIRING, rule.render_hint(facts, self.params),
                     job.period_ns, nodes, rule.nhr_class)  # fmt: skip

    def expire(self, now_ns: int) -> list[str]:
        """Forget jobs not heard from for keep_s (they ended); their names."""
        gone = [j for j, s in self.jobs.items() if now_ns - s.seen_ns > self.keep_ns]
        for j in gone:
            del self.jobs[j]
        return gone
