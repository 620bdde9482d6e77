"""``hushmon run --demo`` (``make demo``): the seed's experiment on this
machine - butterfly and snake (same messages, different partners) and the
blocked matrix multiplication, each as a monitored job with its report.

The message tests run over TCP (Open MPI's tcp transport, or MPICH told to
leave shared memory aside: hushmon.runner) so their traffic crosses the
loopback interface, where the agent's network sensor sees it; with the
default shared-memory transport a one-node job has no network traffic to show.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

from hushmon import jsonio
from hushmon.datadir import DataDir
from hushmon.errors import HushmonError
from hushmon.paths import program
from hushmon.run.output import outcome_json, print_outcome
from hushmon.run.session import RunOptions, RunOutcome, run_monitored
from hushmon.runner import mpirun_command

DEMO_RANKS = 2


@dataclass(frozen=True)
class DemoJob:
    name: str  # program in build/bin
    args: tuple[str, ...]
    why: str


# At their defaults the message tests alternate 3 s of messages with 3 s of
# compute (distinct states at 1 Hz) for about 24 s, whatever the transport's
# speed; matmul runs about 15 s on an idle 2-core machine.
DEMO_JOBS: tuple[DemoJob, ...] = (
    DemoJob("butterfly", (), "rank i <-> rank n-1-i: far partners, traffic leaves the node"),
    DemoJob("snake", (), "rank i -> rank i+1: near partners, same message length as butterfly"),
    DemoJob("matmul", (), "blocked matrix multiplication: CPU-bound with ring messages"),
)


def demo_command(job: DemoJob) -> list[str]:
    return mpirun_command(DEMO_RANKS, [program(job.name), *job.args], tcp=True)


def _say(message: str) -> None:
    print(f"hushmon demo: {message}", file=sys.stderr, flush=True)


def run_demo(data: DataDir, period_ms: int | None = None, json_target: str | None = None) -> int:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    outcomes: list[tuple[DemoJob, RunOutcome]] = []
    for index, job in enumerate(DEMO_JOBS, start=1):
        command = demo_command(job)
        job_id = f"demo-{job.name}-{stamp}"
        _say(f"[{index}/{len(DEMO_JOBS)}] {job.name} ({job.why})")
        _say(f"job {job_id}: {' '.join(command)}")
        outcome = run_monitored(
            RunOptions(
                command=command,
                data=data,
                job=job_id,
                period_ms=period_ms,
                job_stdout_to_stderr=jsonio.to_stdout(json_target),
            )
        )
        print_outcome(outcome)
        outcomes.append((job, outcome))
        if outcome.interrupted_by:
            _say("interrupted: the remaining jobs are skipped")
            break

    _say("reports:")
    for job, outcome in outcomes:
        where = outcome.digest.report_path if outcome.digest is not None else "(no digest)"
        _say(f"  {job.name:10s} exit {outcome.exit_code}  {where}")
    if json_target:
        payload: dict[str, Any] = {
            "data_dir": str(data.root),
            "jobs": [{"program": j.name, **outcome_json(o)} for j, o in outcomes],
        }
        jsonio.emit(json_target, payload)
    failed = [o for _, o in outcomes if o.exit_code != 0]
    if failed:
        return failed[0].exit_code
    if any(o.digest is None for _, o in outcomes):
        raise HushmonError("the demo ran, but not every job got a digest (see warnings above)")
    return 0
