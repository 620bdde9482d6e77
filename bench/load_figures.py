"""Figures of bench_transport_load.py from its daemons' samples: the table of
CPU share and resident size per daemon each minute, memory growth, and each
daemon kind's CPU per 1000 agents with the projection to 10,000 nodes."""

from __future__ import annotations

from dataclasses import dataclass

from load_daemons import KINDS, Daemon

FLAT_GROWTH = 0.10
PROJECT_TO_NODES = 10_000


def short_name(name: str) -> str:
    return (
        name.replace("reduce-top", "top")
        .replace("reduce-", "red-")
        .replace("collect-", "coll-")
        .replace("loadgen-", "gen-")
    )


def table_header(daemons: list[Daemon]) -> list[str]:
    return [
        "    t  " + " ".join(f"{short_name(d.name):>12}" for d in daemons) + "   lag (s)",
        "       " + " ".join(f"{'CPU% / MiB':>12}" for _ in daemons),
    ]


def table_row(t_from: float, t_to: float, daemons: list[Daemon], lag_s: float) -> str:
    """CPU share over (t_from, t_to] and resident MiB at t_to, per daemon."""
    cells = []
    for d in daemons:
        last = d.at(t_to)
        if last is None:
            cells.append(f"{'-':>12}")
            continue
        share = d.cpu_between(t_from, t_to) / max(t_to - t_from, 1e-9) * 100
        cells.append(f"{share:5.0f} / {last[1] / 1024:4.0f}")
    return f"{t_to:5.0f}  " + " ".join(f"{c:>12}" for c in cells) + f"  {lag_s:8.1f}"


def memory_growth(daemons: list[Daemon], t_first: float, t_last: float) -> dict[str, float]:
    """Resident size growth of each daemon from t_first to t_last (fractions)."""
    out = {}
    for d in daemons:
        a, b = d.at(t_first), d.at(t_last)
        if a and b and a[1]:
            out[d.name] = (b[1] - a[1]) / a[1]
    return out


def growth_line(what: str, growth: dict[str, float]) -> str:
    flat = all(g < FLAT_GROWTH for g in growth.values())
    return (
        f"   memory {what}: "
        + ", ".join(f"{short_name(k)} {v * 100:+.0f} %" for k, v in growth.items())
        + (" (all flat: under 10 %)" if flat else " (NOT all flat)")
    )


def rss_points(
    a: float, load_from: float, load_end: float, warmup_s: float
) -> tuple[float, float, float, str]:
    """Times of the resident-size table: the load's start (its first
    seconds in), the end of the warm-up (the reducers' --keep-s window
    full) and the end of the load; a run too short for the warm-up plus a
    minute has its warm point at the middle, said in the note."""
    start = load_from + min(a, (load_end - load_from) / 4)
    warm = load_from + warmup_s
    note = f"warm-up {warmup_s:.0f} s"
    if warm + 60 > load_end:
        warm = (start + load_end) / 2
        note = f"run too short for a {warmup_s:.0f} s warm-up: its middle instead"
    return start, warm, load_end, note


def rss_lines(daemons: list[Daemon], start: float, warm: float, end: float, note: str) -> list[str]:
    """Each daemon's resident MiB at the three points, and its growth after
    the warm-up: flat when under FLAT_GROWTH."""
    out = [
        f"   resident MiB at t={start:.0f} s (start) / {warm:.0f} s ({note}) / {end:.0f} s "
        "(end of the load), growth after the warm-up:"
    ]
    for d in daemons:
        pts = [d.at(t) for t in (start, warm, end)]
        if any(p is None for p in pts):
            out.append(f"     {d.name:<14} (not sampled at every point: exited?)")
            continue
        mib = [p[1] / 1024 for p in pts if p is not None]
        growth = (mib[2] - mib[1]) / mib[1] if mib[1] else 0.0
        flat = "flat" if growth < FLAT_GROWTH else "NOT flat"
        out.append(
            f"     {d.name:<14} {mib[0]:7.1f} / {mib[1]:7.1f} / {mib[2]:7.1f}  "
            f"{growth * 100:+5.1f} % ({flat})"
        )
    return out


def rss_json(
    daemons: list[Daemon], start: float, warm: float, end: float
) -> dict[str, list[float]]:
    """name -> resident MiB at start, warm-up, end (-1 where not sampled)."""
    out = {}
    for d in daemons:
        pts = [d.at(t) for t in (start, warm, end)]
        out[d.name] = [p[1] / 1024 if p else -1.0 for p in pts]
    return out


@dataclass
class KindCost:
    kind: str
    processes: int
    cpu_s: float  # over the whole run: load and drain
    batches: int  # the units that work was for: batches, or summary messages
    share_load: float  # cores in the steady load (after the first minute)
    peak_rss_mib: float
    unit: str = "batch"  # what `batches` counts: its work grows with them
    run_s: float = 0.0  # for a kind per summary message: the run's length

    @property
    def per_batch(self) -> bool:
        return self.unit == "batch"

    @property
    def cpu_us_per_batch(self) -> float:
        """CPU per unit (a batch, or a summary message) in microseconds."""
        return self.cpu_s / self.batches * 1e6 if self.batches else 0.0

    @property
    def cores_per_1000(self) -> float:
        """Cores for 1000 agents at 1 Hz: CPU per batch x 1000 batches/s (0 for a
        kind whose work grows with summary messages, not with agents)."""
        return self.cpu_us_per_batch * 1e-6 * 1000 if self.per_batch else 0.0

    @property
    def cores_here(self) -> float:
        """A per-message kind's cores at this run's message rate."""
        return self.cpu_s / self.run_s if self.run_s > 0 else 0.0

    def to_json(self) -> dict[str, float | int | str]:
        return {
            "kind": self.kind,
            "processes": self.processes,
            "unit": self.unit,
            "cpu_s": self.cpu_s,
            "units": self.batches,
            "share_load_cores": self.share_load,
            "cpu_us_per_unit": self.cpu_us_per_batch,
            "cores_per_1000_agents": self.cores_per_1000,
            "peak_rss_mib": self.peak_rss_mib,
        }


def kind_costs(
    daemons: list[Daemon], published: int, stored: int, t_steady: float, t_load_end: float
) -> list[KindCost]:
    """Each kind's CPU over the run per batch it handled (the collectors': per
    batch stored, the rest: per batch published)."""
    out = []
    for kind, _prefix in KINDS:
        mine = [d for d in daemons if d.kind == kind]
        if not mine:
            continue
        out.append(
            KindCost(
                kind=kind,
                processes=len(mine),
                cpu_s=sum(d.cpu_total() for d in mine),
                batches=stored if kind == "collector" else published,
                share_load=sum(d.cpu_between(t_steady, t_load_end) for d in mine)
                / max(t_load_end - t_steady, 1e-9),
                peak_rss_mib=sum(max((s[1] for s in d.samples), default=0) for d in mine) / 1024,
            )
        )
    return out


def split_collectors(
    costs: list[KindCost],
    daemons: list[Daemon],
    stored_by: dict[str, int],
    summary_messages: int,
    run_s: float,
    t_steady: float,
    t_load_end: float,
) -> list[KindCost]:
    """The collectors as two kinds when the first takes the summaries and the
    others raw batches only: the raw path's CPU per batch is the raw-only
    collectors' (CPU / batches they stored), charged for the first one's raw
    batches too; the rest of the first one's CPU is the summaries', per
    summary message (rack partials and job summaries: they come per rack, job
    and period whatever the node count; at 200-500 agents a message cost the
    same on this machine).
    `stored_by`: batches each collector stored (its report). Unchanged when a
    report is missing or there is no raw-only collector."""
    mine = sorted((d for d in daemons if d.kind == "collector"), key=lambda d: d.name)
    if len(mine) < 2 or any(d.name not in stored_by for d in mine):
        return costs
    first, rest = mine[0], mine[1:]
    rest_batches = sum(stored_by[d.name] for d in rest)
    if rest_batches == 0:
        return costs
    rest_cpu = sum(d.cpu_total() for d in rest)
    first_raw_cpu = stored_by[first.name] * rest_cpu / rest_batches
    peak = {d.name: max((s[1] for s in d.samples), default=0) / 1024 for d in mine}
    raw = KindCost(
        kind="collector, raw path",
        # a --summaries-only first collector stored no raw batch
        processes=len(rest) + (1 if stored_by[first.name] else 0),
        cpu_s=rest_cpu + first_raw_cpu,
        batches=rest_batches + stored_by[first.name],
        share_load=sum(d.cpu_between(t_steady, t_load_end) for d in rest)
        / max(t_load_end - t_steady, 1e-9),
        peak_rss_mib=sum(peak[d.name] for d in rest),
    )
    summaries = KindCost(
        kind="collector, summaries",
        processes=1,
        cpu_s=max(0.0, first.cpu_total() - first_raw_cpu),
        batches=summary_messages,
        share_load=first.cpu_between(t_steady, t_load_end) / max(t_load_end - t_steady, 1e-9),
        peak_rss_mib=peak[first.name],
        unit="summary message",
        run_s=run_s,
    )
    out: list[KindCost] = []
    for c in costs:
        out.extend([raw, summaries] if c.kind == "collector" else [c])
    return out


def projection_lines(costs: list[KindCost], agents: int, cpus: int) -> list[str]:
    """Per kind: the arithmetic from CPU per batch to cores for 10,000 nodes
    (a kind per summary message: its cost per message and at this run's rate);
    then how many agents this machine holds and which kind uses most."""
    scale = PROJECT_TO_NODES / 1000
    lines = [
        f"   kind (processes): CPU-s over the run / batches = CPU per batch -> x 1000 batches/s "
        f"= cores per 1000 agents -> x {scale:.0f} = cores for {PROJECT_TO_NODES:,} nodes at 1 Hz"
        f" (cores in the steady load at {agents:,} agents)"
    ]
    for c in costs:
        if c.per_batch:
            lines.append(
                f"   {c.kind} ({c.processes}): {c.cpu_s:.1f} / {c.batches:,} = "
                f"{c.cpu_us_per_batch:.1f} us -> {c.cores_per_1000:.3f} -> "
                f"{c.cores_per_1000 * scale:.2f} cores ({c.share_load:.2f} measured)"
            )
        else:
            lines.append(
                f"   {c.kind} ({c.processes}): {c.cpu_s:.1f} / {c.batches:,} {c.unit}s = "
                f"{c.cpu_us_per_batch / 1000:.1f} ms per {c.unit}; {c.cores_here:.2f} cores at "
                f"this run's {c.batches / c.run_s if c.run_s else 0:.0f} per s ({c.share_load:.2f} "
                f"measured, the whole process): it grows with racks x jobs, not nodes "
                "(bench/sizing.py)"
            )
    site = [c for c in costs if not c.kind.startswith("loadgen")]
    per_1000_site = sum(c.cores_per_1000 for c in site)
    per_1000_all = sum(c.cores_per_1000 for c in costs)
    fixed = sum(c.cores_here for c in costs if not c.per_batch)
    lines.append(
        f"   the site's daemons per batch together: {per_1000_site:.3f} cores per 1000 agents "
        f"-> {per_1000_site * scale:.1f} cores for {PROJECT_TO_NODES:,} nodes, plus the summary "
        "collector's per message (the load generator is the agents' side and not counted)"
    )
    if per_1000_all > 0:
        biggest = max(site, key=lambda c: c.cores_per_1000 or c.cores_here)
        lines.append(
            f"   this machine's {cpus} CPUs hold about "
            f"{max(0.0, cpus - fixed) / per_1000_all * 1000:,.0f} agents with everything on "
            f"them: ({cpus} - {fixed:.2f} cores of summaries at this rate) / {per_1000_all:.3f} "
            f"cores per 1000 (the daemons and the load generator); the largest consumer here is "
            f"the {biggest.kind}"
        )
    return lines
