"""Jobs for bench_transport_load.py: a schedule of jobs of different sizes
that start and end during the run (hushmon-loadgen --job), and their
digests built while the collectors go on writing the store.

A job's digest starts once its last period is in the store (every host's
``job`` line of that period in ``job_activity``, read from the lake as any
reader would), then ``hushmon digest JOB`` runs on the lake in a process of
its own: its wall time, CPU and peak resident size are kept, and its
digest.json is checked (the job's node count and periods).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HUSHMON = REPO / ".venv/bin/hushmon"
# (first host, hosts, start period, end period) as shares of the agents and
# of the run: sizes from 40 % to 1 % of the cluster, each starting and ending
# at another minute, none sharing a host with another at the same time (so
# every host is in exactly one job summary per period: its job's or '-').
PLAN_SHARES = (
    (0.00, 0.40, 0.05, 0.45),
    (0.40, 0.20, 0.10, 0.60),
    (0.60, 0.10, 0.20, 0.50),
    (0.70, 0.05, 0.30, 0.80),
    (0.75, 0.01, 0.40, 0.70),
    (0.00, 0.30, 0.55, 0.90),
)
DATA_WAIT_S = 180.0  # longest wait for a job's last period to be stored
POLL_S = 2.0


@dataclass(frozen=True)
class JobPlan:
    job: str
    first: int  # host number of its first node (n%05d)
    hosts: int
    start: int  # first period (0 = the run's first)
    end: int  # first period after it

    def loadgen_arg(self) -> str:
        return f"{self.job}:{self.first}:{self.hosts}:{self.start}:{self.end}"


def plan_jobs(agents: int, periods: int, count: int) -> list[JobPlan]:
    """The first `count` jobs of PLAN_SHARES for this many agents and periods."""
    jobs = []
    for k, (first, hosts, start, end) in enumerate(PLAN_SHARES[:count]):
        p0, p1 = int(start * periods), max(int(start * periods) + 1, int(end * periods))
        jobs.append(
            JobPlan(f"{1001 + k}", int(first * agents), max(1, int(hosts * agents)), p0, p1)
        )
    return jobs


@dataclass
class DigestRun:
    job: JobPlan
    ended_at_s: float = 0.0  # monotonic, bench clock: the job's last period ended
    data_wait_s: float = -1.0  # from the job's end until its last period was stored
    wall_s: float = -1.0
    cpu_s: float = -1.0
    peak_rss_mib: float = -1.0
    rc: int = -1
    nodes: int = -1  # digest.json's node count
    periods: int = -1
    error: str = ""
    acked_before: int = -1  # the raw consumer's ack floor when the digest started
    acked_after: int = -1  # ... and when it ended: collection went on meanwhile

    def to_json(self) -> dict[str, object]:
        return {
            "job": self.job.job,
            "nodes": self.job.hosts,
            "periods": self.job.end - self.job.start,
            "ok": self.ok,
            "data_wait_s": self.data_wait_s,
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "peak_rss_mib": self.peak_rss_mib,
            "acked_meanwhile": self.acked_after - self.acked_before,
            "error": self.error,
        }

    @property
    def ok(self) -> bool:
        return (
            self.rc == 0
            and self.nodes == self.job.hosts
            and self.periods == self.job.end - self.job.start
        )


@dataclass
class DigestRunner:
    """One thread: each job's digest after the job ends, in the order they end."""

    jobs: list[JobPlan]
    store: Path
    out: Path
    t0_wall_ns: int  # start of period 0 on the real-time clock
    ack_floor: Callable[[], int]  # the raw consumer's ack floor now (-1 unknown)
    # nice(1) increment of each digest: a site runs digests on another
    # machine than its collectors; on one box this stands in for that
    nice: int = 0
    runs: list[DigestRun] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _proc: subprocess.Popen[bytes] | None = None  # the digest running now

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def stop(self) -> None:
        """No further digest; one still running is ended (and counted failed)."""
        self._stop.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
        self.join(DATA_WAIT_S)

    def _run(self) -> None:
        for job in sorted(self.jobs, key=lambda j: j.end):
            run = DigestRun(job)
            self.runs.append(run)
            end_wall_s = (self.t0_wall_ns + job.end * 1_000_000_000) / 1e9
            if self._stop.wait(max(0.0, end_wall_s - time.time())):
                run.error = "stopped before the job ended"
                return
            run.ended_at_s = time.monotonic()
            if not self._wait_for_data(run):
                continue
            self._digest(run)

    def _stored_hosts(self, job: JobPlan) -> int:
        """Hosts whose job line of the job's last period is in the store."""
        from hushmon.store.schema import open_store_readonly

        last_ns = self.t0_wall_ns + (job.end - 1) * 1_000_000_000
        con = open_store_readonly(self.store)
        try:
            row = con.execute(
                "SELECT count(DISTINCT host) FROM job_activity WHERE job = ? AND time_ns = ?",
                [job.job, last_ns],
            ).fetchone()
        finally:
            con.close()
        return int(row[0]) if row else 0

    def _wait_for_data(self, run: DigestRun) -> bool:
        while time.monotonic() - run.ended_at_s < DATA_WAIT_S:
            try:
                if self._stored_hosts(run.job) >= run.job.hosts:
                    run.data_wait_s = time.monotonic() - run.ended_at_s
                    return True
            except Exception as exc:  # noqa: BLE001 - a reader's failure is a finding, kept
                run.error = f"reading the store: {str(exc).splitlines()[0]}"
            if self._stop.wait(POLL_S):
                break
        run.error = run.error or f"its last period was not stored within {DATA_WAIT_S:.0f} s"
        return False

    def _digest(self, run: DigestRun) -> None:
        out = self.out / run.job.job
        js = self.out / f"{run.job.job}.json"
        argv = ["nice", "-n", str(self.nice)] if self.nice else []
        argv += [str(HUSHMON), "digest", run.job.job, "--db", str(self.store)]
        argv += ["--out", str(out), "--json", str(js)]
        run.acked_before = self.ack_floor()
        t = time.monotonic()
        proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
        )
        self._proc = proc
        assert proc.stderr is not None
        err = proc.stderr.read()  # until it exits; the pipe never fills
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        run.wall_s = time.monotonic() - t
        run.acked_after = self.ack_floor()
        run.cpu_s = usage.ru_utime + usage.ru_stime
        run.peak_rss_mib = usage.ru_maxrss / 1024
        run.rc = proc.returncode
        self._proc = None
        if run.rc != 0:
            lines = err.decode(errors="replace").strip().splitlines()
            run.error = lines[-1] if lines else f"exit {run.rc}"
            return
        try:
            doc = json.loads(js.read_text())
            run.nodes = len(doc.get("nodes", []))
            run.periods = int(doc.get("periods", -1))
        except (OSError, ValueError) as exc:
            run.error = f"digest.json unreadable: {exc}"


def digest_lines(runs: list[DigestRun]) -> list[str]:
    """One line per job: its size and times, the digest's wait, time, memory, checks."""
    out = []
    for r in runs:
        j = r.job
        head = (
            f"   job {j.job}: {j.hosts} nodes, periods {j.start}-{j.end - 1} "
            f"({j.end - j.start} s): "
        )
        if r.rc != 0 or r.error:
            out.append(head + f"FAILED ({r.error or f'exit {r.rc}'})")
            continue
        grew = r.acked_after - r.acked_before if r.acked_before >= 0 else -1
        out.append(
            head + f"stored {r.data_wait_s:.1f} s after its end; digest {r.wall_s:.1f} s wall, "
            f"{r.cpu_s:.1f} CPU-s, peak {r.peak_rss_mib:.0f} MiB; digest.json {r.nodes} nodes, "
            f"{r.periods} periods ({'as scheduled' if r.ok else 'NOT as scheduled'}); "
            f"the collectors acked {grew:,} raw messages meanwhile"
        )
    return out
