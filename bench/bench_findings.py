"""Are the digest's findings measured true? (issue 21)

Each case runs a program twice on the test bed (root): once with a limit and
once with it removed (ranks in one rack instead of two, the uplink
unshaped, the work spread evenly, the node's memory limit raised, the idle
CPU used, a noisy neighbour stopped). The first run's digest predicts, for the finding of the factor
the removal targets, the share of the run time removing it would save (its
``loss`` range); the bench measures the change of the program's own run time
(srun's start to end, as ``hushmon run`` times it: the run time the digest's
shares are of; the program's own ``time_s``, which leaves out the launch, is
printed beside it) and prints per case: the finding and its
severity, the predicted range, the measured saving, hit or miss, and the
machine's load before and after. A case with no finding of that factor
counts as a hit when the measured saving stays under the medium threshold
(10 %), as a miss otherwise (a limit the digest did not see); a finding
without an estimate predicted nothing and counts among the cases, not as a
hit.

``--repeat N`` runs each of the two jobs N times (alternating on one bed, or N
then N where the second run needs another bed) and measures the saving as a
range: each pair's saving, the lowest to the highest, with the median run
times' saving as the figure. The prediction (the first run's digest, the one
a user reads) is a hit when its range and the measured range overlap
("hit (spread)" when the median saving lies outside it and only the spread
reaches it): the
measurement's own run-to-run spread is the bed's and its machine's (a shared
2-vCPU VM), not something the digest of one run can know, so the bench, not
the estimate, carries it (docs/digest.md).

Each run checks that the bed it ran on is the one the case brought up (the
same daemons) and that the fabric's counters were read: a bed brought up or
down under the case by a process without the lock stops the case in one
line instead of reporting a miss.

Where the job spans racks, the bytes that really crossed each uplink (the
rack end's transmit counter on the bed's fabric) are read around the first
run and printed beside the digest's bounds of the crossed share.

    .venv/bin/python bench/bench_findings.py [--short] [--cases a,b] [--repeat N]

It takes the bed lock itself for each case (``--lock`` to name another
file; ``--no-lock`` when the caller holds it; a lock held by a process above
this one, as under ``flock LOCK make test``, counts as held): each case holds
it for one bed up, two runs and the bed down (about a minute). ``--short``: one small
case (make test, through tests/testbed/test_bench_findings.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hushmon.digest.factors import parameters
from hushmon.digest.factors.io_bound import FACTOR as IO_BOUND
from hushmon.paths import REPO_ROOT, build_bin_dir
from hushmon.testbed import bedlock
from hushmon.testbed.spec import FABRIC_NETNS, NETNS_PREFIX, parse_bytes, uplink_ports

HUSHMON = [sys.executable, "-m", "hushmon.cli"]
DATA_PARENT = Path("/var/tmp")  # nodes have a private /tmp: the runs' files live here
LOCK = Path("/tmp/hushmon-bed.lock")


@dataclass
class Case:
    name: str
    limit: str  # what limits the first run, and how the second removes it
    factors: tuple[str, ...]  # the factor(s) whose finding predicts the saving
    bed: tuple[str, ...]  # testbed up options of the first run
    limited: tuple[str, ...]  # srun options, program, its options
    removed: tuple[str, ...]
    bed_removed: tuple[str, ...] | None = None  # another bed for the second run
    # only the findings with one of these titles (the memory one of disk_swap, not its disk one)
    titles: tuple[str, ...] = ()
    own: bool = True  # one of build/bin's programs (their --json summary has time_s)
    inputs: tuple[str, ...] = ()  # files of bench/inputs copied into the run's folder (its cwd)
    # a noisy neighbour: node-exec NODE PROGRAM ARGS... running through the first run only
    neighbour: tuple[str, ...] = ()
    # the nodes' memory limit through the second run only (set on the same bed, so the
    # runs alternate: a load swing lands on both, as with a case on one bed)
    memory_removed: str = ""


def _butterfly(rounds: int, cycles: int, compute_ms: int, extra: tuple[str, ...] = ()) -> tuple:
    return (
        "butterfly",
        "--rounds",
        str(rounds),
        "--cycles",
        str(cycles),
        "--compute-ms",
        str(compute_ms),
        *extra,
    )


BED4 = ("--nodes", "4", "--racks", "2")
# 1 GiB streamed through a 64 MiB buffer, twice, on one node.
OUTOFCORE_1G = ("-N", "1", "outofcore", "--data", "1G", "--memory", "64M", "--passes", "2",
                "--no-fsync", "--dir", "/var/tmp")  # fmt: skip


CASES = {
    "pair-racks": Case(
        "pair-racks",
        "2 ranks in 2 racks (200 Mbit/s uplink) -> the same 2 ranks in one rack (1 Gbit/s links)",
        ("topology", "network_bandwidth"),
        BED4,
        ("-N", "2", "-w", "n1,n3", *_butterfly(40, 2, 1000)),
        ("-N", "2", "-w", "n1,n2", *_butterfly(40, 2, 1000)),
    ),
    "butterfly-uplink": Case(
        "butterfly-uplink",
        "butterfly on 4 nodes in 2 racks, 200 Mbit/s uplinks -> uplinks at 1 Gbit/s",
        ("network_bandwidth", "topology"),
        BED4,
        ("-N", "4", *_butterfly(30, 2, 1000)),
        ("-N", "4", *_butterfly(30, 2, 1000)),
        bed_removed=(*BED4, "--uplink-rate", "1gbit"),
    ),
    "snake-uplink": Case(
        "snake-uplink",
        "snake on 4 nodes in 2 racks (neighbours: half the pairs in a rack), 200 Mbit/s "
        "uplinks -> 1 Gbit/s",
        ("network_bandwidth", "topology"),
        BED4,
        ("-N", "4", "snake", "--rounds", "30", "--cycles", "2", "--compute-ms", "1000"),
        ("-N", "4", "snake", "--rounds", "30", "--cycles", "2", "--compute-ms", "1000"),
        bed_removed=(*BED4, "--uplink-rate", "1gbit"),
    ),
    "imbalance": Case(
        "imbalance",
        "rank r computes 2 x (1 + 2r/3) s per cycle -> the same work spread evenly (4 s each)",
        ("imbalance",),
        BED4,
        ("-N", "4", *_butterfly(3, 3, 2000, ("--imbalance", "2"))),
        ("-N", "4", *_butterfly(3, 3, 4000)),
    ),
    # Raising the limit keeps the data in the page cache: it removes both the memory
    # finding and the tasks' waiting for the disk (io_bound: "give the node more page
    # cache"), so both predict; the larger estimate is judged. The limit binds: the
    # node's cgroup holds 420 MiB of page cache at 99.9 % of its 512 MiB (10:11 UTC).
    "memory": Case(
        "memory",
        "outofcore, 1 GiB of data under a 512 MiB node limit -> the limit raised to 3 GiB",
        ("disk_swap", "io_bound"),
        ("--nodes", "1", "--racks", "1", "--node-memory", "512M"),
        OUTOFCORE_1G,
        OUTOFCORE_1G,  # the same run; only the node's memory limit changes
        titles=("Memory at its limit: data streams through the disk", IO_BOUND.title),
        # on the same bed: with a second bed (until 10:30 UTC) the 3 GiB runs came
        # after the 512 MiB ones, and a load falling from 22 to 10 between them
        # measured 37 % where the same bed at load 3-7 measured 25 %
        memory_removed="3G",
    ),
    # EP (2^28 pairs, one reduction at the end) instead of matmul --size 1024 (until
    # 2026-11-27): its ranks compute without waiting for each other, so a second rank
    # measures only the CPU it gets, not a ring's ranks waiting for each other's turn on
    # oversubscribed CPUs (matmul at load 16-22: 24-78 % slower); and it runs 10-40 s,
    # not 3-8 s, so srun's launch is a small part. The remedy can give the job only the
    # CPUs the machine leaves idle, which is all the finding counts: the two ranks share
    # one scheduling group (an autogroup on the bed) and take nothing from the other
    # work. The bed judges it only where CPUs are idle (docs/digest.md, 10:17-10:46).
    "idle-cpu": Case(
        "idle-cpu",
        "EP class W, 1 rank on a 2-CPU node -> 2 ranks on it",
        ("idle_cpu",),
        ("--nodes", "1", "--racks", "1"),
        ("-N", "1", "-n", "1", "ep", "--class", "W"),
        ("-N", "1", "-n", "2", "ep", "--class", "W"),
    ),
}
# a rank-sized CPU hog in node n2's cgroup, from before the first run's job to its end
NOISY_N2 = ("n2", "hushmon-inject", "--level", "100", "--duration", "600", "--start", "now",
            "--quiet")  # fmt: skip
CASES["butterfly-racks"] = Case(
    "butterfly-racks",
    "butterfly on 4 nodes in 2 racks (200 Mbit/s uplinks) -> the 4 nodes in one rack",
    ("topology", "network_bandwidth"),
    BED4,
    ("-N", "4", *_butterfly(30, 2, 1000)),
    ("-N", "4", *_butterfly(30, 2, 1000)),
    bed_removed=("--nodes", "4", "--racks", "1"),
)
# the neighbour factor prices the hog (the node's CPU time less the job's cgroup);
# imbalance stays among the factors, so a hog read as the job's work shows as a miss
CASES["neighbour"] = Case(
    "neighbour",
    "matmul on 4 nodes (a ring: every step waits for the slowest rank) with a CPU hog "
    "beside the rank on n2 (hushmon-inject at 100 %) -> the hog stopped",
    ("neighbour", "imbalance"),
    BED4,
    ("-N", "4", "matmul", "--size", "1536", "--repeat", "5"),
    ("-N", "4", "matmul", "--size", "1536", "--repeat", "5"),
    neighbour=NOISY_N2,
)
INPUTS = Path(__file__).resolve().parent / "inputs"
# Real applications packaged by Debian (scripts/install-deps.sh): the job's 4 nodes in
# 2 racks behind 200 Mbit/s uplinks, then all 4 in one rack.
LAMMPS = ("-N", "4", "/usr/bin/lmp", "-in", "lammps-lj.in", "-var", "side", "12")
LAMMPS_RUN = (*LAMMPS, "-var", "steps", "600", "-log", "none", "-screen", "none")
CASES["lammps-racks"] = Case(
    "lammps-racks",
    "LAMMPS Lennard-Jones liquid (6,912 atoms, 600 steps, 2 x 2 grid) on 4 nodes in 2 racks "
    "-> the 4 nodes in one rack",
    ("topology", "network_bandwidth"),
    BED4,
    LAMMPS_RUN,
    LAMMPS_RUN,
    bed_removed=("--nodes", "4", "--racks", "1"),
    own=False,
    inputs=("lammps-lj.in",),
)
CASES["hpcc-racks"] = Case(
    "hpcc-racks",
    "HPCC 1.5.0 (N = 1000, 2 x 2 grid: HPL, PTRANS, RandomAccess, FFT, DGEMM, STREAM) on 4 "
    "nodes in 2 racks -> the 4 nodes in one rack",
    ("topology", "network_bandwidth"),
    BED4,
    ("-N", "4", "/usr/bin/hpcc"),
    ("-N", "4", "/usr/bin/hpcc"),
    bed_removed=("--nodes", "4", "--racks", "1"),
    own=False,
    inputs=("hpccinf.txt",),
)
SHORT = "pair-racks"
# the short run's parameters (make test): the same case, fewer rounds
SHORT_CASE = Case(
    SHORT,
    CASES[SHORT].limit,
    CASES[SHORT].factors,
    BED4,
    ("-N", "2", "-w", "n1,n3", *_butterfly(20, 2, 500)),
    ("-N", "2", "-w", "n1,n2", *_butterfly(20, 2, 500)),
)


@dataclass
class RunResult:
    job: str
    time_s: float  # the program's own (its --json summary)
    wall_s: float  # hushmon run's duration_s: srun's start to end
    digest: dict[str, Any]
    crossed: dict[str, tuple[int, int]] = field(default_factory=dict)  # rack: (uplink, sent)


@dataclass
class Row:
    case: Case
    finding: str
    severity: str
    low: float | None
    high: float | None
    measured: float
    verdict: str
    load_before: str
    load_after: str
    times: tuple[float, float]  # run time (srun start to end), s
    program_times: tuple[float, float]  # the program's own time_s
    crossed: str
    jobs: tuple[str, str]
    crossed_measured: dict[str, float] = field(default_factory=dict)  # rack: uplink / sent
    crossed_bounds: tuple[float, float] | None = None  # the digest's (topology evidence)
    compare: str = ""  # hushmon compare A B's verdict for the finding (monitored spans)
    phases: list[str] = field(default_factory=list)  # the first run's phases and main limits
    partners: str = ""  # the topology finding's word on what crossed: measured or bounded
    # --repeat: each pair's saving (first run i against second run i), the lowest to
    # the highest, every run's time and every first run's prediction
    measured_each: list[float] = field(default_factory=list)
    run_times_each: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))
    predicted_each: list[tuple[float | None, float | None]] = field(default_factory=list)

    @property
    def measured_range(self) -> tuple[float, float]:
        values = [self.measured, *self.measured_each]
        return min(values), max(values)

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case.name,
            "limit": self.case.limit,
            "finding": self.finding,
            "severity": self.severity,
            "predicted_low_share": self.low,
            "predicted_high_share": self.high,
            "measured_share": round(self.measured, 4),
            "repeat": max(1, len(self.measured_each)),
            "measured_shares_each": [round(v, 4) for v in self.measured_each],
            "measured_range": [round(v, 4) for v in self.measured_range],
            "run_time_s_each": [list(self.run_times_each[0]), list(self.run_times_each[1])],
            "predicted_each": [list(p) for p in self.predicted_each],
            "verdict": self.verdict,
            "run_time_s": list(self.times),  # the median of each run's times
            "program_time_s": list(self.program_times),
            "program_measured_share": round(1 - self.program_times[1] / self.program_times[0], 4),
            "load_before": self.load_before,
            "load_after": self.load_after,
            "crossed": self.crossed,
            "crossed_measured": self.crossed_measured,
            "crossed_bounds_digest": list(self.crossed_bounds) if self.crossed_bounds else None,
            "jobs": list(self.jobs),
            "compare": self.compare,
            "phases": self.phases,
            "partners": self.partners,
        }


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def fail(msg: str) -> None:
    print(f"bench_findings: {msg}", file=sys.stderr)
    raise SystemExit(1)


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "python")}
    # its own session: on a timeout the whole group goes (hushmon run's srun with it)
    proc = subprocess.Popen(
        [*HUSHMON, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        # one line, and the bed goes down on the way out (bed()'s finally); the
        # memory case's outofcore hung this way once under its 512 MiB limit
        fail(f"hushmon {' '.join(args)[:200]} ran over {timeout:.0f} s")
        raise  # not reached: fail exits
    except BaseException:
        # SIGTERM (main's handler) or Ctrl-C: the child's own session would
        # outlive us and run on against the bed that our way out takes down
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@contextmanager
def bed_lock(path: Path | None, wait_s: float) -> Iterator[None]:
    """The bed lock for one case (hushmon.testbed.bedlock, as the tests take
    it: a lock held by a process above this one counts as held); None: the
    caller holds it (--no-lock)."""
    if path is None:
        yield
        return
    with ExitStack() as held:
        try:
            held.enter_context(bedlock.bed_lock(path, wait_s))
        except bedlock.BedLockTimeout as exc:
            fail(str(exc))
        yield


def _bed_identity() -> tuple[str, tuple[tuple[str, int], ...]] | None:
    """The live bed's data folder and daemons (None: no bed is up)."""
    from hushmon.testbed.state import load

    state = load()
    if state is None:
        return None
    return str(state.data_root.resolve()), tuple(sorted(state.daemons.items()))


@contextmanager
def bed(options: tuple[str, ...], data: Path) -> Iterator[Callable[[str], None]]:
    """The case's bed, up for the body; it gets a check to call after each run: the
    bed is still the one brought up here (same data folder, same daemons)."""
    up = cli("testbed", "up", *options, "--data-dir", str(data), timeout=180)
    if up.returncode != 0:
        fail(f"testbed up {' '.join(options)}: {up.stderr.strip().splitlines()[-1:]}")
    ours = _bed_identity()

    def still_ours(what: str) -> None:
        # a process that brings a bed up or down without the lock (a test run outside
        # flock) replaces this one under the run: its figures would be another bed's
        if ours is None or _bed_identity() != ours:
            fail(
                f"{what}: the bed changed under the run (brought up or down by a process "
                "without the bed lock); its figures are not this case's"
            )

    try:
        yield still_ours
    finally:
        now = _bed_identity()
        if now is None or now == ours:
            cli("testbed", "down", timeout=120)
        else:  # another process's bed (which took ours down): not ours to end
            print("bench_findings: left the bed up: it is not the case's", file=sys.stderr)


def _link_bytes(netns: str, iface: str, direction: str) -> int:
    out = subprocess.run(
        ["ip", "-n", netns, "-j", "-s", "link", "show", "dev", iface],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        return -1
    return int(json.loads(out.stdout)[0]["stats64"][direction]["bytes"])


def _counters(racks: int, nodes: int) -> dict[str, tuple[int, int]]:
    """Per rack: bytes its uplink carried out of it, bytes its nodes sent (node eth0 tx)."""
    per_rack = -(-nodes // racks)
    out = {}
    for r in range(1, racks + 1):
        up = _link_bytes(FABRIC_NETNS, uplink_ports(r)[0], "tx")
        each = [
            _link_bytes(f"{NETNS_PREFIX}n{i}", "eth0", "tx")
            for i in range(1, nodes + 1)
            if (i - 1) // per_rack + 1 == r
        ]
        if up < 0 or min(each, default=0) < 0:
            # read as 0 bytes before and after, a missing namespace showed as "sent
            # nothing" (butterfly-uplink at 05:02, while a bed without the lock ran)
            fail(f"rack r{r}'s uplink or node links cannot be read: the bed is not this case's")
        out[f"r{r}"] = (up, sum(each))
    return out


@contextmanager
def neighbour(command: tuple[str, ...]) -> Iterator[None]:
    """A program running on a bed node (its cgroup: it takes the node's CPUs from the
    job's rank) while the body runs; stopped after it."""
    if not command:
        yield
        return
    from hushmon.testbed.state import load

    bed_state = load()
    if bed_state is None:
        fail("no test bed for the noisy neighbour")
    assert bed_state is not None
    node, program, *args = command
    argv = [str(bed_state.node_exec()), node, str(build_bin_dir() / program), *args]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        time.sleep(1.0)  # running before the job starts
        if proc.poll() is not None:
            fail(f"the noisy neighbour {' '.join(command)} stopped: exit {proc.returncode}")
        yield
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@contextmanager
def node_memory(limit: str) -> Iterator[None]:
    """The bed's nodes' memory limit (their cgroups') set to ``limit`` while the body
    runs, the bed's own after it (its page cache freed: outofcore unlinks its file)."""
    if not limit:
        yield
        return
    from hushmon.testbed.cgroups import memory_limit_file
    from hushmon.testbed.state import load

    bed_state = load()
    if bed_state is None:
        fail("no test bed to set the nodes' memory limit on")
    assert bed_state is not None
    found = [memory_limit_file(bed_state.cgroups, n.name) for n in bed_state.nodes()]
    files = [f for f in found if f is not None]
    if len(files) < len(found):
        fail("the bed's cgroups have no memory controller")
    own = {f: f.read_text().strip() for f in files}

    def write(f: Path, value: str) -> None:
        try:
            f.write_text(value)
        except OSError as exc:
            fail(f"setting {f} to {value}: {exc.strerror}")

    for f in files:
        write(f, str(parse_bytes(limit)))
    try:
        yield
    finally:
        for f, value in own.items():
            write(f, value)


def _opt(options: tuple[str, ...], name: str, default: int) -> int:
    return int(options[options.index(name) + 1]) if name in options else default


def run_job(
    data: Path,
    srun: tuple[str, ...],
    label: str,
    bed_options: tuple[str, ...],
    own: bool = True,
    inputs: tuple[str, ...] = (),
) -> RunResult:
    split = 0
    while srun[split].startswith("-"):  # srun's options come in pairs (-N 2, -w n1,n3)
        split += 2
    name = srun[split]
    program = Path(name) if name.startswith("/") else build_bin_dir() / name
    if not program.exists():
        fail(f"{program} is not installed (make; scripts/install-deps.sh for lmp and hpcc)")
    rundir = data / f"{label}-{uuid.uuid4().hex[:6]}"
    rundir.mkdir()
    for f in inputs:
        shutil.copy(INPUTS / f, rundir / f)
    summary = rundir / "summary.json"
    tail = ["--json", str(summary)] if own else []
    command = [
        "srun",
        "--chdir",
        str(rundir),
        *srun[:split],
        str(program),
        *srun[split + 1 :],
        *tail,
    ]
    nodes, racks = _opt(bed_options, "--nodes", 4), _opt(bed_options, "--racks", 2)
    before = _counters(racks, nodes) if racks > 1 else {}
    out = cli("run", "--data-dir", str(data), "--json", "-", "--", *command, timeout=600)
    after = _counters(racks, nodes) if racks > 1 else {}
    if out.returncode != 0:
        fail(f"{' '.join(command)}: exit {out.returncode}: {out.stderr.strip()[-400:]}")
    outcome = json.loads(out.stdout)
    if outcome.get("exit_code") != 0 or outcome.get("digest") is None:
        why = "; ".join(outcome.get("warnings") or []) or out.stderr.strip()[-400:]
        fail(f"{' '.join(command)}: exit {outcome.get('exit_code')}, no digest: {why}")
    digest = json.loads(Path(outcome["digest"]["json"]).read_text())
    wall = float(outcome["duration_s"])
    time_s = float(json.loads(summary.read_text())["time_s"]) if own else wall
    crossed = {r: (after[r][0] - before[r][0], after[r][1] - before[r][1]) for r in before}
    return RunResult(str(outcome["job"]), time_s, wall, digest, crossed)


def predicted(case: Case, digest: dict[str, Any]) -> tuple[str, str, float | None, float | None]:
    """The finding of the case's factors with the largest estimated loss (or, with none
    estimated, the most severe): its title, severity, low and high shares."""
    found = [
        f
        for f in digest["findings"]
        if f["factor"] in case.factors
        and f["severity"] != "info"
        and (not case.titles or f["title"] in case.titles)
    ]
    if not found:
        return "no finding", "-", None, None
    with_loss = [f for f in found if f["loss"] is not None]
    if with_loss:
        f = max(with_loss, key=lambda f: f["loss"]["low_share"] + f["loss"]["high_share"])
        return f["title"], f["severity"], f["loss"]["low_share"], f["loss"]["high_share"]
    order = ("high", "medium", "low")
    f = min(found, key=lambda f: order.index(f["severity"]))
    return f["title"], f["severity"], None, None


def verdict(
    low: float | None,
    high: float | None,
    measured: float,
    found: bool,
    measured_range: tuple[float, float] | None = None,
) -> str:
    """Hit: the measured saving inside the predicted range; with repeated runs, the
    measured range (lowest to highest pair) overlapping it: "hit (spread)" when the
    median saving is outside and only the spread reaches the range. No finding: a
    hit when the saving (the median) stays under the medium threshold."""
    if not found:
        return "hit" if measured < parameters()["loss"]["medium_share"] else "miss"
    if low is None or high is None:
        return "no estimate"
    lo_m, hi_m = measured_range if measured_range is not None else (measured, measured)
    if low <= measured <= high:
        return "hit"
    return "hit (spread)" if low <= hi_m and lo_m <= high else "miss"


def _crossed_text(result: RunResult, digest: dict[str, Any]) -> str:
    if not result.crossed:
        return ""
    topo = next((f for f in digest["findings"] if f["factor"] == "topology"), None)
    bounds = ""
    if topo is not None and "share_that_crossed_racks_at_least" in topo["evidence"]:
        ev = topo["evidence"]
        bounds = (
            f"; digest: {ev['share_that_crossed_racks_at_least']:.0%}-"
            f"{ev['share_that_may_cross_racks']:.0%}"
        )
    parts = [
        f"{r} {up / sent:.0%}" if sent > 0 else f"{r} -" for r, (up, sent) in result.crossed.items()
    ]
    return "crossed (uplink counter / nodes' tx): " + ", ".join(parts) + bounds


def run_case(case: Case, data: Path, lock: Path | None, wait_s: float, repeat: int = 1) -> Row:
    firsts: list[RunResult] = []
    seconds: list[RunResult] = []

    def first_run(i: int) -> RunResult:
        with neighbour(case.neighbour):
            return run_job(data, case.limited, f"{case.name}-a{i}", case.bed, case.own, case.inputs)

    def second_run(i: int, bed_options: tuple[str, ...]) -> RunResult:
        label = f"{case.name}-b{i}"
        with node_memory(case.memory_removed):
            return run_job(data, case.removed, label, bed_options, case.own, case.inputs)

    with bed_lock(lock, wait_s):
        load_before = loadavg()
        with bed(case.bed, data) as still_ours:
            # on one bed the runs alternate (a b a b ...): a load swing lands on both
            for i in range(1, repeat + 1):
                firsts.append(first_run(i))
                still_ours(f"{case.name} run a{i}")
                if case.bed_removed is None:
                    seconds.append(second_run(i, case.bed))
                    still_ours(f"{case.name} run b{i}")
        if case.bed_removed is not None:
            with bed(case.bed_removed, data) as still_ours:
                for i in range(1, repeat + 1):
                    seconds.append(second_run(i, case.bed_removed))
                    still_ours(f"{case.name} run b{i}")
        load_after = loadavg()
    first, second = firsts[0], seconds[0]
    title, severity, low, high = predicted(case, first.digest)
    walls = ([r.wall_s for r in firsts], [r.wall_s for r in seconds])
    # the figure: the median run times' saving; the spread: each pair's
    median_a, median_b = statistics.median(walls[0]), statistics.median(walls[1])
    measured = 1 - median_b / median_a
    each = [1 - b / a for a, b in zip(walls[0], walls[1], strict=True)] if repeat > 1 else []
    row = Row(
        case,
        title,
        severity,
        low,
        high,
        measured,
        "",
        load_before,
        load_after,
        (median_a, median_b),
        (
            statistics.median(r.time_s for r in firsts),
            statistics.median(r.time_s for r in seconds),
        ),
        _crossed_text(first, first.digest),
        (first.job, second.job),
        {r: up / sent for r, (up, sent) in first.crossed.items() if sent > 0},
        _bounds(first.digest),
        measured_each=each,
        run_times_each=walls,
        predicted_each=[predicted(case, r.digest)[2:] for r in firsts],
    )
    row.verdict = verdict(low, high, measured, title != "no finding", row.measured_range)
    row.compare = compare_verdict(data, first.job, second.job, title)
    row.phases = phase_lines(first.digest)
    topo = next((f for f in first.digest["findings"] if f["factor"] == "topology"), None)
    row.partners = str(topo["evidence"].get("partners", "")) if topo is not None else ""
    return row


def phase_lines(digest: dict[str, Any]) -> list[str]:
    """The first run's phases (digest.json "phases"), each with its main limit."""
    doc = digest.get("phases") or {}
    phases = doc.get("phases") or []
    if len(phases) < 2:
        return []
    out = []
    for p in phases:
        main = p.get("main_limit")
        share = p.get("main_limit_job_share")
        limit = (
            "no limit found"
            if main is None
            else f"[{main['severity']}] {main['title']}"
            + (f" {100 * share[0]:.0f}-{100 * share[1]:.0f}% of the job" if share else "")
        )
        out.append(
            f"{p['name']} {p['start_s']:.0f}-{p['end_s']:.0f} s ({p['description'][:60]}): {limit}"
        )
    return [f"{len(phases)} phases ({doc.get('source')})", *out]


def compare_verdict(data: Path, a: str, b: str, title: str) -> str:
    """What ``hushmon compare A B`` says of the finding: its own predicted-against-measured
    check, on the monitored spans (the store outlives the beds)."""
    out = cli("compare", a, b, "--data-dir", str(data), "--json", "-", timeout=300)
    if out.returncode != 0:
        return f"compare failed: {out.stderr.strip()[-200:]}"
    checks = (json.loads(out.stdout).get("predicted_vs_measured") or {}).get("checks", [])
    check = next((c for c in checks if c["title"] == title), None)
    if check is None:
        return "compare: the finding is not gone or smaller in the second run"
    return (
        f"compare {a} {b}: measured {100 * check['measured_share']:+.0f}% "
        f"(+-{100 * check['tolerance']:.0f}), {check['verdict']}"
    )


def _bounds(digest: dict[str, Any]) -> tuple[float, float] | None:
    topo = next((f for f in digest["findings"] if f["factor"] == "topology"), None)
    if topo is None or "share_that_crossed_racks_at_least" not in topo["evidence"]:
        return None
    ev = topo["evidence"]
    return float(ev["share_that_crossed_racks_at_least"]), float(ev["share_that_may_cross_racks"])


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}"


def print_row(row: Row) -> None:
    pred = "none" if row.low is None or row.high is None else f"{_pct(row.low)}-{_pct(row.high)}%"
    spread = ""
    if row.measured_each:
        lo_m, hi_m = row.measured_range
        spread = f" [{100 * lo_m:+.1f}..{100 * hi_m:+.1f}% over {len(row.measured_each)} pairs]"
    print(
        f"{row.case.name:<17} [{row.severity}] {row.finding[:44]:<44} predicted {pred:>8}  "
        f"measured {100 * row.measured:+5.1f}%{spread} ({row.times[0]:.1f} -> "
        f"{row.times[1]:.1f} s; program {row.program_times[0]:.1f} -> "
        f"{row.program_times[1]:.1f} s)  {row.verdict:<11} load {row.load_before} -> "
        f"{row.load_after}",
        flush=True,
    )
    if row.measured_each:
        a, b = row.run_times_each
        preds = ", ".join(
            "none" if lo is None or hi is None else f"{_pct(lo)}-{_pct(hi)}%"
            for lo, hi in row.predicted_each
        )
        print(
            f"{'':<17} runs (s): {' '.join(f'{t:.1f}' for t in a)} -> "
            f"{' '.join(f'{t:.1f}' for t in b)}; each first run's prediction: {preds}",
            flush=True,
        )
    if row.crossed:
        print(f"{'':<17} {row.crossed}", flush=True)
    if row.compare:
        print(f"{'':<17} {row.compare}", flush=True)
    for text in row.phases:
        print(f"{'':<17} {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", action="store_true", help=f"one small case ({SHORT})")
    ap.add_argument("--cases", help=f"comma-separated, of: {', '.join(CASES)} (default all)")
    ap.add_argument("--lock", type=Path, default=LOCK, help=f"the bed lock (default {LOCK})")
    ap.add_argument("--no-lock", action="store_true", help="the caller holds the bed lock")
    ap.add_argument(
        "--lock-wait", type=float, default=1800, help="seconds to wait for the lock per case"
    )
    ap.add_argument("--json", metavar="FILE|-", help="the table as JSON ('-' = stdout)")
    ap.add_argument("--keep", action="store_true", help="keep the runs' data folder (printed)")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run each job N times: the saving measured as a range (default 1)",
    )
    args = ap.parse_args(argv)
    # a SIGTERM (a test's timeout, a batch system's limit) unwinds like an
    # error: the case's bed goes down and its lock is let go, not left to
    # the next user of the machine
    signal.signal(signal.SIGTERM, lambda _sig, _frame: fail("terminated (SIGTERM)"))
    if not 1 <= args.repeat <= 10:
        fail(f"--repeat {args.repeat}: use 1 to 10")
    if os.geteuid() != 0:
        fail("the test bed needs root")
    names = [SHORT] if args.short else (args.cases.split(",") if args.cases else list(CASES))
    unknown = [n for n in names if n not in CASES]
    if unknown:
        fail(f"unknown case {', '.join(unknown)}: use {', '.join(CASES)}")
    data = DATA_PARENT / f"hushmon-bench-findings-{uuid.uuid4().hex[:8]}"
    data.mkdir(parents=True)
    out = sys.stderr if args.json == "-" else sys.stdout
    rows: list[Row] = []
    try:
        print(
            f"bench_findings: {len(names)} case(s) on the test bed, load {loadavg()}",
            file=out,
            flush=True,
        )
        for name in names:
            case = SHORT_CASE if args.short else CASES[name]
            row = run_case(
                case, data, None if args.no_lock else args.lock, args.lock_wait, args.repeat
            )
            rows.append(row)
            if out is sys.stdout:
                print_row(row)
            else:
                print(json.dumps(row.to_json()), file=sys.stderr, flush=True)
    finally:
        if args.keep:
            print(f"bench_findings: the runs' data: {data}", file=sys.stderr)
        else:
            shutil.rmtree(data, ignore_errors=True)
    hits = sum(r.verdict.startswith("hit") for r in rows)
    by_spread = sum(r.verdict == "hit (spread)" for r in rows)
    judged = sum(r.verdict != "no estimate" for r in rows)
    unestimated = sum(r.verdict == "no estimate" for r in rows)
    high_small = [r for r in rows if r.severity == "high" and r.measured < 0.10]
    # a finding without an estimate predicted nothing: it counts among the cases,
    # not as a hit (the goal is hits of all cases, not of those judged)
    print(
        f"hits: {hits} of {len(rows)} cases ({by_spread} of them by the spread only: the median "
        f"saving outside the range; {judged} judged, {unestimated} with no estimate, "
        f"counted as not hit); [high] findings whose removal gained under 10 %: "
        f"{len(high_small)}",
        file=out,
    )
    if args.json:
        doc = {
            "cases": [r.to_json() for r in rows],
            "hits": hits,
            "hits_by_spread_only": by_spread,
            "judged": judged,
            "no_estimate": unestimated,
            "cases_run": len(rows),
        }
        if args.json == "-":
            print(json.dumps(doc, indent=2))
        else:
            Path(args.json).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
