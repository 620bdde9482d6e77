"""Disk and swap use slowing computation (seed 001, Figs. 8-11).

The seed's Linpack that overflows memory: swap activity through the whole
run, and performance tied to it (low FLOPS while swapping, high only in the
few periods without disk exchange). Per period we take the across-node
average of swap pages in+out and of the work rate, split the periods into
swapping / not swapping, and report the time share and the work lost. Disk
traffic with the CPUs waiting on I/O and no swapping is reported too.

Where there is no swap device (``mem.swap_total_bytes`` = 0, as on many
clusters and on this project's test bed) nothing can be swapped: a job whose
data outgrows a node's memory either is killed (OOM kills, counted by the
node's cgroup) or, when that data is a file, loses its page cache and
streams through the disk. With node-scoped agents and a memory limit on the
node (its cgroup) that second case is what the factor looks for instead of
swapping: the node's memory at its limit, mostly page cache, while the disk
is busy, and what the CPUs did meanwhile. Disks, swap counters, major faults
and I/O wait are host-wide on such nodes (``scope=host``); the evidence says
so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import (
    AnalyzerSkip,
    Finding,
    Loss,
    SkipReason,
    longest_run,
    mb,
    span_of,
    spans_text,
)
from hushmon.digest.factors.work import job_cpu_sensors, per_period_mean, work_matrix
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import ACROSS_NODES


class DiskSwap:
    name = "disk_swap"
    title = "Disk and swap use slowing computation"
    requires = ("swap.pages_per_s", "cpu.user_pct")
    optional = ("pmu.flops_per_s", "disk.bytes_per_s", "disk.max_busy_pct", "cpu.iowait_pct")
    # what it needs (digest/resolution.py): shares of time swapping, disk busy: averages over nodes
    resolution = ACROSS_NODES

    def _swapping(self, job: JobData, params: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        swap = job.stats["swap.pages_per_s"].avg
        return swap, np.nan_to_num(swap) > params["swap_active_pages_per_s"]

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Share of the job's periods spent swapping, or with the node's memory at its
        limit while the disk is busy (no swap device), whichever is larger."""
        _, swapping = self._swapping(job, params)
        at_limit = self._at_limit(job, params)
        busy = self._disk_active(job, params)
        pressed = 0.0 if at_limit is None or busy is None else float((at_limit & busy).mean())
        return max(float(swapping.mean()), pressed)

    @staticmethod
    def _swap_total(job: JobData) -> float | None:
        for name in ("mem.swap_total_bytes", "mem.swap_total_bytes[scope=host]"):
            m = job.matrix(name)
            if m is not None and np.isfinite(m).any():
                return float(np.nanmax(m))
        return None

    @staticmethod
    def _limit(job: JobData) -> float | None:
        """The node's memory limit (node scope, below the machine's RAM), bytes."""
        node = job.matrix("mem.total_bytes")
        host = job.matrix("mem.total_bytes[scope=host]")
        if node is None or host is None or not np.isfinite(node).any():
            return None
        limit, ram = float(np.nanmedian(node)), float(np.nanmedian(host))
        return limit if limit < 0.95 * ram else None

    def _at_limit(self, job: JobData, params: Mapping[str, Any]) -> np.ndarray | None:
        if self._limit(job) is None or not job.has("mem.usage_pct"):
            return None
        return np.nan_to_num(job.stats["mem.usage_pct"].avg) >= params["memory_limit_pct"]

    def _disk_active(self, job: JobData, params: Mapping[str, Any]) -> np.ndarray | None:
        if job.has("disk.max_busy_pct"):
            return np.nan_to_num(job.stats["disk.max_busy_pct"].avg) > params["disk_busy_pct"]
        if job.has("disk.bytes_per_s"):
            return (
                np.nan_to_num(job.stats["disk.bytes_per_s"].avg) > params["disk_active_bytes_per_s"]
            )
        return None

    def _memory_finding(
        self,
        job: JobData,
        params: Mapping[str, Any],
        work_name: str,
        work_avg: np.ndarray,
    ) -> Finding | None:
        """No swapping possible or none seen: the node's memory at its limit while the
        disk is busy - file data that no longer fits in the page cache."""
        at_limit = self._at_limit(job, params)
        busy = self._disk_active(job, params)
        limit = self._limit(job)
        if at_limit is None or busy is None or limit is None:
            return None
        pressed = at_limit & busy
        share = float(pressed.mean())
        if share < params["min_disk_share"]:
            return None
        avg = lambda name: float(np.nanmean(job.stats[name].avg[pressed]))  # noqa: E731
        evidence: dict[str, Any] = {
            "node_memory_limit_MiB": round(limit / 2**20),
            "share_of_time_at_limit_with_disk_busy": round(share, 3),
            "periods": spans_text(job, pressed),
            "memory_charged_pct_of_limit": round(avg("mem.usage_pct"), 1),
        }
        if job.has("mem.page_cache_bytes"):
            evidence["page_cache_MiB"] = round(avg("mem.page_cache_bytes") / 2**20)
        if job.has("mem.used_bytes"):
            evidence["used_without_cache_MiB"] = round(avg("mem.used_bytes") / 2**20)
        disk_mb = mb(avg("disk.bytes_per_s")) if job.has("disk.bytes_per_s") else float("nan")
        evidence["disk_MB_per_s"] = disk_mb
        if job.has("disk.max_busy_pct"):
            evidence["disk_busy_pct"] = round(avg("disk.max_busy_pct"), 1)
        host_iowait = job.matrix("cpu.iowait_pct[cpu=total,scope=host]")
        iowait = (
            float(np.nanmean(np.nanmean(host_iowait, axis=0)[pressed]))
            if host_iowait is not None
            else float("nan")
        )
        if np.isfinite(iowait):
            evidence["iowait_pct_host_wide"] = round(iowait, 1)
        if job.has("vm.major_faults_per_s"):
            evidence["major_faults_per_s"] = round(avg("vm.major_faults_per_s"), 1)
        oom = job.matrix("node_cgroup.oom_kill_per_s")
        kills = round(float(np.nansum(oom)) * job.period_s) if oom is not None else None
        if kills is not None:
            evidence["oom_kills"] = kills
        swap_total = self._swap_total(job)
        evidence["swap"] = (
            "no swap device (mem.swap_total_bytes = 0): nothing could be swapped"
            if swap_total == 0
            else "swap device present, no swapping seen"
        )
        evidence["work_sensor"] = work_name
        evidence["work_while_at_limit"] = round(float(np.nanmean(work_avg[pressed])), 2)
        if (~pressed).sum() >= 2:
            evidence["work_otherwise"] = round(float(np.nanmean(work_avg[~pressed])), 2)
        evidence["scopes"] = (
            "memory: the node's cgroup; disk, I/O wait, major faults, swap: host-wide "
            "(scope=host, every node on the machine)"
        )
        severity = (
            "high"
            if (np.isfinite(iowait) and iowait >= params["iowait_pct"] * 3)
            or share >= params["memory_share_high"]
            else "medium"
        )
        cache = (
            f", {evidence['page_cache_MiB']} MiB of it page cache"
            if "page_cache_MiB" in evidence
            else ""
        )
        wait = (
            f", and the machine's CPUs wait for I/O {iowait:.0f}% of the time (host-wide)"
            if np.isfinite(iowait)
            else ""
        )
        no_swap = (
            " There is no swap device, so swapping cannot be what slows it; a job whose own "
            f"memory (not cache) outgrew the limit would be killed instead ({kills} OOM "
            "kills here)."
            if swap_total == 0
            else ""
        )
        hint = (
            f"The nodes' memory is at its {evidence['node_memory_limit_MiB']} MiB limit "
            f"({evidence['memory_charged_pct_of_limit']:.0f}% charged{cache}) while the disk "
            f"moves {disk_mb:g} MB/s, in {share:.0%} of the job's time "
            f"({evidence['periods']}){wait}; meanwhile the nodes' {work_name} is only "
            f"{evidence['work_while_at_limit']:.3g}. The job's data does not fit in "
            f"the node's memory, so it streams through the disk.{no_swap} Give each node's "
            "ranks more memory (more nodes, fewer ranks per node, a higher limit) so the data "
            "stays in the page cache, or read and write it in larger sequential blocks."
        )
        finding = Finding(
            self.name,
            "Memory at its limit: data streams through the disk",
            severity,
            evidence,
            hint,
            span_of(job, longest_run(pressed)),
        )
        own_wait = _tasks_blkio_share(job, pressed)
        if own_wait is not None:
            evidence["tasks_blkio_wait_pct_at_limit"] = round(100 * own_wait, 1)
        finding.loss = _io_loss(
            share,
            iowait,
            evidence.get("work_while_at_limit"),
            evidence.get("work_otherwise"),
            "at the memory limit with the disk busy",
            "the job's data stays in the page cache once each node has the memory it needs "
            "(a higher limit, fewer ranks per node)",
            own_wait,
        )
        if finding.loss is None:
            finding.loss_unknown = (
                "neither the CPUs' I/O wait nor periods off the limit to compare with"
            )
        return finding

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        if len(job.times_ns) < 5:
            raise AnalyzerSkip(SkipReason.NOT_ENOUGH_DATA, "fewer than 5 periods")
        findings: list[Finding] = []
        swap, swapping = self._swapping(job, params)
        share = float(swapping.mean())
        work = work_matrix(job)
        assert work is not None  # cpu.user_pct is required
        work_name, wm = work
        work_avg = per_period_mean(wm)
        if share >= params["min_swap_share"]:
            evidence: dict[str, Any] = {
                "share_of_time_swapping": round(share, 3),
                "swap_pages_per_s_while_swapping": round(float(np.nanmean(swap[swapping])), 1),
                "work_sensor": work_name,
            }
            slowdown = float("nan")
            if (~swapping).any():
                w_on = float(np.nanmean(work_avg[swapping]))
                w_off = float(np.nanmean(work_avg[~swapping]))
                slowdown = 1 - w_on / w_off if w_off > 0 else float("nan")
                evidence.update(
                    work_while_swapping=round(w_on, 3),
                    work_otherwise=round(w_off, 3),
                    work_lost_while_swapping=round(slowdown, 3),
                )
            ok = np.isfinite(swap) & np.isfinite(work_avg)
            if ok.sum() > 2 and np.std(swap[ok]) > 0 and np.std(work_avg[ok]) > 0:
                evidence["corr_swap_vs_work"] = round(
                    float(np.corrcoef(swap[ok], work_avg[ok])[0, 1]), 3
                )
            if job.has("disk.bytes_per_s"):
                disk = job.stats["disk.bytes_per_s"].avg
                evidence["disk_MB_per_s_while_swapping"] = mb(float(np.nanmean(disk[swapping])))
            if np.isnan(slowdown):
                severity = "high" if share > 0.5 else "medium"
                lost = "the job swapped the whole time, so there is no swap-free baseline"
            else:
                severity = (
                    "high"
                    if slowdown >= params["slowdown_high"]
                    else "medium"
                    if slowdown >= params["slowdown_medium"]
                    else "low"
                )
                lost = f"{work_name} averages {slowdown:.0%} lower while swapping"
            hint = (
                f"The nodes swap in {share:.0%} of the job's time "
                f"({evidence['swap_pages_per_s_while_swapping']:.0f} pages/s); {lost}. "
                "The job's memory does not fit: use more nodes (less data per node), fewer "
                "processes per node, or a smaller problem; check for memory leaks."
            )
            run = longest_run(swapping)
            finding = Finding(
                self.name,
                "Swapping slows computation",
                severity,
                evidence,
                hint,
                span_of(job, run),
            )
            if np.isnan(slowdown):
                finding.loss_unknown = (
                    "the job swapped the whole time: no swap-free periods give the rate it "
                    "would work at"
                )
            else:
                best = float(np.nanquantile(work_avg[~swapping], 0.9))
                w_on = float(evidence["work_while_swapping"])
                high = 1 - w_on / best if best > 0 else slowdown
                finding.loss = Loss(
                    share * max(0.0, slowdown),
                    share * max(0.0, slowdown, high),
                    f"the {share:.0%} of the run spent swapping works {slowdown:.0%} slower "
                    f"than the average other period ({high:.0%} slower than the best ones)",
                    [
                        "the job's memory fits once the limit is removed (more nodes, fewer "
                        "ranks per node, more memory)",
                        f"the swapping periods then work at the rate of the others ({work_name})",
                    ],
                )
            findings.append(finding)
        memory = self._memory_finding(job, params, work_name, work_avg)
        if memory is not None:
            findings.append(memory)  # it carries the disk's figures
            return findings
        disk_finding = self._disk_finding(job, params, swapping, work_name, work_avg)
        if disk_finding is not None:
            findings.append(disk_finding)
        return findings

    def _disk_finding(
        self,
        job: JobData,
        params: Mapping[str, Any],
        swapping: np.ndarray,
        work_name: str,
        work_avg: np.ndarray,
    ) -> Finding | None:
        """Periods of heavy disk traffic without swapping (file I/O) and what they cost."""
        if job.has("disk.max_busy_pct"):
            busy = job.stats["disk.max_busy_pct"].avg
            active = np.nan_to_num(busy) > params["disk_busy_pct"]
        elif job.has("disk.bytes_per_s"):
            busy = None
            active = (
                np.nan_to_num(job.stats["disk.bytes_per_s"].avg) > params["disk_active_bytes_per_s"]
            )
        else:
            return None
        active &= ~swapping
        share = float(active.mean())
        if share < params["min_disk_share"]:
            return None
        evidence: dict[str, Any] = {"share_of_time_disk_busy": round(share, 3)}
        if busy is not None:
            evidence["disk_busy_pct"] = round(float(np.nanmean(busy[active])), 1)
        if job.has("disk.bytes_per_s"):
            evidence["disk_MB_per_s"] = mb(
                float(np.nanmean(job.stats["disk.bytes_per_s"].avg[active]))
            )
        iowait = job.stats["cpu.iowait_pct"].avg if job.has("cpu.iowait_pct") else None
        if iowait is None and job.has("cpu.iowait_pct[cpu=total,scope=host]"):
            iowait = job.stats["cpu.iowait_pct[cpu=total,scope=host]"].avg  # node scope
            evidence["iowait_scope"] = "host-wide (the node's cgroup has no I/O wait)"
        if iowait is not None:
            evidence["iowait_pct"] = round(float(np.nanmean(iowait[active])), 1)
        quiet = ~active & ~swapping
        slowdown = float("nan")
        if quiet.sum() >= 2:
            w_on = float(np.nanmean(work_avg[active]))
            w_off = float(np.nanmean(work_avg[quiet]))
            if w_off > 0:
                slowdown = 1 - w_on / w_off
                evidence.update(
                    work_sensor=work_name,
                    work_while_disk_busy=round(w_on, 3),
                    work_otherwise=round(w_off, 3),
                    work_lost_while_disk_busy=round(slowdown, 3),
                )
        waiting = iowait is not None and evidence["iowait_pct"] > params["iowait_pct"]
        if not waiting and not (slowdown >= params["slowdown_medium"]):
            return None  # the disk is busy but the computation does not suffer
        severity = "high" if slowdown >= params["slowdown_high"] else "medium"
        cost = (
            f"{work_name} is {slowdown:.0%} lower then than in the other periods"
            if np.isfinite(slowdown)
            else "there are no quiet periods to compare with"
        )
        wait = f", CPUs wait for I/O {evidence['iowait_pct']:.0f}% of the time" if waiting else ""
        hint = (
            f"In {share:.0%} of the time the disks are busy without swapping "
            f"({evidence.get('disk_MB_per_s', '?')} MB/s{wait}); {cost}. File I/O limits the "
            "job: write less often or in larger blocks, overlap I/O with computation, use "
            "node-local scratch or a parallel file system."
        )
        finding = Finding(
            self.name,
            "Disk I/O slows computation",
            severity,
            evidence,
            hint,
            span_of(job, longest_run(active)),
        )
        finding.loss = _io_loss(
            share,
            float(evidence["iowait_pct"]) if "iowait_pct" in evidence else float("nan"),
            evidence.get("work_while_disk_busy"),
            evidence.get("work_otherwise"),
            "with the disk busy",
            "the I/O overlaps computation or goes to a faster device",
        )
        if finding.loss is None:
            finding.loss_unknown = "neither the CPUs' I/O wait nor quiet periods to compare with"
        return finding


def _tasks_blkio_share(job: JobData, mask: np.ndarray) -> float | None:
    """The job's own tasks' block I/O wait (procio, delay accounting) as a share of
    each task's time, on the most-waiting node, averaged over the periods of ``mask``
    (None: not measured, or read from summaries)."""
    waits = [job.matrix(s) for s in job_cpu_sensors(job, "procio.blkio_wait_pct")]
    tasks = [job.matrix(s) for s in job_cpu_sensors(job, "procio.tasks")]
    waits_m = [m for m in waits if m is not None]
    tasks_m = [m for m in tasks if m is not None]
    if not waits_m or not tasks_m or not mask.any():
        return None
    with np.errstate(all="ignore"):
        wait = np.nansum(np.stack(waits_m), axis=0)
        n = np.nansum(np.stack(tasks_m), axis=0)
        per_task = np.where(n > 0, wait / n / 100.0, np.nan)
    worst = per_task[:, mask]
    if not np.isfinite(worst).any():
        return None
    with np.errstate(all="ignore"):
        per_period = np.nanmax(worst, axis=0)
    return float(np.clip(np.nanmean(per_period), 0.0, 1.0))


def _io_loss(
    share: float,
    iowait_pct: float,
    work_on: float | None,
    work_off: float | None,
    where: str,
    removed: str,
    own_wait: float | None = None,
) -> Loss | None:
    """The run time a disk-bound stretch costs: at least the CPUs' time waiting for
    I/O in it, at most its whole time when no other periods show what the job would
    do (else the work rate lost against them). Where the job's own tasks' block I/O
    wait is measured (``own_wait``, a share of their time), that bounds the high end
    instead of the whole time: with the data in the page cache the tasks stop waiting
    for the disk, and no more (measured on the bed: outofcore 1 GiB under a 512 MiB
    limit, the tasks waiting 20-35 % of the time at the limit, gained -5 to +10 % when
    the limit was raised; the whole at-limit time was 67 %)."""
    waited = iowait_pct / 100 if np.isfinite(iowait_pct) else None
    lost = (
        1 - work_on / work_off
        if work_on is not None and work_off is not None and work_off > 0
        else None
    )
    # a work rate no lower than in the other periods says the others are no baseline
    # (start-up, the same I/O): then only the I/O wait is evidence
    compared = lost is not None and lost > 0
    if waited is None and not compared and own_wait is None:
        return None
    parts = []
    if waited is not None:
        parts.append(f"the CPUs wait for I/O {waited:.0%} of that time")
    if compared and lost is not None:
        parts.append(f"the work rate is {lost:.0%} lower than in the other periods")
    if own_wait is not None:
        parts.append(f"the job's tasks wait for block I/O {own_wait:.0%} of their time")
    found = [v for v in (waited, lost if compared else None) if v is not None]
    low = min(found) if found else 0.0
    if compared:
        high = max(found + ([own_wait] if own_wait is not None else []))
    else:
        high = own_wait if own_wait is not None else 1.0
    if own_wait is not None:
        # a host-wide wait above the tasks' own is other work's, not this job's
        low = min(low, own_wait)
    return Loss(
        share * low,
        share * high,
        f"{share:.0%} of the run {where}: " + ", ".join(parts),
        [
            removed,
            "the waiting is the job's own (the I/O wait is host-wide: other work on the "
            "machine counts too)"
            if waited is not None
            else "the work rate measures the job's progress",
        ]
        + (
            [
                "with no other periods that show the job's rate without the disk, all of "
                "that time may be lost (high end)"
            ]
            if not compared and own_wait is None
            else []
        )
        + (
            [
                "the tasks' own block I/O wait is the most the page cache can save (high "
                "end); on a machine whose CPUs are busy the wait partly overlaps time the "
                "tasks would wait for a CPU (low end: the CPUs' I/O wait)"
            ]
            if own_wait is not None
            else []
        ),
    )


FACTOR = DiskSwap()
