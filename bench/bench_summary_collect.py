"""The summary collector's CPU per summary message on a lake, this tree next
to a baseline commit, side by side in one run.

The messages are what the reducers send at a site: per period, a rack
partial per rack (--nodes-per-rack nodes of the agent's field set, every
sensor summarized with its sketch; values from hushmon.store.synthetic) and a
job-wide summary per job (a job spans --racks-per-job racks). A lake is first
filled with --prefill-s periods of them by the baseline's own collector code
(what a site upgrading from it holds), then copied; each copy is written
--seconds further periods, one fetched group per period (what a collector
that keeps up fetches at 1 Hz), by the collector's store class
(LakeCollectorStore.write_summaries) of the baseline tree and of this tree,
each in a fresh process (PYTHONPATH at that tree's python/; the baseline's
files come from ``git archive``). Printed: CPU-seconds (process CPU, every
thread) per message and per group, wall per group, and the ratio, with the
load average; then the cores one collector needs at 10,000 nodes
(bench/sizing.py's message count: racks x (1 + jobs per rack) + jobs).

--nodes-per-rack takes several sizes (40,1750): the same run for each, the
figures side by side. The sources a partial names grow with its rack (a
rack reducer of 1,750 nodes names 1,750 batches, the job summary both
racks'), so this shows whether a message's cost grows with them: the whole
path's run of 2026-11-27 (2 racks of 1,750 nodes) cost 62.5 ms per message
against 4.0 ms for racks of 40. --sensor-nodes keeps the sensors the same
for every size, so that only the sources differ.

    .venv/bin/python bench/bench_summary_collect.py [--racks 25] [--seconds 20]
        [--prefill-s 60] [--nodes-per-rack 40[,1750]] [--sensor-nodes N] [--baseline d09c2de]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

EPOCH = 1


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def rack_sensors(nodes: int, periods: int) -> list[dict[str, Any]]:
    """Per period, every sensor's summary over one rack's nodes (JSON form)."""
    from hushmon.store.synthetic import Scenario, node_lines
    from hushmon.transport.summary import Summary
    from hushmon.transport.wire import parse_sensor_key

    sc = Scenario(nodes=nodes, seconds=periods)
    values: list[dict[str, list[float]]] = [{} for _ in range(periods)]
    t0: int | None = None
    for node in range(nodes):
        for raw in node_lines(sc, node):
            key, fields, t = raw.rstrip("\n").rsplit(" ", 2)
            if key.startswith("job,"):
                continue
            t0 = int(t) if t0 is None else min(t0, int(t))
            i = (int(t) - t0) // 10**9 if t0 is not None else 0
            if not 0 <= i < periods:
                continue
            tags = ",".join(x for x in key.split(",") if not x.startswith("host="))
            for f in fields.split(","):
                name, v = f.split("=", 1)
                values[i].setdefault(f"{tags} {name}", []).append(float(v.rstrip("i")))
    out = []
    for per in values:
        sensors = {}
        for text, vs in per.items():
            k = parse_sensor_key(text)
            assert not isinstance(k, str), k
            sensors[k.wire()] = Summary.of(vs).to_json()
        out.append(sensors)
    return out


def messages(
    args: argparse.Namespace, nodes_per_rack: int, periods: int
) -> list[list[tuple[str, dict, bytes]]]:
    """Per period, the group a collector fetches: every rack's partial and
    every job's summary, as (subject, headers, payload)."""
    per_period = rack_sensors(args.sensor_nodes or nodes_per_rack, min(periods, 60))
    t0 = 1_795_000_000_000_000_000
    groups = []
    for p in range(periods):
        t = t0 + p * 10**9
        sensors = per_period[p % len(per_period)]
        group = []
        for job in range((args.racks + args.racks_per_job - 1) // args.racks_per_job):
            racks = range(job * args.racks_per_job, min(args.racks, (job + 1) * args.racks_per_job))
            every = []
            for r in racks:
                hosts = [[f"r{r}n{n}", EPOCH, p + 1] for n in range(nodes_per_rack)]
                every += hosts
                payload = {"v": 1, "level": "rack", "rack": f"r{r}", "job": f"j{job}",
                           "time_ns": t, "sources": hosts, "sensors": sensors}  # fmt: skip
                group.append(
                    (f"hm.sum.rack.r{r}", {"Nats-Msg-Id": f"r{r}:j{job}:{t}"},
                     json.dumps(payload).encode())
                )  # fmt: skip
            payload = {"v": 1, "level": "job", "rack": "", "job": f"j{job}", "time_ns": t,
                       "sources": every, "sensors": sensors}  # fmt: skip
            group.append(
                (f"hm.sum.job.j{job}", {"Nats-Msg-Id": f"job:j{job}:{t}"},
                 json.dumps(payload).encode())
            )  # fmt: skip
        groups.append(group)
    return groups


def worker(db: Path, groups_file: Path, out: Path) -> None:
    """In the tree PYTHONPATH names: write the groups, note the CPU."""
    from hushmon.transport.collect_lake import LakeCollectorStore
    from hushmon.transport.collect_store import Message

    groups = pickle.loads(groups_file.read_bytes())
    store = LakeCollectorStore(db)
    cpu_s, wall_s = [], []
    try:
        for group in groups:
            msgs = [Message(s, h, d, stream_seq=i) for i, (s, h, d) in enumerate(group, 1)]
            c0, w0 = time.process_time(), time.perf_counter()
            store.write_summaries(msgs)
            cpu_s.append(time.process_time() - c0)
            wall_s.append(time.perf_counter() - w0)
        stats = store.stats
        assert stats.summaries_stored == sum(len(g) for g in groups), stats
    finally:
        store.close()
    out.write_text(json.dumps({"cpu_s": cpu_s, "wall_s": wall_s,
                               "messages": sum(len(g) for g in groups)}))  # fmt: skip


def run_worker(tree: Path, db: Path, groups: list, tmp: Path, name: str) -> dict[str, Any]:
    gfile, out = tmp / f"{name}.groups", tmp / f"{name}.json"
    gfile.write_bytes(pickle.dumps(groups))
    env = {**os.environ, "PYTHONPATH": str(tree / "python")}
    cmd = [sys.executable, __file__, "--worker", str(db), str(gfile), str(out)]
    subprocess.run(cmd, env=env, check=True, cwd=tmp)
    return dict(json.loads(out.read_text()))


def figures(r: dict[str, Any]) -> tuple[float, float, float]:
    cpu, wall = sum(r["cpu_s"]), sum(r["wall_s"])
    return cpu / r["messages"] * 1e3, cpu / len(r["cpu_s"]), wall / len(r["wall_s"])


def positive_ints(what: str) -> Callable[[str], list[int]]:
    """An argparse type: a comma list of ``what`` (counts, each >= 1)."""

    def parse(text: str) -> list[int]:
        try:
            out = [int(x) for x in text.split(",")]
        except ValueError:
            out = []
        if not out or min(out) < 1:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} >= 1, comma-separated")
        return out

    return parse


def run_size(
    args: argparse.Namespace, nodes: int, old: Path, tmp: Path
) -> tuple[int, dict[str, Any]]:
    """One size: the baseline and this tree on copies of one prefilled lake;
    (messages per group, per tree its figures and the load before and after)."""
    print(f"load {_load()}: building {args.prefill_s + args.seconds} periods of "
          f"{args.racks} racks x {nodes} nodes", file=sys.stderr)  # fmt: skip
    groups = messages(args, nodes, args.prefill_s + args.seconds)
    per_group = len(groups[0])
    c0 = time.perf_counter()
    lake = tmp / "prefill.lake"
    run_worker(old, lake, groups[: args.prefill_s], tmp, "prefill")
    print(f"prefill ({args.baseline}): {args.prefill_s} groups of {per_group} messages "
          f"in {time.perf_counter() - c0:.0f} s", file=sys.stderr)  # fmt: skip
    # a lake keeps its own path in its catalog: each run gets the
    # prefilled lake back at the same path
    pristine = tmp / "pristine"
    shutil.copytree(lake, pristine)
    results = {}
    for label, tree in (("baseline", old), ("this tree", ROOT)):
        shutil.rmtree(lake)
        shutil.copytree(pristine, lake)
        load = _load()
        r = run_worker(tree, lake, groups[args.prefill_s :], tmp, label.replace(" ", "_"))
        results[label] = (figures(r), load, _load())
    shutil.rmtree(lake)
    shutil.rmtree(pristine)
    return per_group, results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--racks", type=int, default=25)
    ap.add_argument(
        "--nodes-per-rack",
        type=positive_ints("node counts"),
        default=[40],
        help="nodes per rack (the sources a partial names); several, comma-separated, are "
        "run one after the other and printed side by side",
    )
    ap.add_argument(
        "--sensor-nodes",
        type=int,
        metavar="N",
        help="summarize the sensors over N nodes whatever the rack size (default: the rack's "
        "nodes): with several --nodes-per-rack, only the sources a partial names differ (a "
        "larger rack's sketches also hold more buckets)",
    )
    ap.add_argument("--racks-per-job", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=20, help="periods measured")
    ap.add_argument("--prefill-s", type=int, default=60, help="periods stored first")
    ap.add_argument("--baseline", default="d09c2de", help="commit to compare with")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*(Path(p) for p in args.worker))
        return 0
    if min(args.racks, args.racks_per_job, args.seconds, args.prefill_s) < 1 or (
        args.sensor_nodes is not None and args.sensor_nodes < 1
    ):
        print("bench_summary_collect: --racks, --racks-per-job, --seconds, --prefill-s and "
              "--sensor-nodes must be >= 1", file=sys.stderr)  # fmt: skip
        return 2
    from baseline import baseline_tree  # type: ignore[import-not-found]
    from sizing import Shape  # type: ignore[import-not-found]

    by_size = {}
    with tempfile.TemporaryDirectory(prefix="hm-sumcollect-") as name:
        tmp = Path(name)
        old = baseline_tree(args.baseline, tmp)
        for nodes in args.nodes_per_rack:
            by_size[nodes] = run_size(args, nodes, old, tmp)
    per_period = Shape(40, 2.0, 64).summaries_per_period(10_000)
    sensors = f", sensors over {args.sensor_nodes} nodes" if args.sensor_nodes else ""
    for nodes, (per_group, results) in by_size.items():
        print(f"summary collector on a lake: {args.seconds} groups of {per_group} messages "
              f"({args.racks} rack partials of {nodes} nodes{sensors} + "
              f"{per_group - args.racks} job summaries) after {args.prefill_s} stored")  # fmt: skip
        for label, ((ms, cpu_g, wall_g), l0, l1) in results.items():
            print(f"  {label:10s} {ms:7.2f} ms CPU per message, {cpu_g * 1e3:7.1f} ms CPU and "
                  f"{wall_g * 1e3:7.1f} ms wall per group   (load {l0} -> {l1})")  # fmt: skip
        base, new = results["baseline"][0][0], results["this tree"][0][0]
        print(f"  ratio baseline / this tree: {base / new:.1f}x CPU per message")
        for label, ((ms, _c, _w), _l0, _l1) in results.items():
            print(f"  10,000 nodes (racks of 40, {per_period:,.0f} messages/s at 1 Hz): "
                  f"{per_period * ms / 1e3:.2f} cores ({label}, at this size's cost)")  # fmt: skip
    if len(by_size) > 1:
        print(f"side by side, ms CPU per message ({args.racks} racks; the sources a partial "
              f"names = nodes per rack):")  # fmt: skip
        print("  nodes per rack " + "".join(f"{n:>10,}" for n in by_size))
        for label in ("baseline", "this tree"):
            row = "".join(f"{r[label][0][0]:10.2f}" for _g, r in by_size.values())
            print(f"  {label:15s} {row}")
        first, last = by_size[min(by_size)], by_size[max(by_size)]
        for label in ("baseline", "this tree"):
            grow = last[1][label][0][0] / first[1][label][0][0]
            print(f"  {label}: {max(by_size):,} nodes per rack cost {grow:.2f}x "
                  f"{min(by_size):,}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
