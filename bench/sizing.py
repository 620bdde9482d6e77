"""The sizing rule a site needs: nodes x sensors x rate -> rack reducers,
collectors, hub and leaf CPU, disk per day, from what
bench_transport_load.py measured (its --json output).

The rule (one line per daemon kind; B = batches per second = nodes / period,
V = values per batch, V0 and c_kind = the values per batch and the CPU per
batch measured by the run):

    cores(kind)  = B x c_kind x V / V0          every kind's work grows with its
                                                batches and their size; per batch
                                                costs that do not grow with V make
                                                this an upper bound for V < V0
    processes    = ceil(cores / use)            use = the share of a core one
                                                process is given (default 0.5:
                                                room for catch-up after an outage)
    rack reducers= max(2 per rack, processes)   two per rack share its consumer
    leaves       = one per rack; the hub is one nats-server (multi-threaded) on
                   a machine with that many cores
    summaries    = M x c_msg x V / V0           the summary collector's work grows
                                                with summary messages, not nodes:
                                                M = (racks x (1 + jobs per rack)
                                                + jobs) / period (a rack partial
                                                per job in the rack and one for
                                                idle nodes, a summary per job);
                                                processes = ceil(cores / use):
                                                they share collect-sum
    disk per day = B x V x 86,400 x bytes per stored value      raw samples
                 + nodes x V x 1,440 x bytes per rollup row     1-minute rollups
                 + jobs x V x 86,400 / period x bytes per summary row
                                                the job summaries (a row per job,
                                                period and sensor once compacted)
    (rollups and summaries: the rollup tier, kept --rollup-days, docs/store.md)

The raw collectors' CPU per batch: the load run's, or --collector-us-per-batch
(bench_collect.py --engine c: the C hot path into a lake, groups of a site's
--fetch-batch, a figure per group size; the load run on this 2-vCPU machine
drains ~1000 batches a second, groups far smaller than a site's, whose
per-group commit dominates). The summary collector's CPU per message: the load run's, or
--summary-ms-per-message (bench_summary_collect.py's figure for the append-only
path of store schema 3, measured with groups of a site's size; a load run
on this 2-vCPU machine carries ~10 messages a second, groups of a few, whose
per-group commit dominates). The hub's: the load run's, or --hub-us-per-batch
(a site's hub deletes as many messages as it stores once its streams are
older than their age, 6 h, and works more then: a run without
--stream-max-age-s never gets there). The note printed says which.

Bytes per stored value: --bytes-per-value (docs/store.md's measurement with
the agent's real fields, when there is one), else the run's lake size over
its values after ``hushmon store compact`` (else as written: many small
files, an upper bound).

    .venv/bin/python bench/sizing.py --from load.json [--nodes 1000,2000,10000]
        [--periods-s 1,10] [--sensors V] [--bytes-per-value X] [--use 0.5]
        [--nodes-per-rack 40] [--jobs-per-rack 2] [--job-nodes 64] [--markdown]
        [--summary-ms-per-message MS] [--collector-us-per-batch US]
        [--hub-us-per-batch US] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

# the kinds of bench_transport_load's JSON, and their column names here
COLUMN_NAMES = {
    "rack reducer": "rack reducers",
    "collector": "collectors",
    "collector, raw path": "collectors (raw)",
    "collector, summaries": "collector (summaries)",
    "hub nats-server": "hub",
    "leaf nats-server": "leaves",
    "top reducer": "top reducer",
}
# kinds that run as one process whatever their load (the hub: one server whose
# threads use its machine's cores); summary collectors, like raw ones, share
# their consumer, so they count ceil(cores / use)
HUB = "hub nats-server"
SUMMARIES = "collector, summaries"
ONE_PROCESS = (HUB, "top reducer")
# of those, the ones that do their work on about one core: above --use there
# is a limit of this design, marked '!'
SINGLE = ("top reducer",)


@dataclass(frozen=True)
class Measured:
    source: str
    agents: int
    values_per_batch: int
    cpu_us_per_batch: dict[str, float]  # per kind: per its unit
    per_message: tuple[str, ...]  # kinds whose unit is a summary message
    bytes_per_value: float
    bytes_source: str
    # where a kind's CPU figure came from, when not the load run as it was
    sources: dict[str, str] = field(default_factory=dict)

    def figure_source(self, kind: str) -> str:
        return self.sources.get(kind, "the load run")


@dataclass(frozen=True)
class SiteRow:
    nodes: int
    period_s: float
    values_per_s: float
    cores: dict[str, float]  # per kind
    processes: dict[str, int]
    disk_bytes_per_day: float  # raw samples
    rollup_bytes_per_day: float = 0.0
    summary_bytes_per_day: float = 0.0

    @property
    def all_bytes_per_day(self) -> float:
        return self.disk_bytes_per_day + self.rollup_bytes_per_day + self.summary_bytes_per_day


def load_measured(path: Path, bytes_per_value: float | None) -> Measured:
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
        kinds = {k["kind"]: float(k["cpu_us_per_unit"]) for k in doc["kinds"]}
        per_message = tuple(k["kind"] for k in doc["kinds"] if k["unit"] != "batch")
        vpb = int(doc["values_per_batch"])
        agents = int(doc["agents"])
        packed = doc.get("bytes_per_value_compacted")
        run_bpv = float(packed if packed is not None else doc["bytes_per_value"])
        run_how = "compacted" if packed is not None else "as written, not compacted"
        hub_how = hub_source(doc.get("stream_max_age_s"), doc.get("load_s"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(
            f"sizing: {path}: not bench_transport_load.py --json output ({exc})"
        ) from None
    kinds = {k: v for k, v in kinds.items() if k in COLUMN_NAMES}
    if "rack reducer" not in kinds or not any(k.startswith("collector") for k in kinds) or vpb < 1:
        raise SystemExit(f"sizing: {path}: no CPU figure for the reducers, collectors or values")
    sources = {HUB: hub_how}
    if bytes_per_value is not None:
        return Measured(
            str(path),
            agents,
            vpb,
            kinds,
            per_message,
            bytes_per_value,
            "--bytes-per-value",
            sources,
        )
    return Measured(
        str(path),
        agents,
        vpb,
        kinds,
        per_message,
        run_bpv,
        f"the run's lake ({run_how}): {run_bpv:.2f} B",
        sources,
    )


# the hub's CPU once its streams delete as many messages as they store,
# over the same hub before any expired: 110 % / 82 % of a core at 10,000
# agents (docs/transport.md, "The hub once messages expire")
HUB_EXPIRY_RISE = 0.34


def hub_source(stream_max_age_s: float | None, load_s: float | None) -> str:
    """What the load run's hub figure stands for: a site's hub deletes as
    many messages as it stores from 6 h after its start on."""
    if stream_max_age_s is not None and load_s is not None and stream_max_age_s < load_s:
        return (
            f"the load run (its streams kept {stream_max_age_s:g} s of its {load_s:g} s: "
            "messages expired in part of it)"
        )
    return (
        f"the load run, before any message expired: a site's hub takes about "
        f"{HUB_EXPIRY_RISE:.0%} more once they do (--hub-us-per-batch)"
    )


@dataclass(frozen=True)
class Shape:
    """How the nodes are grouped: what summary messages a period makes."""

    nodes_per_rack: int
    jobs_per_rack: float
    job_nodes: int

    def racks(self, nodes: int) -> int:
        return max(1, math.ceil(nodes / self.nodes_per_rack))

    def jobs(self, nodes: int) -> int:
        return math.ceil(nodes / self.job_nodes)

    def summaries_per_period(self, nodes: int) -> float:
        return self.racks(nodes) * (1 + self.jobs_per_rack) + self.jobs(nodes)


# docs/store.md: bench_store_bytes.py's rollups (6.07 B per series and
# minute) and bench_summary_bytes.py's compacted job summaries (4.8 B per
# job, period and sensor with its sketch)
ROLLUP_BYTES_PER_ROW = 6.07
SUMMARY_BYTES_PER_ROW = 4.8


def size_site(
    m: Measured,
    nodes: int,
    period_s: float,
    sensors: int,
    use: float,
    shape: Shape,
    rollup_row_bytes: float = ROLLUP_BYTES_PER_ROW,
    summary_row_bytes: float = SUMMARY_BYTES_PER_ROW,
) -> SiteRow:
    batches_per_s = nodes / period_s
    messages_per_s = shape.summaries_per_period(nodes) / period_s
    scale = sensors / m.values_per_batch
    cores = {
        k: (messages_per_s if k in m.per_message else batches_per_s) * us * 1e-6 * scale
        for k, us in m.cpu_us_per_batch.items()
    }
    procs = {k: 1 if k in ONE_PROCESS else max(1, math.ceil(c / use)) for k, c in cores.items()}
    racks = shape.racks(nodes)
    procs["rack reducer"] = max(2 * racks, procs["rack reducer"])
    if "leaf nats-server" in procs:
        procs["leaf nats-server"] = max(racks, procs["leaf nats-server"])
    return SiteRow(
        nodes=nodes,
        period_s=period_s,
        values_per_s=batches_per_s * sensors,
        cores=cores,
        processes=procs,
        disk_bytes_per_day=batches_per_s * sensors * 86_400 * m.bytes_per_value,
        rollup_bytes_per_day=nodes * sensors * 1_440 * rollup_row_bytes,
        summary_bytes_per_day=shape.jobs(nodes) * sensors * 86_400 / period_s * summary_row_bytes,
    )


def cell(r: SiteRow, kind: str, use: float) -> str:
    """cores (processes), '!' where one process would need more than --use."""
    mark = "!" if kind in SINGLE and r.cores[kind] > use else ""
    return f"{r.cores[kind]:.2f} ({r.processes[kind]}){mark}"


def table(rows: list[SiteRow], use: float) -> list[str]:
    kinds = list(rows[0].cores)
    head = f"{'nodes':>7} {'period':>6} {'values/s':>10} " + " ".join(
        f"{COLUMN_NAMES[k]:>22}" for k in kinds
    )
    out = [head, f"{'':26}" + " ".join(f"{'cores (processes)':>22}" for _ in kinds)]
    for r in rows:
        cells = " ".join(f"{cell(r, k, use):>22}" for k in kinds)
        out.append(
            f"{r.nodes:>7,} {r.period_s:>5g}s {r.values_per_s:>10,.0f} {cells}"
            f"   disk {r.disk_bytes_per_day / 1e9:,.1f} + {r.rollup_bytes_per_day / 1e9:,.1f}"
            f" + {r.summary_bytes_per_day / 1e9:,.1f} GB/day (raw + rollups + summaries)"
        )
    return out


def markdown(rows: list[SiteRow], use: float) -> list[str]:
    """The same table for docs: cores (processes) per kind, disk per day."""
    kinds = list(rows[0].cores)
    cols = [COLUMN_NAMES[k] for k in kinds]
    out = [
        "| nodes | period | values/s | "
        + " | ".join(cols)
        + " | disk per day: raw + rollups + summaries |",
        "|---" * (len(cols) + 4) + "|",
    ]
    for r in rows:
        cells = " | ".join(cell(r, k, use) for k in kinds)
        out.append(
            f"| {r.nodes:,} | {r.period_s:g} s | {r.values_per_s:,.0f} | {cells} | "
            f"{r.disk_bytes_per_day / 1e9:,.1f} + {r.rollup_bytes_per_day / 1e9:,.1f} + "
            f"{r.summary_bytes_per_day / 1e9:,.1f} GB |"
        )
    return out


def arithmetic(m: Measured, r: SiteRow, sensors: int, shape: Shape) -> list[str]:
    """The sums behind one row, written out."""
    b = r.nodes / r.period_s
    lines = [f"arithmetic for {r.nodes:,} nodes at a {r.period_s:g} s period, {sensors} values:"]
    for k in r.cores:
        if k in m.per_message:
            racks, jobs = shape.racks(r.nodes), math.ceil(r.nodes / shape.job_nodes)
            msgs = shape.summaries_per_period(r.nodes) / r.period_s
            lines.append(
                f"  {COLUMN_NAMES[k]}: ({racks} racks x (1 + {shape.jobs_per_rack:g}) + {jobs} "
                f"jobs) / {r.period_s:g} s = {msgs:,.0f} summary messages/s x "
                f"{m.cpu_us_per_batch[k] / 1000:.1f} ms x {sensors}/{m.values_per_batch} = "
                f"{r.cores[k]:.2f} cores"
            )
            continue
        lines.append(
            f"  {COLUMN_NAMES[k]}: {b:,.0f} batches/s x {m.cpu_us_per_batch[k]:.1f} us x "
            f"{sensors}/{m.values_per_batch} = {r.cores[k]:.2f} cores"
        )
    lines.append(
        f"  disk: {b:,.0f} x {sensors} values x 86,400 s x {m.bytes_per_value:.2f} B = "
        f"{r.disk_bytes_per_day / 1e9:,.1f} GB per day raw"
    )
    jobs = shape.jobs(r.nodes)
    lines.append(
        f"    + {r.nodes:,} nodes x {sensors} x 1,440 minutes x rollup rows = "
        f"{r.rollup_bytes_per_day / 1e9:,.2f} GB; + {jobs} jobs x {sensors} x "
        f"{86_400 / r.period_s:,.0f} periods x summary rows = "
        f"{r.summary_bytes_per_day / 1e9:,.2f} GB per day (the rollup tier)"
    )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="src", type=Path, required=True, metavar="FILE")
    ap.add_argument(
        "--nodes", default="1000,2000,10000", help="comma list (default 1000,2000,10000)"
    )
    ap.add_argument("--periods-s", default="1,10", help="sampling periods in s (default 1,10)")
    ap.add_argument("--sensors", type=int, help="values per node per period (default: the run's)")
    ap.add_argument("--bytes-per-value", type=float, help="stored bytes per value (docs/store.md)")
    ap.add_argument("--use", type=float, default=0.5, help="share of a core per process")
    ap.add_argument("--nodes-per-rack", type=int, default=40)
    ap.add_argument(
        "--jobs-per-rack", type=float, default=2.0, help="jobs with nodes in a rack (default 2)"
    )
    ap.add_argument("--job-nodes", type=int, default=64, help="a job's mean node count")
    ap.add_argument("--markdown", action="store_true", help="the table as Markdown (for docs)")
    ap.add_argument(
        "--summary-ms-per-message",
        type=float,
        metavar="MS",
        help="the summary collector's CPU per message (bench_summary_collect.py), "
        "instead of the load run's",
    )
    ap.add_argument(
        "--collector-us-per-batch",
        type=float,
        metavar="US",
        help="the raw collectors' CPU per batch (bench_collect.py --engine c), "
        "instead of the load run's",
    )
    ap.add_argument(
        "--hub-us-per-batch",
        type=float,
        metavar="US",
        help="the hub's CPU per batch in the steady state, its streams deleting as many "
        "messages as they store, instead of the load run's",
    )
    ap.add_argument(
        "--rollup-row-bytes",
        type=float,
        default=ROLLUP_BYTES_PER_ROW,
        help="bytes per rollup row, a series and minute (default %(default)s, docs/store.md)",
    )
    ap.add_argument(
        "--summary-row-bytes",
        type=float,
        default=SUMMARY_BYTES_PER_ROW,
        help="bytes per compacted job summary row, a job, period and sensor "
        "(default %(default)s, bench_summary_bytes.py)",
    )
    ap.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    a = ap.parse_args()
    try:
        nodes = [int(n) for n in a.nodes.split(",")]
        periods = [float(p) for p in a.periods_s.split(",")]
    except ValueError:
        print("sizing: --nodes and --periods-s are comma lists of numbers", file=sys.stderr)
        return 2
    if (
        min(nodes) < 1
        or min(periods) <= 0
        or not 0 < a.use <= 1
        or a.nodes_per_rack < 1
        or a.jobs_per_rack < 0
        or a.job_nodes < 1
    ):
        print(
            "sizing: need nodes >= 1, periods > 0, 0 < --use <= 1, --nodes-per-rack >= 1, "
            "--jobs-per-rack >= 0, --job-nodes >= 1",
            file=sys.stderr,
        )
        return 2
    if (
        (a.sensors is not None and a.sensors < 1)
        or (a.bytes_per_value is not None and a.bytes_per_value <= 0)
        or (a.summary_ms_per_message is not None and a.summary_ms_per_message <= 0)
        or (a.collector_us_per_batch is not None and a.collector_us_per_batch <= 0)
        or (a.hub_us_per_batch is not None and a.hub_us_per_batch <= 0)
        or a.rollup_row_bytes < 0
        or a.summary_row_bytes < 0
    ):
        print(
            "sizing: --sensors, --bytes-per-value, --summary-ms-per-message, "
            "--collector-us-per-batch and --hub-us-per-batch must be positive, the row bytes "
            "not negative",
            file=sys.stderr,
        )
        return 2
    m = load_measured(a.src, a.bytes_per_value)
    if a.summary_ms_per_message is not None:
        ms = a.summary_ms_per_message
        m = with_cost(m, SUMMARIES, ms * 1000.0, f"--summary-ms-per-message ({ms:g} ms)")
    if a.collector_us_per_batch is not None:
        us = a.collector_us_per_batch
        m = with_cost(m, raw_kind(m), us, f"--collector-us-per-batch ({us:g} us)")
    if a.hub_us_per_batch is not None:
        m = with_cost(m, HUB, a.hub_us_per_batch, f"--hub-us-per-batch ({a.hub_us_per_batch:g} us)")
    sensors = a.sensors or m.values_per_batch
    shape = Shape(a.nodes_per_rack, a.jobs_per_rack, a.job_nodes)
    rows = [
        size_site(m, n, p, sensors, a.use, shape, a.rollup_row_bytes, a.summary_row_bytes)
        for p in periods
        for n in nodes
    ]
    print(
        f"# sizing from {m.source} (measured at {m.agents:,} agents, {m.values_per_batch} values "
        f"per batch); {sensors} values per node per period; a process at {a.use:.0%} of a core; "
        f"{a.nodes_per_rack} nodes per rack, {a.jobs_per_rack:g} jobs per rack, jobs of "
        f"{a.job_nodes} nodes; bytes per value from {m.bytes_source}; summary collector's "
        f"CPU per message from {m.figure_source(SUMMARIES)}; raw collectors' CPU per batch from "
        f"{m.figure_source(raw_kind(m))}; the hub's from {m.figure_source(HUB)}"
    )
    for line in markdown(rows, a.use) if a.markdown else table(rows, a.use):
        print(line)
    if any(k in SINGLE and r.cores[k] > a.use for r in rows for k in r.cores):
        print(f"! one process of that kind would need more than {a.use:.0%} of a core")
    for line in arithmetic(m, _largest_fast(rows), sensors, shape):
        print(line)
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                [{**r.__dict__, "all_bytes_per_day": r.all_bytes_per_day} for r in rows], indent=1
            )
        )
    return 0


def with_cost(m: Measured, kind: str, us_per_unit: float, source: str) -> Measured:
    """The run's figures with one kind's CPU per unit replaced (a kind the
    run did not split out, as a lone collector's summaries, is added)."""
    per_message = (*m.per_message, kind) if kind == SUMMARIES else m.per_message
    return replace(
        m,
        cpu_us_per_batch={**m.cpu_us_per_batch, kind: us_per_unit},
        per_message=tuple(dict.fromkeys(per_message)),
        sources={**m.sources, kind: source},
    )


def raw_kind(m: Measured) -> str:
    """The raw collectors' kind: "collector, raw path" where the run split
    its collectors, else "collector" (the summaries' share folded in)."""
    return "collector, raw path" if "collector, raw path" in m.cpu_us_per_batch else "collector"


def _largest_fast(rows: list[SiteRow]) -> SiteRow:
    """The row with most values per second: the one to show the sums of."""
    return max(rows, key=lambda r: r.values_per_s)


if __name__ == "__main__":
    sys.exit(main())
