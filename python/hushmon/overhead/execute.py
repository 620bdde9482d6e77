"""Running the plan: agents started and stopped around their runs, each
kernel launched with mpirun and timed by its own report.

The time of a run is the kernel's ``time_s`` (the slowest rank between two
barriers, docs/apps.md): MPI start-up and the agent's start are outside it.
An agent is started when the plan moves to its mode and left running over
consecutive runs of the same mode; after each start the study waits
``settle_s`` so the agent's start-up work is not counted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.overhead.modes import get
from hushmon.overhead.modes.base import Running
from hushmon.overhead.plan import PlannedRun
from hushmon.paths import program
from hushmon.runner import mpirun_command

RUN_TIMEOUT_S = 600.0


@dataclass
class RunResult:
    index: int
    round: int
    kernel: str
    config: str
    mode: str
    time_s: float | None  # None: the run failed
    wall_s: float
    load1: float  # the load average when the run started
    error: str | None = None


def run_kernel(run: PlannedRun, work: Path) -> tuple[float | None, str | None]:
    """Launches one kernel; returns (time_s, None) or (None, why it failed)."""
    out = work / f"run-{run.index:05d}.json"
    argv = mpirun_command(
        run.config.ranks,
        [program(run.kernel), "--class", run.config.cls, "--json", str(out)],
    )
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return None, f"no result after {RUN_TIMEOUT_S:.0f} s"
    except OSError as exc:
        raise HushmonError(f"cannot start {argv[0]}: {exc}", exit_code=1) from exc
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(f"{run.kernel}:")]
        return None, (lines[0] if lines else f"exit code {proc.returncode}")
    try:
        summary = json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        return None, f"unreadable summary {out}: {exc}"
    if summary.get("verified") is not True:
        return None, "result not verified"
    if summary.get("ranks") != run.config.ranks:
        return None, f"ran on {summary.get('ranks')} ranks, not {run.config.ranks}"
    return float(summary["time_s"]), None


Progress = Callable[[int, RunResult], None]


@dataclass
class AgentUsage:
    """What a mode's agent used in its steady state (from the end of the
    settle time after its start to its stop, so start-up work is left out):
    its CPU seconds over those wall seconds, summed over its starts."""

    mode: str
    starts: int = 0
    up_s: float = 0.0
    cpu_s: float = 0.0

    @property
    def cpu_pct(self) -> float:
        """Percent of one CPU."""
        return 100.0 * self.cpu_s / self.up_s if self.up_s > 0 else float("nan")

    def too_short_note(self, period_s: float) -> str | None:
        """Says so when the agent was up for under 5 sampling periods: a
        daemon that sleeps between samples may not run at all in a window
        shorter than its period, and its CPU then reads 0 and means nothing."""
        if self.up_s >= 5 * period_s:
            return None
        return (
            f"{self.mode}: its CPU use was measured over {self.up_s:.1f} s, under 5 sampling "
            f"periods of {period_s:g} s: too short to mean much (more --runs, or a shorter "
            "--period-s)."
        )


def execute(
    schedule: list[PlannedRun], work: Path, period_s: float, settle_s: float, tick: Progress
) -> tuple[list[RunResult], dict[str, AgentUsage]]:
    results: list[RunResult] = []
    usage: dict[str, AgentUsage] = {}
    current: tuple[str, Running, float, float] | None = None

    def stop_current() -> None:
        assert current is not None
        mode, agent, since, cpu_at_since = current
        u = usage.setdefault(mode, AgentUsage(mode))
        u.cpu_s += agent.cpu_s() - cpu_at_since  # read while it still runs
        u.up_s += time.monotonic() - since
        u.starts += 1
        agent.stop()

    try:
        for run in schedule:
            if current is None or current[0] != run.mode:
                if current is not None:
                    stop_current()
                    current = None
                agent_dir = work / f"agent-{run.index:05d}-{run.mode}"
                shutil.rmtree(agent_dir, ignore_errors=True)  # a study again into --out
                agent = get(run.mode).start(agent_dir, period_s)
                current = (run.mode, agent, time.monotonic(), 0.0)
                time.sleep(settle_s)
                current = (run.mode, agent, time.monotonic(), agent.cpu_s())
            load1 = os.getloadavg()[0]
            t0 = time.monotonic()
            time_s, error = run_kernel(run, work)
            result = RunResult(
                run.index, run.round, run.kernel, str(run.config), run.mode,
                time_s, time.monotonic() - t0, load1, error,
            )  # fmt: skip
            results.append(result)
            tick(len(results), result)
            # A daemon that died would make every later run of its mode a
            # run without monitoring: stop the study instead.
            why = current[1].dead()
            if why:
                raise HushmonError(
                    f"mode {run.mode}: {why} during run {run.index} (its log is in {agent_dir})",
                    exit_code=1,
                )
    finally:
        if current is not None:
            stop_current()
    return results, usage


def stderr_ticker(total: int) -> Progress:
    """One line per run on stderr: position of total, the run, time left
    estimated from the mean wall time so far (a bar on a terminal)."""
    from hushmon.progress import bar

    pbar = bar("overhead runs", total=total, unit="run")
    start = time.monotonic()
    interactive = sys.stderr.isatty()

    def tick(done: int, r: RunResult) -> None:
        pbar.update(1)
        if interactive:
            return
        left_s = (time.monotonic() - start) / done * (total - done)
        what = f"{r.time_s:.3f} s" if r.time_s is not None else f"FAILED: {r.error}"
        print(
            f"[{done}/{total}] {r.kernel} {r.config} {r.mode}: {what}"
            f" (load {r.load1:.2f}; about {left_s / 60:.1f} min left)",
            file=sys.stderr,
            flush=True,
        )

    return tick
