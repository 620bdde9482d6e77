"""What monitoring a node costs: hushmon-agent next to what users would run
instead, and next to the kernel's own cost of producing the files.

Prints, in one run on this machine:

1. The kernel's cost of producing the files the agent's default node
   sources read (/proc/stat, loadavg, meminfo, vmstat, diskstats, net/dev):
   CPU time of reading each one with pread() in a tight loop.
2. hushmon-agent's own CPU time per sample for those sources
   (`hushmon-agent --measure-cost`, CPU clock of the agent's thread,
   cycles back to back) next to (1), as a ratio; plus what the other
   default sources add. (1) and (2) alternate for --rounds rounds and the
   medians are shown, so a change in the machine's load (other users of a
   shared box) hits both sides alike. Then the same once per period
   (--cold-samples reads / cycles, one per period): what each costs when it
   starts with cold caches, as it does in the daemon.
3. Side by side, sampling at the same period for the same wall time:
   hushmon-agent (default sources, spool sink), Prometheus node exporter
   (Debian package, default collectors, scraped over loopback once per
   period) and collectd (Debian collectd-core: cpu, load, memory, vmem,
   swap, disk, interface, contextswitch, csv writer): CPU microseconds per
   sample (all threads, from /proc/<pid>/task/*/schedstat, and never less
   than the process's utime+stime) and resident size (VmRSS, largest seen),
   with ratios to hushmon-agent.

4. The agent's sinks side by side (`--sinks`, or alone with
   `--sinks-only`): the same agent (default sources) with sink spool and
   with sink nats publishing to a local nats-server with the streams of
   docs/transport.md, alternating for --rounds rounds, CPU microseconds per
   sample of all the agent's threads (libnats' too), medians and the
   ratio nats / spool. The goal (issue 10): at most 1.10.

Not a test: nothing is asserted; the figures go to docs/agent.md and
docs/transport.md ("Agent sink cost").

    .venv/bin/python bench/bench_agent_cost.py [--period-ms 500] [--duration-s 10]
        [--sinks | --sinks-only] [--json FILE|-] [--html FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.errors import HushmonError
from hushmon.overhead.modes import collectd
from hushmon.paths import program
from hushmon.procstat import pid_cpu_s, process_cpu_s, rss_kib

KERNEL_FILES = (
    ("cpu", "/proc/stat"),
    ("load", "/proc/loadavg"),
    ("mem", "/proc/meminfo"),
    ("vm", "/proc/vmstat"),
    ("disk", "/proc/diskstats"),
    ("net", "/proc/net/dev"),
)
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class ToolCost:
    tool: str
    samples: int
    cpu_us_per_sample: float
    rss_bytes: int
    note: str


def kernel_cost_us(iterations: int) -> dict[str, float]:
    """CPU microseconds the kernel spends producing each file once.

    The Python call overhead is measured on /dev/zero and subtracted, so
    what is left is the kernel's generation of the text.
    """
    buf_size = 1 << 16
    zero = os.open("/dev/zero", os.O_RDONLY)
    t0 = time.thread_time_ns()
    for _ in range(iterations):
        os.pread(zero, 64, 0)
    call_overhead_ns = (time.thread_time_ns() - t0) / iterations
    os.close(zero)
    costs = {}
    for name, path in KERNEL_FILES:
        fd = os.open(path, os.O_RDONLY)
        t0 = time.thread_time_ns()
        for _ in range(iterations):
            os.pread(fd, buf_size, 0)
        per_read_ns = (time.thread_time_ns() - t0) / iterations - call_overhead_ns
        os.close(fd)
        costs[name] = max(per_read_ns, 0.0) / 1e3
    return costs


def kernel_cold_cost_us(samples: int, period_s: float) -> dict[str, float]:
    """Like kernel_cost_us, one read of each file per period (cold caches)."""
    fds = {name: os.open(path, os.O_RDONLY) for name, path in KERNEL_FILES}
    totals = dict.fromkeys(fds, 0.0)
    for _ in range(samples):
        time.sleep(period_s)
        for name, fd in fds.items():
            t0 = time.thread_time_ns()
            os.pread(fd, 1 << 16, 0)
            totals[name] += (time.thread_time_ns() - t0) / 1e3
    for fd in fds.values():
        os.close(fd)
    return {name: total / samples for name, total in totals.items()}


def agent_source_cost_us(
    agent: Path, cycles: int, spool: Path, gap_ms: int = 0
) -> dict[str, float]:
    """Per-source CPU microseconds per sample from --measure-cost."""
    from agent_cpus import measure_cost

    return measure_cost(
        agent, cycles, "--measure-cost-gap-ms", str(gap_ms), "--sink", "spool",
        "--spool-dir", str(spool),
    )  # fmt: skip


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of pid, in ns: the larger of the summed
    per-thread schedstat (precise) and utime+stime (counts exited threads)."""
    return int(1e9 * max(pid_cpu_s(pid), process_cpu_s(f"/proc/{pid}/stat")))


def rss_bytes(pid: int) -> int:
    return rss_kib(pid) * 1024


def wait_for(check: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise HushmonError(f"timed out waiting for {what}")


def measure_process(
    proc: subprocess.Popen[bytes], pid: int, period_s: float, duration_s: float, tick: Any = None
) -> tuple[int, float, int]:
    """Samples, CPU us per sample and peak RSS of pid over duration_s after
    a warm-up of two periods. tick() runs once per period (a scrape)."""
    time.sleep(2 * period_s)
    start_cpu = cpu_ns(pid)
    peak = rss_bytes(pid)
    start = time.monotonic()
    periods = 0
    while time.monotonic() - start < duration_s:
        if tick is not None:
            tick()
        periods += 1
        next_at = start + periods * period_s
        time.sleep(max(0.0, next_at - time.monotonic()))
        peak = max(peak, rss_bytes(pid))
        if proc.poll() is not None:
            raise HushmonError(f"{proc.args!r} exited early with {proc.returncode}")
    used = cpu_ns(pid) - start_cpu
    return periods, used / 1e3 / max(periods, 1), peak


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_agent(
    agent: Path, period_ms: int, duration_s: float, work: Path, sources: str = "default"
) -> ToolCost:
    pidfile = work / f"agent-{sources}.pid"
    proc = subprocess.Popen(
        [str(agent), "--period-ms", str(period_ms), "--spool-dir", str(work / f"spool-{sources}"),
         "--socket", "", "--pidfile", str(pidfile), "--sources", sources],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(pidfile.exists, 10, "hushmon-agent to start")
        pid = int(pidfile.read_text())
        samples, us, rss = measure_process(proc, pid, period_ms / 1e3, duration_s)
    finally:
        stop(proc)
    if sources == "default":
        return ToolCost("hushmon-agent", samples, us, rss, "default sources, spool sink")
    return ToolCost(f"hushmon-agent ({sources} only)", samples, us, rss,
                    "the fixed cost of waking up each period")  # fmt: skip


def run_agent_sink(
    agent: Path, sink: str, period_ms: int, duration_s: float, work: Path, url: str = ""
) -> ToolCost:
    """The agent with default sources and one sink; all threads' CPU per sample.
    sink "nats-base" is sink nats of another build (--baseline-agent)."""
    tag = f"{sink}-{len(list(work.iterdir()))}"
    pidfile = work / f"agent-{tag}.pid"
    extra = ["--nats-url", url, "--nats-rack", "r0"] if sink.startswith("nats") else []
    sink_type = "nats" if sink.startswith("nats") else sink
    proc = subprocess.Popen(
        [str(agent), "--period-ms", str(period_ms), "--spool-dir", str(work / f"spool-{tag}"),
         "--socket", "", "--pidfile", str(pidfile), "--sink", sink_type, "--host", "bench", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(pidfile.exists, 10, "hushmon-agent to start")
        wait_for(lambda: pidfile.read_text().strip() != "", 10, "the pidfile")
        pid = int(pidfile.read_text())
        samples, us, rss = measure_process(proc, pid, period_ms / 1e3, duration_s)
    finally:
        stop(proc)
    return ToolCost(f"hushmon-agent sink {sink}", samples, us, rss, "default sources")


def sink_costs(
    agent: Path,
    period_ms: int,
    duration_s: float,
    rounds: int,
    work: Path,
    baseline: Path | None = None,
    nats_url: str = "",
) -> dict[str, Any]:
    """Sink spool and sink nats, alternating; medians and the ratio. With
    baseline, sink nats of that build too ("nats-base"), in the same rounds.
    nats_url: a server already running (its streams are declared) instead
    of a local one on loopback."""
    from hushmon.transport.natsserver import LocalNatsServer, NatsServerConfig, ensure_streams

    work.mkdir(parents=True, exist_ok=True)
    server = LocalNatsServer(NatsServerConfig(name="bench", store_dir=work / "js"), work)
    if not nats_url:
        server.start()
    url = nats_url or server.url
    sinks = ("spool", "nats") if baseline is None else ("spool", "nats", "nats-base")
    runs: dict[str, list[ToolCost]] = {sink: [] for sink in sinks}
    try:
        ensure_streams(url)
        for r in range(rounds):
            for sink in sinks:
                print(f"sinks round {r + 1}/{rounds}: {sink}, {duration_s:g} s "
                      f"at {period_ms} ms ...", file=sys.stderr)  # fmt: skip
                binary = baseline if sink == "nats-base" and baseline is not None else agent
                runs[sink].append(run_agent_sink(binary, sink, period_ms, duration_s, work, url))
    finally:
        server.stop()
    med = {k: statistics.median(t.cpu_us_per_sample for t in v) for k, v in runs.items()}
    rss = {k: max(t.rss_bytes for t in v) for k, v in runs.items()}
    return {
        "period_ms": period_ms,
        "duration_s": duration_s,
        "rounds": rounds,
        "cpu_us_per_sample": med,
        "cpu_us_per_sample_rounds": {k: [t.cpu_us_per_sample for t in v] for k, v in runs.items()},
        "rss_bytes": rss,
        "ratio": med["nats"] / med["spool"] if med["spool"] > 0 else float("nan"),
        "ratio_base": (
            med["nats-base"] / med["spool"] if "nats-base" in med and med["spool"] > 0 else None
        ),
        "baseline_agent": str(baseline) if baseline is not None else None,
        "nats_url": url,
        "server": "given (--nats-url)" if nats_url else "local, loopback",
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
    }


def print_sink_costs(c: dict[str, Any]) -> None:
    print(f"\nSinks, default sources, period {c['period_ms']} ms, {c['duration_s']:g} s each, "
          f"median of {c['rounds']} alternating rounds (all threads); nats-server "
          f"{c['nats_url']} ({c['server']}):")  # fmt: skip
    for sink in c["cpu_us_per_sample"]:
        rounds = ", ".join(f"{v:.1f}" for v in c["cpu_us_per_sample_rounds"][sink])
        print(f"  {sink:9s} {c['cpu_us_per_sample'][sink]:8.1f} us/sample  "
              f"RSS {c['rss_bytes'][sink] / 2**20:5.2f} MiB  (rounds: {rounds})")  # fmt: skip
    if c.get("ratio_base") is not None:
        print(f"  nats-base / spool = {c['ratio_base']:.3f}  (nats-base: {c['baseline_agent']})")
    print(f"  nats / spool = {c['ratio']:.3f}  (goal <= 1.10; load average at the end "
          f"{' '.join(c['loadavg'])})")  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_node_exporter(
    period_ms: int, duration_s: float, work: Path, extra_args: Sequence[str] = ()
) -> ToolCost:
    exe = shutil.which("prometheus-node-exporter")
    if exe is None:
        raise HushmonError("prometheus-node-exporter not installed (make deps)")
    port = free_port()
    proc = subprocess.Popen(
        [exe, f"--web.listen-address=127.0.0.1:{port}",
         f"--collector.textfile.directory={work}", *extra_args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"
    sizes: list[int] = []

    def scrape() -> None:
        with urllib.request.urlopen(url, timeout=10) as response:
            sizes.append(len(response.read()))

    def ready() -> bool:
        try:
            scrape()
            return True
        except OSError:
            return False

    try:
        wait_for(ready, 15, "node exporter to answer")
        samples, us, rss = measure_process(proc, proc.pid, period_ms / 1e3, duration_s, scrape)
    finally:
        stop(proc)
    note = f"default collectors, 1 scrape per period ({sizes[-1] // 1024} KiB of text)"
    return ToolCost("prometheus-node-exporter", samples, us, rss, note)


def run_collectd(period_ms: int, duration_s: float, work: Path) -> ToolCost:
    exe = collectd.executable()
    if exe is None:
        raise HushmonError("collectd not installed (make deps)")
    conf = work / "collectd.conf"
    # Every sensor of hushmon's agent: vmem, swap and context switches too.
    plugins = (*collectd.STANDARD_PLUGINS, "vmem", "swap", "contextswitch")
    conf.write_text(collectd.config_text(work, period_ms / 1e3, plugins))
    proc = subprocess.Popen(
        [exe, "-f", "-C", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        samples, us, rss = measure_process(proc, proc.pid, period_ms / 1e3, duration_s)
    finally:
        stop(proc)
    return ToolCost("collectd", samples, us, rss, "cpu load memory vmem swap disk interface "
                    "contextswitch + csv writer")  # fmt: skip


def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 else "-"


def html_report(result: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    from hushmon.report.html import Page

    tools = result["tools"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    names = [t["tool"].replace("prometheus-", "") for t in tools]
    colors = ["#2d6cdf" if t["tool"] == "hushmon-agent" else "#999" for t in tools]
    axes[0].barh(names, [t["cpu_us_per_sample"] for t in tools], color=colors)
    axes[0].set_xscale("log")
    axes[0].set_xlabel("CPU µs per sample (log scale)")
    axes[1].barh(names, [t["rss_bytes"] / 2**20 for t in tools], color=colors)
    axes[1].set_xlabel("resident size, MiB")
    for ax in axes:
        ax.invert_yaxis()
    fig.tight_layout()
    page = Page("Cost of node monitoring on this machine")
    page.meta([("host", result["host"]), ("period", f"{result['period_ms']} ms"),
               ("duration per tool", f"{result['duration_s']} s")])  # fmt: skip
    page.figure(fig, "hushmon-agent (blue) next to the agents users would pick instead")
    agent_us = tools[0]["cpu_us_per_sample"]
    agent_rss = tools[0]["rss_bytes"]
    rows = [
        (t["tool"], t["samples"], f"{t['cpu_us_per_sample']:.1f}",
         ratio(t["cpu_us_per_sample"], agent_us), f"{t['rss_bytes'] / 2**20:.2f}",
         ratio(t["rss_bytes"], agent_rss), t["note"])
        for t in tools
    ]  # fmt: skip
    page.table(["tool", "samples", "CPU µs/sample", "vs agent", "RSS MiB", "vs agent", "setup"],
               rows, text_columns=(0, 3, 5, 6))  # fmt: skip
    page.paragraph(
        "CPU time per sample: all threads of each process over the measured time, divided by "
        "the periods; the agent and collectd sample by themselves, node exporter is scraped "
        "once per period. The 'self only' row is what waking up once per period costs."
    )
    page.heading("The agent against the kernel's own cost")
    k = result["kernel_us"]
    a = result["agent_source_us"]
    page.table(["source", "kernel µs (pread of the file)", "agent µs (read + parse + format)",
                "agent / kernel"],
               [(n, k[n], a.get(n, float("nan")), ratio(a.get(n, 0), k[n])) for n in k]
               + [("all six", sum(k.values()), result["agent_files_us"],
                   ratio(result["agent_files_us"], sum(k.values())))],
               text_columns=(0, 3))  # fmt: skip
    page.paragraph(
        f"Median of {result['rounds']} alternating rounds of {result['cycles_per_round']} reads "
        "(kernel) and cycles (agent), back to back, so both run with warm caches."
    )
    kc = result["kernel_cold_us"]
    ac = result["agent_source_cold_us"]
    page.heading("The same, one sample per period (cold caches)", level=3)
    page.table(["source", "kernel µs", "agent µs", "agent / kernel"],
               [(n, kc[n], ac.get(n, float("nan")), ratio(ac.get(n, 0), kc[n])) for n in kc]
               + [("all six", sum(kc.values()), result["agent_files_cold_us"],
                   ratio(result["agent_files_cold_us"], sum(kc.values())))],
               text_columns=(0, 3))  # fmt: skip
    page.paragraph(
        f"One read of each file (kernel) and one agent cycle per period, "
        f"{result['cold_samples']} samples: "
        "what each costs when it starts with cold caches, as in the daemon."
    )
    page.write(path)


def run_cpu_scaling(args: argparse.Namespace, agent: Path) -> dict[str, Any]:
    """Cost per sample against the CPU count (bench/agent_cpus.py)."""
    from agent_cpus import cpu_scaling, print_scaling

    try:
        cpus = [int(x) for x in (args.cpus or "16,64,192").split(",")]
    except ValueError as exc:
        raise HushmonError(f"--cpus: expected a list like 16,64,192: {exc}") from exc
    if not cpus or min(cpus) < 1:
        raise HushmonError("--cpus: CPU counts must be positive")
    with tempfile.TemporaryDirectory(prefix="hm_bench_cpus_") as tmp:
        work = Path(tmp)
        period_ms = 200

        def node_exporter(tree: Path) -> ToolCost:
            return run_node_exporter(
                period_ms, args.duration_s, work,
                [f"--path.procfs={tree}/proc", f"--path.sysfs={tree}/sys"],
            )  # fmt: skip

        print(f"cpu scaling: {cpus} CPUs, {args.rounds} rounds of {args.cycles} cycles ...",
              file=sys.stderr)  # fmt: skip
        res = cpu_scaling(
            agent, args.baseline_agent, cpus, args.cycles, args.rounds, work,
            node_exporter if shutil.which("prometheus-node-exporter") else None,
        )  # fmt: skip
        if shutil.which("collectd") or Path("/usr/sbin/collectd").exists():
            res["collectd_here"] = asdict(run_collectd(1000, args.duration_s, work))
    print_scaling(res)
    if "collectd_here" in res:
        c = res["collectd_here"]
        print(f"  collectd on this machine ({os.cpu_count()} CPUs, 1 s, no --root): "
              f"{c['cpu_us_per_sample']:.1f} us per sample")  # fmt: skip
    for r in res["rows"]:
        if isinstance(r.get("node_exporter"), ToolCost):
            r["node_exporter"] = asdict(r["node_exporter"])
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--period-ms", type=int, default=500, help="sampling period (default 500)")
    ap.add_argument("--duration-s", type=float, default=10.0, help="measured time per tool")
    ap.add_argument("--cycles", type=int, default=2000, help="reads / cycles per round")
    ap.add_argument("--rounds", type=int, default=5, help="alternating kernel/agent rounds")
    ap.add_argument("--cold-samples", type=int, default=20, help="reads/cycles one per period")
    ap.add_argument(
        "--sinks",
        action="store_true",
        help="also compare sink spool and sink nats (local nats-server)",
    )
    ap.add_argument("--sinks-only", action="store_true", help="only the sink comparison")
    ap.add_argument(
        "--baseline-agent",
        type=Path,
        metavar="PATH",
        help="also sink nats of this hushmon-agent build (before/after in the same rounds)",
    )
    ap.add_argument(
        "--nats-url",
        default="",
        help="use this running nats-server (e.g. in another network namespace) "
        "instead of starting one on loopback",
    )
    ap.add_argument(
        "--cpus",
        metavar="LIST",
        help="also the cost per sample on fixture /proc trees of these CPU counts "
        "(e.g. 16,64,192), the --baseline-agent beside it, node exporter on the same trees",
    )
    ap.add_argument("--cpus-only", action="store_true", help="only the --cpus comparison")
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON ('-' = stdout)")
    ap.add_argument("--html", metavar="FILE", help="write an HTML page with plots")
    args = ap.parse_args(argv)
    if (
        args.period_ms < 10
        or args.duration_s <= 0
        or min(args.cycles, args.rounds, args.cold_samples) < 1
    ):
        raise HushmonError(
            "--period-ms >= 10, --duration-s > 0, --cycles, --rounds, --cold-samples >= 1"
        )
    agent = program("hushmon-agent")
    if args.cpus_only:
        scaling = run_cpu_scaling(args, agent)
        jsonio.emit(args.json, {"host": socket.gethostname(), "cpu_scaling": scaling})
        return 0
    if args.sinks_only:
        with tempfile.TemporaryDirectory(prefix="hm_bench_agent_") as tmp:
            costs = sink_costs(
                agent,
                args.period_ms,
                args.duration_s,
                args.rounds,
                Path(tmp),
                args.baseline_agent,
                args.nats_url,
            )
        print_sink_costs(costs)
        jsonio.emit(args.json, {"host": socket.gethostname(), "sinks": costs})
        return 0
    with tempfile.TemporaryDirectory(prefix="hm_bench_agent_") as tmp:
        work = Path(tmp)
        kernel_rounds: list[dict[str, float]] = []
        agent_rounds: list[dict[str, float]] = []
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}: kernel reads, then agent cycles "
                  f"({args.cycles} each) ...", file=sys.stderr)  # fmt: skip
            kernel_rounds.append(kernel_cost_us(args.cycles))
            agent_rounds.append(agent_source_cost_us(agent, args.cycles, work / f"cost-{r}"))
        kernel = {n: statistics.median(k[n] for k in kernel_rounds) for n in kernel_rounds[0]}
        sources = {n: statistics.median(a[n] for a in agent_rounds) for n in agent_rounds[0]}
        period_s = args.period_ms / 1e3
        print(f"cold: {args.cold_samples} kernel reads and agent cycles, one per period ...",
              file=sys.stderr)  # fmt: skip
        kernel_cold = kernel_cold_cost_us(args.cold_samples, period_s)
        sources_cold = agent_source_cost_us(
            agent, args.cold_samples, work / "cost-cold", gap_ms=args.period_ms
        )
        tools = []
        for label, runner in (
            ("hushmon-agent", lambda: run_agent(agent, args.period_ms, args.duration_s, work)),
            ("node exporter", lambda: run_node_exporter(args.period_ms, args.duration_s, work)),
            ("collectd", lambda: run_collectd(args.period_ms, args.duration_s, work)),
            (
                "hushmon-agent, self only",
                lambda: run_agent(agent, args.period_ms, args.duration_s, work, "self"),
            ),
        ):
            print(f"{label}: {args.duration_s:g} s at {args.period_ms} ms ...", file=sys.stderr)
            tools.append(runner())
        sinks = (
            sink_costs(agent, args.period_ms, args.duration_s, args.rounds, work / "sinks")
            if args.sinks
            else None
        )
    file_sources = [n for n, _ in KERNEL_FILES]
    agent_files = sum(sources.get(n, 0.0) for n in file_sources)
    result: dict[str, Any] = {
        "host": socket.gethostname(),
        "period_ms": args.period_ms,
        "duration_s": args.duration_s,
        "rounds": args.rounds,
        "cycles_per_round": args.cycles,
        "kernel_us": kernel,
        "kernel_us_rounds": kernel_rounds,
        "agent_source_us_rounds": agent_rounds,
        "agent_source_us": sources,
        "agent_files_us": agent_files,
        "cold_samples": args.cold_samples,
        "kernel_cold_us": kernel_cold,
        "agent_source_cold_us": sources_cold,
        "agent_files_cold_us": sum(sources_cold.get(n, 0.0) for n in [n for n, _ in KERNEL_FILES]),
        "tools": [asdict(t) for t in tools],
        "sinks": sinks,
    }
    print(f"\nKernel vs hushmon-agent, CPU us per sample (median of {args.rounds} rounds of "
          f"{args.cycles}, back to back):")  # fmt: skip
    print(f"  {'source':8s} {'kernel':>8s} {'agent':>8s} {'ratio':>6s}")
    for name in file_sources:
        k, a = kernel[name], sources.get(name, float("nan"))
        print(f"  {name:8s} {k:8.2f} {a:8.2f} {ratio(a, k):>6s}")
    k_all = sum(kernel.values())
    print(f"  {'6 files':8s} {k_all:8.2f} {agent_files:8.2f} {ratio(agent_files, k_all):>6s}")
    others = {n: v for n, v in sources.items() if n not in file_sources and n != "total"}
    print("  other default sources: " + ", ".join(f"{n} {v:.2f}" for n, v in others.items()))
    print(f"  all sources + sink: {sources['total']:.2f} us per sample")
    print(f"\nThe same, one sample per period ({args.period_ms} ms, {args.cold_samples} samples, "
          "cold caches):")  # fmt: skip
    print(f"  {'source':8s} {'kernel':>8s} {'agent':>8s} {'ratio':>6s}")
    for name in file_sources:
        k, a = kernel_cold[name], sources_cold.get(name, float("nan"))
        print(f"  {name:8s} {k:8.2f} {a:8.2f} {ratio(a, k):>6s}")
    kc_all, ac_all = sum(kernel_cold.values()), result["agent_files_cold_us"]
    print(f"  {'6 files':8s} {kc_all:8.2f} {ac_all:8.2f} {ratio(ac_all, kc_all):>6s}")
    others = {n: v for n, v in sources_cold.items() if n not in file_sources and n != "total"}
    print("  other default sources: " + ", ".join(f"{n} {v:.2f}" for n, v in others.items()))
    print(f"  all sources + sink: {sources_cold['total']:.2f} us per sample")
    agent_us, agent_rss = tools[0].cpu_us_per_sample, tools[0].rss_bytes
    print(f"\nSide by side, period {args.period_ms} ms, {args.duration_s:g} s each:")
    print(f"  {'tool':26s} {'samples':>7s} {'CPU us/sample':>14s} {'ratio':>7s} "
          f"{'RSS MiB':>8s} {'ratio':>6s}")  # fmt: skip
    for t in tools:
        print(f"  {t.tool:26s} {t.samples:7d} {t.cpu_us_per_sample:14.1f} "
              f"{ratio(t.cpu_us_per_sample, agent_us):>7s} {t.rss_bytes / 2**20:8.2f} "
              f"{ratio(t.rss_bytes, agent_rss):>6s}  {t.note}")  # fmt: skip
    if sinks is not None:
        print_sink_costs(sinks)
    if args.cpus:
        result["cpu_scaling"] = run_cpu_scaling(args, agent)
    jsonio.emit(args.json, result)
    if args.html:
        html_report(result, Path(args.html))
        print(f"\nreport: {args.html}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HushmonError as exc:
        print(f"bench_agent_cost: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code if hasattr(exc, "exit_code") else 1)
