"""What the site sources of issue 23 add to the agent's cost per sample:
rapl (powercap energy and power limits), procio (/proc/PID/io of a job's
tasks), nfs (/proc/self/mountstats), lustre (llite/osc stats), cxi
(Slingshot telemetry), thermal (thermal_throttle counters), cpu_info (node
metadata) and the ib source's new counters, side by side with the agent
without them, in one run.

Two parts, each alternating "without" and "with" for --rounds rounds of
``hushmon-agent --measure-cost CYCLES`` (CPU clock of the agent's thread,
cycles back to back; medians):

1. This machine as it is (real /proc and /sys): the default sources
   without the new ones, next to all default sources. A Slurm-like job
   cgroup (``<cgroup>/job_4242``) holding --tasks sleeping processes is
   made first when run as root on cgroup v2, so that `jobs`, `cgroup` and
   procio each have a job to read (procio reads --tasks real /proc/PID/io
   files); without root that part runs with no job and says so. Sources
   with nothing to read here (no powercap, NFS, Lustre, Slingshot or
   InfiniBand on a VM) cost their check only.
2. The fixture trees of tests/fixtures/agent (rapl, ib, nfs, lustre, cxi,
   thermal, cpuinfo), merged into one root on tmpfs: each new source's cost
   per sample when it has something to read (2 RAPL zones with their power
   limits, read every 60 s; 2 IB ports with hw_counters and counters_ext;
   2 NFS mounts; 3 Lustre targets; 1 Slingshot NIC; 2 packages' thermal
   counters, their 4 cores' every 10 s; cpu_info, which writes in the first
   two cycles only). Files
   on tmpfs are cheaper to read than sysfs/procfs files the kernel makes
   on each read: part 1 is the real cost of the real files.

Not a test: nothing is asserted; the figures go to docs/agent.md ("Site
sources: cost").

    .venv/bin/python bench/bench_agent_sources.py [--cycles 2000] [--rounds 5]
        [--tasks 32] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agent_cpus import measure_cost

from hushmon import jsonio
from hushmon.errors import HushmonError
from hushmon.paths import REPO_ROOT, program

NEW_SOURCES = ("rapl", "procio", "nfs", "lustre", "cxi", "thermal", "cpu_info")
# fixture tree -> the source that reads it
FIXTURE_TREES = {
    "rapl": "rapl",
    "ib": "ib",
    "nfs": "nfs",
    "lustre": "lustre",
    "cxi": "cxi",
    "thermal": "thermal",
    "cpuinfo": "cpu_info",
}
# cgroup v2: the whole hierarchy, or its part beside v1 on a hybrid system.
CGROUP_V2_MOUNTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))


def default_sources(agent: Path) -> list[str]:
    """The sources `hushmon-agent --help` marks as default ('*')."""
    out = subprocess.run([str(agent), "--help"], capture_output=True, text=True, timeout=30).stdout
    block = out.split("\nSources", 1)[1].split("\nSinks", 1)[0]
    return [line.split()[1] for line in block.splitlines() if line.startswith("  * ")]


@contextmanager
def job_with_tasks(ntasks: int) -> Iterator[tuple[list[str], str]]:
    """A job_4242 cgroup under a fresh parent, holding ntasks sleepers; yields
    (the agent's options that find it, a note). No job without root."""
    v2 = next((m for m in CGROUP_V2_MOUNTS if (m / "cgroup.controllers").exists()), None)
    if os.geteuid() != 0 or v2 is None:
        yield [], "no job (needs root and cgroup v2)"
        return
    parent = v2 / f"hushmon-bench-sources-{os.getpid()}"
    job = parent / "job_4242" / "step_0"
    job.mkdir(parents=True)
    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(ntasks)]
    try:
        for p in sleepers:
            (job / "cgroup.procs").write_text(str(p.pid))
        yield (
            ["--cgroup-root", str(v2.relative_to("/")), "--slurm-dir", parent.name],
            f"a job of {ntasks} tasks (job_4242/step_0, sleeping)",
        )
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
        for d in (job, job.parent, parent):
            with suppress(OSError):
                d.rmdir()


def fixture_root(work: Path) -> Path:
    root = work / "root"
    for tree in FIXTURE_TREES:
        shutil.copytree(REPO_ROOT / "tests/fixtures/agent" / tree / "t0", root, dirs_exist_ok=True)
    return root


def alternate(
    agent: Path, cycles: int, rounds: int, variants: dict[str, list[str]]
) -> dict[str, dict[str, float]]:
    """Median per-source cost of each variant, the variants alternating."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, args in variants.items():
            runs[name].append(measure_cost(agent, cycles, *args))
    medians = {}
    for name, results in runs.items():
        keys = sorted({k for r in results for k in r})
        medians[name] = {k: statistics.median(r.get(k, 0.0) for r in results) for k in keys}
    return medians


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=2000, help="cycles per measurement")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds (medians)")
    ap.add_argument("--tasks", type=int, default=32, help="tasks in the job procio reads")
    ap.add_argument("--json", metavar="FILE", help="the figures as JSON ('-' = stdout)")
    args = ap.parse_args(argv)
    if args.cycles < 10 or args.rounds < 1 or not 0 <= args.tasks <= 1000:
        print(
            "bench_agent_sources: --cycles >= 10, --rounds >= 1, --tasks 0..1000", file=sys.stderr
        )
        return 2
    human = sys.stderr if args.json == "-" else sys.stdout
    try:
        agent = program("hushmon-agent")
        defaults = default_sources(agent)
        old = [s for s in defaults if s not in NEW_SOURCES]
        load_before = loadavg()
        with tempfile.TemporaryDirectory(prefix="hm-bench-sources-") as tmp:
            work = Path(tmp)
            with job_with_tasks(args.tasks) as (job_args, job_note):
                common = ["--slurm-scan-ms", "0", *job_args]
                real = alternate(
                    agent,
                    args.cycles,
                    args.rounds,
                    {
                        "without": ["--sources", ",".join(old), *common],
                        "with": ["--sources", ",".join(defaults), *common],
                    },
                )
            root = fixture_root(work)
            fixture = alternate(
                agent,
                args.cycles,
                args.rounds,
                {
                    "fixture": [
                        "--root",
                        str(root),
                        "--sources",
                        ",".join(FIXTURE_TREES.values()),
                    ]
                },
            )["fixture"]
        load_after = loadavg()
    except (HushmonError, OSError, subprocess.SubprocessError) as exc:
        print(f"bench_agent_sources: {exc}", file=sys.stderr)
        return 1
    without, with_ = real["without"]["total"], real["with"]["total"]
    print(
        f"loadavg {load_before} (before) / {load_after} (after); {os.cpu_count()} CPUs", file=human
    )
    print(f"1. this machine, {job_note}; {args.cycles} cycles x {args.rounds} rounds", file=human)
    print(f"   {'source':<10} {'without us':>11} {'with us':>9}", file=human)
    for key in sorted(set(real["with"]) | set(real["without"])):
        a, b = real["without"].get(key), real["with"].get(key)
        fa = f"{a:11.2f}" if a is not None else f"{'-':>11}"
        print(f"   {key:<10} {fa} {b if b is not None else 0.0:9.2f}", file=human)
    print(f"   with / without: {with_ / without:.3f} (+{with_ - without:.2f} us)", file=human)
    print("2. fixture trees on tmpfs, each new source with something to read", file=human)
    for key, value in fixture.items():
        print(f"   {key:<10} {value:9.2f} us", file=human)
    result: dict[str, Any] = {
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "cpus": os.cpu_count(),
        "cycles": args.cycles,
        "rounds": args.rounds,
        "job": job_note,
        "real_us": real,
        "ratio_with_without": with_ / without,
        "fixture_us": fixture,
    }
    try:
        jsonio.emit(args.json, result)
    except HushmonError as exc:
        print(f"bench_agent_sources: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
