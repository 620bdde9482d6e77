"""Agent cost per sample against the CPU count, for bench_agent_cost.py
(`--cpus 16,64,192`).

A machine with 192 CPUs is rarely at hand, so the agent runs on fixture
/proc trees (tests/fixtures/agent/t1 with /proc/stat rewritten for N CPUs
and an `intr` line that grows with the CPUs, as per-CPU queues of NICs and
NVMe drives make it) through `--root`: what the agent does with the text
(parsing, per-CPU lines) is measured at N. Two costs are not in a fixture:

- the kernel's cost of producing /proc/stat for N CPUs (it sums every
  IRQ over every CPU: O(IRQs x CPUs)), paid in the agent's own time; and
- perf_event reads: every read of a CPU-bound counter from another CPU is
  an IPI to that CPU. perf_sw's counters are opened on the real CPUs, so
  their cost per CPU is measured here and multiplied by N (the baseline,
  and the agent's fallback without BPF, `--perf-sw-migrations read`, read
  every `migrations_every` periods). With BPF (the default as root) the
  migrations are one bpf() call whose copy grows by 8 bytes per CPU:
  nothing to scale.

Prometheus node exporter takes --path.procfs/--path.sysfs and is scraped on
the same trees; collectd has no such option and runs on the real machine
only.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hushmon.errors import HushmonError

TEMPLATE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "agent" / "t1"


def make_cpu_tree(dst: Path, ncpu: int, template: Path = TEMPLATE) -> Path:
    """The fixture tree with /proc/stat of ncpu CPUs (random but fixed times)."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(template, dst)
    rnd = random.Random(ncpu)
    total = [0] * 10
    per_cpu = []
    for c in range(ncpu):
        v = [rnd.randint(10**6, 10**8) for _ in range(8)] + [0, 0]
        per_cpu.append(f"cpu{c} " + " ".join(map(str, v)))
        total = [a + b for a, b in zip(total, v, strict=True)]
    nirq = 64 + 4 * ncpu
    intr = " ".join(str(rnd.randint(0, 10**9)) for _ in range(nirq + 1))
    text = (
        "cpu  " + " ".join(map(str, total)) + "\n" + "\n".join(per_cpu) + "\n"
        f"intr {intr}\nctxt 123456789\nbtime 1732270000\nprocesses 4300\n"
        "procs_running 3\nprocs_blocked 1\nsoftirq " + " ".join(["12345"] * 11) + "\n"
    )
    (dst / "proc" / "stat").write_text(text)
    return dst


def measure_cost(agent: Path, cycles: int, *args: str) -> dict[str, float]:
    """Per-source CPU us per sample from `hushmon-agent --measure-cost`."""
    proc = subprocess.run(
        [str(agent), "--measure-cost", str(cycles), "--socket", "", "--sink", "stdout", *args],
        capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise HushmonError(f"{agent} --measure-cost failed: {proc.stderr.strip()[-300:]}")
    costs = {}
    for line in proc.stderr.splitlines():
        m = re.match(r"\s+(\S+)\s+([0-9.]+) us$", line)
        if m:
            costs[m.group(1)] = float(m.group(2))
    if "total" not in costs:
        raise HushmonError(f"unexpected --measure-cost output: {proc.stderr.strip()[-300:]}")
    return costs


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def perf_read_us_per_cpu(
    agent: Path, baseline: Path | None, cycles: int, rounds: int
) -> dict[str, float]:
    """CPU us per CPU of one perf_sw read pass on this machine: the new
    agent reading migrations every period minus never (one counter per
    CPU), and the baseline's whole perf_sw (a group of three per CPU)."""
    ncpu = os.cpu_count() or 1
    every1: list[float] = []
    never: list[float] = []
    base: list[float] = []
    for _ in range(rounds):
        src = ("--sources", "perf_sw", "--perf-sw-migrations", "read")
        every1.append(
            measure_cost(agent, cycles, *src, "--perf-sw-migrations-every", "1")["perf_sw"]
        )
        never.append(
            measure_cost(agent, cycles, *src, "--perf-sw-migrations-every", "0")["perf_sw"]
        )
        if baseline is not None:
            base.append(measure_cost(baseline, cycles, "--sources", "perf_sw")["perf_sw"])
    out = {
        "ncpu_here": float(ncpu),
        "migrations_read_us_per_cpu": max(0.0, _median(every1) - _median(never)) / ncpu,
        "procfs_part_us": _median(never),
    }
    if base:
        out["baseline_perf_sw_us_per_cpu"] = _median(base) / ncpu
    return out


def cpu_scaling(
    agent: Path,
    baseline: Path | None,
    cpus: list[int],
    cycles: int,
    rounds: int,
    work: Path,
    node_exporter: Callable[[Path], Any] | None,
    migrations_every: int = 10,
) -> dict[str, Any]:
    """Per-sample cost at each CPU count, the new agent and the baseline
    alternating per round (the machine's load hits both alike)."""
    per = perf_read_us_per_cpu(agent, baseline, cycles, rounds)
    ncpu_here = int(per["ncpu_here"])
    rows = []
    for n in cpus:
        tree = make_cpu_tree(work / f"cpus{n}", n)
        new_r: list[dict[str, float]] = []
        read_r: list[dict[str, float]] = []
        old_r: list[dict[str, float]] = []
        for _ in range(rounds):
            new_r.append(measure_cost(agent, cycles, "--root", str(tree)))
            read_r.append(
                measure_cost(agent, cycles, "--root", str(tree), "--perf-sw-migrations", "read")
            )
            if baseline is not None:
                old_r.append(measure_cost(baseline, cycles, "--root", str(tree)))
        new = {k: _median([r[k] for r in new_r]) for k in new_r[0]}
        read = {k: _median([r[k] for r in read_r]) for k in read_r[0]}
        row: dict[str, Any] = {"cpus": n, "agent_us": new, "agent_read_us": read}
        # migrations by BPF: one bpf() call whatever N
        row["agent_total_us_at_n"] = new["total"]
        # without BPF: perf reads on the N CPUs a real node has, every N periods
        extra = (n - ncpu_here) * per["migrations_read_us_per_cpu"] / max(migrations_every, 1)
        row["agent_read_total_us_at_n"] = read["total"] + max(extra, 0.0)
        if old_r:
            old = {k: _median([r[k] for r in old_r]) for k in old_r[0]}
            row["baseline_us"] = old
            extra_old = (n - ncpu_here) * per.get("baseline_perf_sw_us_per_cpu", 0.0)
            row["baseline_total_us_at_n"] = old["total"] + max(extra_old, 0.0)
        if node_exporter is not None:
            row["node_exporter"] = node_exporter(tree)
        rows.append(row)
    return {"perf_read": per, "migrations_every": migrations_every, "rows": rows}


def print_scaling(res: dict[str, Any]) -> None:
    per = res["perf_read"]
    print(
        f"\nCost per sample against the CPU count (fixture /proc trees; perf_event reads "
        f"scaled from this machine's {int(per['ncpu_here'])} CPUs: "
        f"{per['migrations_read_us_per_cpu']:.2f} us per CPU per migrations read, read every "
        f"{res['migrations_every']} periods"
        + (
            f"; before: {per['baseline_perf_sw_us_per_cpu']:.2f} us per CPU every period"
            if "baseline_perf_sw_us_per_cpu" in per
            else ""
        )
        + "):"
    )
    print(f"  {'CPUs':>5s} {'cpu src':>8s} {'perf_sw':>8s} {'all, BPF':>9s} {'no BPF':>8s} "
          f"{'before':>8s} {'BPF/before':>10s} {'node exp.':>10s}")  # fmt: skip
    for r in res["rows"]:
        a = r["agent_us"]
        before = r.get("baseline_total_us_at_n")
        ne = r.get("node_exporter")
        ne_us = ne.cpu_us_per_sample if ne is not None else None
        nan = float("nan")
        print(
            f"  {r['cpus']:5d} {a.get('cpu', nan):8.1f} {a.get('perf_sw', nan):8.1f} "
            f"{r['agent_total_us_at_n']:9.1f} {r['agent_read_total_us_at_n']:8.1f} "
            f"{before if before is not None else float('nan'):8.1f} "
            f"{(r['agent_total_us_at_n'] / before) if before else float('nan'):10.2f} "
            f"{ne_us if ne_us is not None else float('nan'):10.1f}"
        )
