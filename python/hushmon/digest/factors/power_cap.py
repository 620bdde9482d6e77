"""Did a CPU power cap (or heat) hold the job's CPUs back?

Two kinds of evidence, each per node and period:

- **Power at the cap**: a package zone's power (``rapl.power_w``) within
  ``near_limit_pct`` of its enabled long-term limit (``long_term_limit_w``
  with ``limits_enabled`` = 1: RAPL's PL1, which the hardware enforces by
  lowering the clock). The agent reads the limits every 60 s
  (c/agent/samplers/sys_powercap.c).
- **Thermal throttling**: the package's time spent throttled
  (``thermal.package_throttled_pct``, Intel's therm_throt counters) at
  ``throttled_pct`` or more, or throttle events where the kernel has no
  time counter.

A node-period with either is *held*. The verdict is "throttled" when the
periods with some node held are at least ``min_share`` of the job's
periods; otherwise an info finding says "not throttled" with the headroom
(the package's most power over its limit) as evidence.

Cost: the run time the held periods lost to a lower clock.
- With the PMU's ``cycles`` and ``ref_cycles`` (cpu=total), the clock is
  measured: the clock ratio cycles / ref_cycles in a held period against
  the same node's median in its unheld periods gives each held period's
  loss ``1 - r_held / r_free``. Low end: the mean over nodes and periods
  (the nodes held at different times, each waiting only for itself); high
  end: the mean over periods of the most held node's loss (the job goes at
  its slowest node's pace).
- Without them, bounds: a package held at its PL1 could at most have drawn
  its PL2 (short-term limit) without the cap, and the clock follows the
  cube root of the package's power (dynamic power ~ f V^2 with V ~ f), so
  a held period lost at most ``1 - (PL1 / PL2)^(1/3)``; a thermally
  throttled one at most its throttled time (the clock stopped). The low end
  is 0 (the package wanted no more than the cap). Without a PL2 for a
  power-held period the loss is not estimated.

AMD packages usually show no constraint files and no thermal_throttle
counters: the factor is then skipped, saying the cap cannot be seen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hushmon.digest.factors.base import (
    AnalyzerSkip,
    Finding,
    Loss,
    SkipReason,
    longest_run,
    span_of,
    spans_text,
)
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import PER_NODE


def _tags(sensor: str) -> dict[str, str]:
    inner = sensor.partition("[")[2].rstrip("]")
    return dict(p.split("=", 1) for p in inner.split(",") if "=" in p)


def _inner(sensor: str) -> str:
    return sensor[sensor.index("[") :] if "[" in sensor else ""


def _matrices(job: JobData, prefix: str) -> list[np.ndarray]:
    return [m for m in (job.matrix(s) for s in job.base_sensors(prefix)) if m is not None]


def _nanmax(mats: list[np.ndarray]) -> np.ndarray | None:
    if not mats:
        return None
    stack = np.stack(mats)
    with np.errstate(all="ignore"):
        out = np.nanmax(np.where(np.isfinite(stack), stack, -np.inf), axis=0)
    return np.where(np.isfinite(out), out, np.nan)


@dataclass
class Held:
    """Per node (rows, as job.hosts) and period."""

    power: np.ndarray  # bool: a package within near_limit_pct of its enabled PL1
    thermal: np.ndarray  # bool: the package throttled (time or events)
    limit_w: np.ndarray  # the enabled PL1 of the most loaded package, NaN: none
    power_w: np.ndarray  # that package's power
    short_w: np.ndarray  # its PL2, NaN: none
    throttled_pct: np.ndarray | None  # the package's time throttled, %, NaN: not read
    limits_seen: bool  # some package had constraint files
    limits_enabled: bool  # ... and an enabled one
    thermal_seen: bool
    simulated: bool

    @property
    def any(self) -> np.ndarray:
        return np.asarray(self.power | self.thermal)


def held_periods(job: JobData, params: Mapping[str, Any]) -> Held:
    shape = (len(job.hosts), len(job.times_ns))
    power_held = np.zeros(shape, dtype=bool)
    limit_w = np.full(shape, np.nan)
    power_w = np.full(shape, np.nan)
    short_w = np.full(shape, np.nan)
    best_ratio = np.full(shape, -np.inf)
    limits_seen = limits_enabled = simulated = False
    near = 1.0 - params["near_limit_pct"] / 100.0
    for name in job.base_sensors("rapl.power_w"):
        tags = _tags(name)
        if not tags.get("domain", "").startswith("package"):
            continue
        inner = _inner(name)
        power = job.matrix(name)
        limit = job.matrix(f"rapl.long_term_limit_w{inner}")
        if power is None or limit is None:
            continue
        limits_seen = True
        simulated |= tags.get("backend") == "sim"
        enabled = job.matrix(f"rapl.limits_enabled{inner}")
        on = np.isfinite(limit) & (limit > 0)
        if enabled is not None:
            on &= np.nan_to_num(enabled) > 0
        limits_enabled |= bool(on.any())
        with np.errstate(all="ignore"):
            ratio = np.where(on & np.isfinite(power), power / limit, -np.inf)
        power_held |= ratio >= near
        better = ratio > best_ratio  # per node: the package nearest its cap
        best_ratio = np.where(better, ratio, best_ratio)
        limit_w = np.where(better, limit, limit_w)
        power_w = np.where(better, power, power_w)
        short = job.matrix(f"rapl.short_term_limit_w{inner}")
        short_w = np.where(better, short if short is not None else np.nan, short_w)
    pct_mats = [
        m
        for m in (job.matrix(s) for s in job.base_sensors("thermal.package_throttled_pct"))
        if m is not None
    ]
    event_mats = [
        m
        for m in (job.matrix(s) for s in job.base_sensors("thermal.package_throttles_per_s"))
        if m is not None
    ]
    throttled_pct = _nanmax(pct_mats)
    events = _nanmax(event_mats)
    thermal = np.zeros(shape, dtype=bool)
    if throttled_pct is not None:
        thermal |= np.nan_to_num(throttled_pct) >= params["throttled_pct"]
    if events is not None:
        # a kernel without the time counter: events alone mark the period
        no_time = ~np.isfinite(throttled_pct) if throttled_pct is not None else True
        thermal |= no_time & (np.nan_to_num(events) > 0)
    return Held(
        power_held,
        thermal,
        limit_w,
        power_w,
        short_w,
        throttled_pct,
        limits_seen,
        limits_enabled,
        bool(pct_mats or event_mats),
        simulated,
    )


def _pmu_clock(job: JobData) -> np.ndarray | None:
    """hosts x periods of cycles / ref_cycles (cpu=total): the clock over its nominal."""
    found: dict[str, np.ndarray] = {}
    for field in ("cycles_per_s", "ref_cycles_per_s"):
        for name in job.base_sensors(f"pmu.{field}"):
            if _tags(name).get("cpu") == "total":
                m = job.matrix(name)
                if m is not None:
                    found.setdefault(field, m)
    if len(found) < 2:
        return None
    with np.errstate(all="ignore"):
        ratio = found["cycles_per_s"] / found["ref_cycles_per_s"]
    ratio = np.where(np.isfinite(ratio) & (ratio > 0), ratio, np.nan)
    return ratio if np.isfinite(ratio).any() else None


def _measured_loss(held: np.ndarray, clock: np.ndarray) -> np.ndarray | None:
    """Per node-period the clock lost in held periods against the node's own
    unheld median (the job's where a node has none); None: nothing to compare."""
    free = ~held & np.isfinite(clock)
    if not free.any() or not (held & np.isfinite(clock)).any():
        return None
    job_free = float(np.median(clock[free]))
    loss = np.zeros(held.shape)
    for i in range(held.shape[0]):
        ref = float(np.median(clock[i][free[i]])) if free[i].any() else job_free
        with np.errstate(all="ignore"):
            row = np.clip(1.0 - clock[i] / ref, 0.0, 1.0)
        loss[i] = np.where(held[i] & np.isfinite(row), row, 0.0)
    return loss


class PowerCap:
    name = "power_cap"
    title = "CPU power cap or thermal throttling"
    # read by tag (zones, packages), so the runner's name check cannot see them
    requires: tuple[str, ...] = ()
    optional = (
        "rapl.power_w",
        "rapl.long_term_limit_w",
        "thermal.package_throttled_pct",
        "pmu.cycles_per_s",
    )
    # each node's package against its own limit, period by period
    resolution = PER_NODE

    def _held(self, job: JobData, params: Mapping[str, Any]) -> Held:
        held = held_periods(job, params)
        if not held.limits_seen and not held.thermal_seen:
            raise AnalyzerSkip(
                SkipReason.MISSING_SENSOR,
                "no RAPL power limits (powercap constraint files) and no thermal_throttle "
                "counters: a cap cannot be seen (AMD packages and VMs usually show neither)",
            )
        return held

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Share of the job's periods with some node held by a cap or heat."""
        held = self._held(job, params)
        return float(held.any.any(axis=0).mean()) if held.any.size else None

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        h = self._held(job, params)
        held: np.ndarray = h.any
        any_node = np.asarray(held.any(axis=0))
        share_any = float(any_node.mean()) if any_node.size else 0.0
        share_mean = float(held.mean()) if held.size else 0.0
        sim = " (SIMULATED RAPL)" if h.simulated else ""
        evidence: dict[str, Any] = {
            "limits": (
                "enabled"
                if h.limits_enabled
                else ("present, not enabled" if h.limits_seen else "not visible")
            ),
            "thermal_counters": "read" if h.thermal_seen else "not visible",
            "near_limit_pct": params["near_limit_pct"],
            "held_share_of_periods": round(share_any, 3),
            "held_share_of_node_periods": round(share_mean, 3),
            "power_held_share": round(float(h.power.any(axis=0).mean()), 3),
            "thermal_held_share": round(float(h.thermal.any(axis=0).mean()), 3),
        }
        if h.simulated:
            evidence["rapl"] = "simulated (the test bed's raplsim: power clipped, job not slowed)"
        # the limits of the held node-periods when there are some (nodes' limits differ)
        where = h.power if h.power.any() else np.ones(h.power.shape, dtype=bool)
        if np.isfinite(h.limit_w[where]).any():
            evidence["long_term_limit_w"] = round(float(np.nanmedian(h.limit_w[where])), 1)
            with np.errstate(all="ignore"):
                ratio = h.power_w / h.limit_w
            if np.isfinite(ratio).any():
                evidence["package_power_of_limit_max"] = round(float(np.nanmax(ratio)), 3)
                evidence["package_power_of_limit_median"] = round(float(np.nanmedian(ratio)), 3)
        if np.isfinite(h.short_w[where]).any():
            evidence["short_term_limit_w"] = round(float(np.nanmedian(h.short_w[where])), 1)
        if h.throttled_pct is not None and np.isfinite(h.throttled_pct).any():
            evidence["thermal_throttled_pct_max"] = round(float(np.nanmax(h.throttled_pct)), 1)
        # the cores' own throttling (read every 10 s by the agent): evidence, not a rule
        cores = _nanmax(_matrices(job, "thermal.core_throttled_pct_max"))
        if cores is not None and np.isfinite(cores).any():
            evidence["core_throttled_pct_max"] = round(float(np.nanmax(cores)), 1)
        if share_any < params["min_share"]:
            return [self._not_throttled(job, h, evidence, share_any, sim)]
        evidence["verdict"] = "throttled"
        evidence["held_nodes"] = ", ".join(
            n for n, on in zip(job.hosts, np.asarray(held.any(axis=1)).tolist(), strict=True) if on
        )
        if h.power.any():
            evidence["package_w_median_held"] = round(float(np.nanmedian(h.power_w[h.power])), 1)
        what = []
        if h.power.any():
            what.append(
                f"package power within {params['near_limit_pct']:g} % of its enabled "
                f"{evidence.get('long_term_limit_w', '?')} W limit (PL1) in "
                f"{evidence['power_held_share']:.0%} of the periods"
            )
        if h.thermal.any():
            what.append(
                f"the package thermally throttled in {evidence['thermal_held_share']:.0%} of "
                "the periods"
                + (
                    f" (up to {evidence['thermal_throttled_pct_max']:g} % of a period)"
                    if "thermal_throttled_pct_max" in evidence
                    else ""
                )
            )
        loss, loss_unknown = self._loss(job, h, evidence, params)
        hint = (
            f"{'A power cap' if h.power.any() else 'Heat'} held the CPUs back in "
            f"{share_any:.0%} of the job's periods on "
            f"{evidence['held_nodes']}: {'; '.join(what)}. "
            + (
                "The power cap lowers the clock to keep the package at its limit: ask the "
                "site whether the cap (RAPL PL1, a node or rack power budget) can be raised "
                "for this job, or run fewer busy cores per package"
                if h.power.any()
                else "The package reached its thermal limit: check the node's cooling"
            )
            + (
                f". {loss.words()}"
                if loss is not None
                else f". Cost not estimated: {loss_unknown}."
            )
        )
        run = longest_run(any_node)
        return [
            Finding(
                self.name,
                "CPU held back by a power cap or heat" + sim,
                "high" if share_any >= params["share_high"] else "medium",
                evidence,
                hint,
                span_of(job, run),
                loss=loss,
                loss_unknown=loss_unknown,
            )
        ]

    def _not_throttled(
        self, job: JobData, h: Held, evidence: dict[str, Any], share_any: float, sim: str
    ) -> Finding:
        evidence["verdict"] = "not throttled"
        headroom = evidence.get("package_power_of_limit_max")
        said = (
            f"the package drew at most {headroom:.0%} of its enabled "
            f"{evidence['long_term_limit_w']:g} W limit"
            if headroom is not None and h.limits_enabled
            else (
                "the package limits are not enabled"
                if h.limits_seen
                else "no package limit is visible (AMD, or no powercap constraints)"
            )
        )
        thermal = (
            "no thermal throttling time"
            if h.thermal_seen and not h.thermal.any()
            else (
                "thermal counters not visible" if not h.thermal_seen else "rare thermal throttling"
            )
        )
        return Finding(
            self.name,
            "CPU power cap: not throttled" + sim,
            "info",
            evidence,
            f"No power cap held the job back: {said}; {thermal} ({share_any:.0%} of the "
            "periods held, under the threshold).",
            loss=Loss(
                0.0,
                0.0,
                f"{share_any:.0%} of the periods had a node at its cap or throttled",
                [],
            ),
        )

    def _loss(
        self, job: JobData, h: Held, evidence: dict[str, Any], params: Mapping[str, Any]
    ) -> tuple[Loss | None, str]:
        held: np.ndarray = h.any
        clock = _pmu_clock(job)
        measured = _measured_loss(held, clock) if clock is not None else None
        spans = spans_text(job, np.asarray(held.any(axis=0)))
        if measured is not None and clock is not None:
            held_clock = float(np.nanmedian(clock[held])) if np.isfinite(clock[held]).any() else 0
            free_clock = float(np.nanmedian(clock[~held]))
            evidence["clock_ratio_held"] = round(held_clock, 3)
            evidence["clock_ratio_unheld"] = round(free_clock, 3)
            low = float(measured.mean())
            high = float(measured.max(axis=0).mean())
            return Loss(
                low,
                high,
                f"the clock (PMU cycles / ref-cycles) ran at {held_clock:.2f} of nominal in the "
                f"held periods ({spans}) against {free_clock:.2f} in the others; the lost clock "
                "over the run, the mean over nodes (low) and the most held node's (high)",
                [
                    "the work in the held periods would run at the unheld clock (compute-bound; "
                    "memory-bound work gains less from a higher clock)",
                    "the nodes were held at different times (low end) or the job went at the "
                    "most held node's pace (high end)",
                ],
            ), ""
        bound = np.zeros(held.shape)
        if h.power.any():
            with np.errstate(all="ignore"):
                clock_bound = 1.0 - np.cbrt(h.limit_w / h.short_w)
            clock_bound = np.where(np.isfinite(clock_bound), np.clip(clock_bound, 0, 1), np.nan)
            if not np.isfinite(clock_bound[h.power]).all():
                return None, (
                    "the clock was not measured (no PMU cycles and ref-cycles) and a held "
                    "package has no short-term limit (PL2) to bound what it would have drawn"
                )
            bound = np.where(h.power, clock_bound, 0.0)
            evidence["clock_loss_bound_at_cap"] = round(float(np.nanmax(bound)), 3)
        if h.thermal.any():
            pct = (
                np.nan_to_num(h.throttled_pct) / 100
                if h.throttled_pct is not None
                else np.zeros(held.shape)
            )
            if not (pct[h.thermal] > 0).all():
                return None, (
                    "the clock was not measured and the kernel gives throttle events without "
                    "their time (no package_throttle_total_time_ms)"
                )
            bound = np.maximum(bound, np.where(h.thermal, pct, 0.0))
        high = float(bound.max(axis=0).mean())
        parts, assumptions = [], []
        if h.power.any():
            parts.append(
                f"at the cap the clock at most {evidence['clock_loss_bound_at_cap']:.0%} below "
                "what the package's short-term limit (PL2) would allow"
            )
            assumptions += [
                "without the cap the package would have drawn no more than its short-term "
                "limit (PL2), and no more than the cap at the low end",
                "the clock follows the cube root of the package's power (dynamic power ~ f V^2, "
                "V ~ f)",
            ]
        if h.thermal.any():
            parts.append("throttled for heat, at most the time spent throttled")
            assumptions.append(
                "the clock stops at worst while throttled, and not at all at the low end"
            )
        assumptions.append(
            "the work is compute-bound and the job goes at the most held node's pace"
        )
        return Loss(
            0.0,
            high,
            "no clock measured (no PMU cycles and ref-cycles): bounds over the held periods "
            f"({spans}): " + "; ".join(parts),
            assumptions,
        ), ""


FACTOR = PowerCap()
