"""``hushmon run --demo`` (``make demo``): the seed's experiments as monitored
jobs with their reports.

On the test bed (root, network namespaces, Slurm): butterfly and snake
(same messages, different partners) on 4 nodes in 2 racks under Slurm, the
two compared side by side, and a scaling series (matmul on 1, 2 and 4
nodes) compared by node count. A bed that is already up (4 nodes or more in
2 racks or more, with agents and Slurm) is used and left up; otherwise the
demo brings up the default one (``hushmon testbed up``) and takes it down
at the end. Its data go to a folder of their own (``<data>/demo-<time>``):
Slurm numbers jobs from 1 on every new bed, so a store shared with earlier
beds would mix jobs of the same number.

Without root, namespaces or Slurm (or with ``--no-testbed``) the demo runs
on this machine alone and says why: butterfly, snake and matmul with
``mpirun -np 2`` over TCP (Open MPI's tcp transport, or MPICH told to leave
shared memory aside: hushmon.runner), so the message tests' traffic crosses
the loopback interface, where the agent's network sensor sees it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.datadir import DataDir
from hushmon.errors import HushmonError
from hushmon.paths import program
from hushmon.run.output import outcome_json, print_outcome
from hushmon.run.session import RunOptions, RunOutcome, run_monitored
from hushmon.runner import mpirun_command
from hushmon.testbed.runmonitor import find_monitor

DEMO_RANKS = 2
BED_NODES = 4
BED_RACKS = 2


@dataclass(frozen=True)
class DemoJob:
    name: str  # program in build/bin
    args: tuple[str, ...]
    why: str
    nodes: int = 0  # on the bed: srun -N nodes (0: one-node demo)


# At their defaults the message tests alternate 3 s of messages with 3 s of
# compute (distinct states at 1 Hz) for about 24 s, whatever the transport's
# speed; matmul runs about 15 s on an idle 2-core machine.
DEMO_JOBS: tuple[DemoJob, ...] = (
    DemoJob("butterfly", (), "rank i <-> rank n-1-i: far partners, traffic leaves the node"),
    DemoJob("snake", (), "rank i -> rank i+1: near partners, same message length as butterfly"),
    DemoJob("matmul", (), "blocked matrix multiplication: CPU-bound with ring messages"),
    DemoJob(
        "outofcore",
        ("--data", "512M", "--memory", "64M", "--passes", "2"),
        "a data set streamed through a file: disk I/O against computation",
    ),
)

# On the bed: one rank per node. Message phases of 4 s (three whole 1 s
# periods inside each) and compute phases of 2 s, three cycles: about 19 s.
_EXCHANGE = ("--cycles", "3", "--comm-ms", "4000", "--compute-ms", "2000")
_MATMUL = ("--size", "1536", "--repeat", "3")
BED_JOBS: tuple[DemoJob, ...] = (
    DemoJob(
        "butterfly",
        _EXCHANGE,
        "rank i <-> rank n-1-i: every partner in the other rack, through the 200 Mbit/s uplink",
        BED_NODES,
    ),
    DemoJob(
        "snake",
        _EXCHANGE,
        "rank i -> rank i+1: half the partners in the same rack, same messages as butterfly",
        BED_NODES,
    ),
    DemoJob("matmul", _MATMUL, "scaling series: 1 node", 1),
    DemoJob("matmul", _MATMUL, "scaling series: 2 nodes (one rack)", 2),
    DemoJob("matmul", _MATMUL, "scaling series: 4 nodes (two racks)", 4),
)


def demo_command(job: DemoJob, scratch: Path | None = None) -> list[str]:
    if job.nodes:
        return ["srun", "-N", str(job.nodes), str(program(job.name)), *job.args]
    args = list(job.args)
    if job.name == "outofcore" and scratch is not None:
        args += ["--dir", str(scratch)]  # a disk, not a RAM-backed /tmp
    return mpirun_command(DEMO_RANKS, [program(job.name), *args], tcp=True)


def _say(message: str) -> None:
    print(f"hushmon demo: {message}", file=sys.stderr, flush=True)


# -- where the demo runs -------------------------------------------------------


def _quiet(_message: str) -> None:
    pass


def _probe_namespaces() -> str | None:
    """None when this process can make network and UTS namespaces, else why not."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "unshare (util-linux) is not installed"
    try:
        probe = subprocess.run(
            [unshare, "--net", "--uts", "true"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare --net --uts failed: {exc}"
    if probe.returncode != 0:
        return "network namespaces are not available: " + (
            probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "unshare failed"
        )
    return None


def bed_unavailable() -> str | None:
    """Why the demo cannot use a test bed on this machine (None: it can)."""
    if os.geteuid() != 0:
        return "not root: the test bed needs root (sudo make demo)"
    if sys.platform != "linux":
        return "the test bed needs Linux"
    for tool, package in (
        ("ip", "iproute2"),
        ("tc", "iproute2"),
        ("nsenter", "util-linux"),
        ("srun", "slurm-client"),
        ("slurmctld", "slurmctld"),
        ("slurmd", "slurmd"),
        ("munged", "munge"),
    ):
        if shutil.which(tool) is None:
            return f"{tool} is not installed ({package}; scripts/install-deps.sh)"
    return _probe_namespaces()


@dataclass
class Place:
    bed: Any  # hushmon.testbed.state.Bed, or None: one node
    brought_up: bool = False
    why_not: str = ""  # why the demo runs on one node


def _existing_bed() -> tuple[Any, str]:
    """(a suitable bed that is up, or None; why an existing bed is not used)."""
    from hushmon.testbed import bed as bedmod

    try:
        st = bedmod.status()
    except (HushmonError, OSError) as exc:
        return None, f"the test bed's state cannot be read ({exc})"
    if st.bed is None:
        return None, ""
    spec = st.bed.spec
    if not st.up:
        return None, "a damaged test bed is up ('hushmon testbed down' first)"
    if spec.nodes < BED_NODES or spec.racks < BED_RACKS or not spec.slurm or not spec.agents:
        return None, (
            f"the test bed that is up ({spec.nodes} nodes, {spec.racks} racks"
            f"{'' if spec.slurm else ', no Slurm'}{'' if spec.agents else ', no agents'}) "
            f"is not the demo's ({BED_NODES} nodes in {BED_RACKS} racks with Slurm): "
            "it is left alone"
        )
    return st.bed, ""


def choose_place(bed_data: DataDir, testbed: bool | None, say: Callable[[str], None]) -> Place:
    """The bed (one that is up, or one brought up now, its spools in ``bed_data``) or
    one node, with the reason."""
    if testbed is False:
        return Place(None, why_not="--no-testbed")
    why = bed_unavailable()
    if why is None:
        bed, why = _existing_bed()
        if bed is not None:
            say(f"using the test bed that is up ({bed.spec.nodes} nodes, {bed.spec.racks} racks)")
            return Place(bed)
        if not why:
            from hushmon.testbed import bed as bedmod
            from hushmon.testbed.spec import BedSpec

            say(
                f"bringing up a test bed: {BED_NODES} nodes in {BED_RACKS} racks, 1 Gbit/s "
                "node links, 200 Mbit/s uplinks, Slurm (taken down at the end)"
            )
            try:
                bed_data.root.mkdir(parents=True, exist_ok=True)
                bed = bedmod.up(
                    BedSpec(nodes=BED_NODES, racks=BED_RACKS), bed_data.root, say=_quiet
                )
                return Place(bed, brought_up=True)
            except HushmonError as exc:
                why = f"the test bed could not be brought up: {exc}"
    if testbed:
        raise HushmonError(f"--testbed: {why}")
    return Place(None, why_not=why)


# -- the runs ----------------------------------------------------------------


def _run_jobs(
    jobs: tuple[DemoJob, ...],
    data: DataDir,
    period_ms: int | None,
    json_target: str | None,
    testbed: bool,
) -> list[tuple[DemoJob, RunOutcome]]:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    outcomes: list[tuple[DemoJob, RunOutcome]] = []
    scratch = data.root / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    for index, job in enumerate(jobs, start=1):
        command = demo_command(job, scratch)
        job_id = f"demo-{job.name}-{stamp}-{index}"
        _say(f"[{index}/{len(jobs)}] {job.name} ({job.why})")
        _say(f"$ {' '.join(command)}")
        outcome = run_monitored(
            RunOptions(
                command=command,
                data=data,
                job=job_id,
                period_ms=period_ms,
                job_stdout_to_stderr=jsonio.to_stdout(json_target),
                cluster=testbed,
                clusters=(find_monitor,),
            )
        )
        print_outcome(outcome)
        outcomes.append((job, outcome))
        if outcome.interrupted_by:
            _say("interrupted: the remaining jobs are skipped")
            break
    return outcomes


def _compare(data: DataDir, specs: list[str], name: str, what: str) -> dict[str, Any] | None:
    from hushmon.digest.compare import compare_runs

    _say(f"compare {what}: hushmon compare {' '.join(specs)}")
    try:
        cmp = compare_runs(
            data.database,
            specs,
            data.reports(name),
            reports=data.reports_root,
        )
    except HushmonError as exc:
        _say(f"compare failed: {exc}")
        return None
    for line in cmp.summary_lines():
        print(f"  {line}", file=sys.stderr)
    return {
        "what": what,
        "runs": specs,
        "report": str(cmp.report_path),
        "json": str(cmp.json_path),
        "findings": [f.factor for f in cmp.findings],
    }


def _bed_demo(
    place: Place, data: DataDir, period_ms: int | None, json_target: str | None
) -> tuple[list[tuple[DemoJob, RunOutcome]], list[dict[str, Any]]]:
    outcomes = _run_jobs(BED_JOBS, data, period_ms, json_target, testbed=True)
    comparisons: list[dict[str, Any]] = []
    done = {i: o for i, (_, o) in enumerate(outcomes) if o.digest is not None and o.exit_code == 0}
    if 0 in done and 1 in done:
        c = _compare(
            data,
            [f"{done[0].job}=butterfly", f"{done[1].job}=snake"],
            "compare-butterfly-snake",
            "butterfly and snake on the same 4 nodes (which factor differs, and why)",
        )
        if c:
            comparisons.append(c)
    series = [f"{done[i].job}@{BED_JOBS[i].nodes}=matmul" for i in (2, 3, 4) if i in done]
    if len(series) >= 2:
        c = _compare(
            data,
            series,
            "compare-matmul-scaling",
            "matmul on 1, 2 and 4 nodes (which factor grows with the node count)",
        )
        if c:
            comparisons.append(c)
    return outcomes, comparisons


def run_demo(
    data: DataDir,
    period_ms: int | None = None,
    json_target: str | None = None,
    testbed: bool | None = None,
) -> int:
    # Slurm numbers jobs from 1 on every new bed: the demo's store and (for a bed it
    # brings up) spools get a folder of their own, so no earlier job shares a number.
    demo_data = DataDir(Path(data.root) / time.strftime("demo-%Y%m%dT%H%M%S"))
    place = choose_place(demo_data, testbed, _say)
    comparisons: list[dict[str, Any]] = []
    try:
        if place.bed is not None:
            demo_data.create()
            _say(f"data and reports: {demo_data.root}")
            outcomes, comparisons = _bed_demo(place, demo_data, period_ms, json_target)
        else:
            _say(f"running on this machine only ({place.why_not})")
            demo_data = data
            outcomes = _run_jobs(DEMO_JOBS, data, period_ms, json_target, testbed=False)
    finally:
        if place.brought_up:
            from hushmon.testbed import bed as bedmod

            _say("taking the demo's test bed down")
            bedmod.down()

    _say("reports:")
    for job, outcome in outcomes:
        where = outcome.digest.report_path if outcome.digest is not None else "(no digest)"
        nodes = f" on {job.nodes} node(s)" if job.nodes else ""
        _say(f"  {job.name:10s}{nodes} job {outcome.job}, exit {outcome.exit_code}: {where}")
    for c in comparisons:
        _say(f"  compare: {c['what']}: {c['report']}")
    if json_target:
        payload: dict[str, Any] = {
            "data_dir": str(demo_data.root),
            "testbed": place.bed is not None,
            "one_node_because": place.why_not or None,
            "jobs": [
                {"program": j.name, "nodes": j.nodes or 1, **outcome_json(o)} for j, o in outcomes
            ],
            "comparisons": comparisons,
        }
        jsonio.emit(json_target, payload)
    failed = [o for _, o in outcomes if o.exit_code != 0]
    if failed:
        return failed[0].exit_code
    if any(o.digest is None for _, o in outcomes):
        raise HushmonError("the demo ran, but not every job got a digest (see warnings above)")
    return 0
