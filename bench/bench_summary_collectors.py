"""Summary collectors scaling out: the same summary messages stored by 1 and
by K `--summaries-only` collectors sharing them, side by side in one run.

The messages are bench_summary_collect.py's (per period, a rack partial per
rack and a summary per job, the agent's field set with sketches). A lake is
prefilled with --prefill-s periods, then copied for each count; with K
collectors, K processes each store every K-th group (what K collectors
sharing collect-sum, work-queue style, fetch), all at once on one lake, as
fast as they can (a backlog draining). Each group is one transaction under
the lake's commit lock (store/lake.py), which every writer of the lake
takes in turn: what K collectors gain is the parsing and checking they do
outside it. Printed per count: messages per wall-second (first group's
start to last group's end over all processes), CPU per message, the time
the commit lock was held per message and its share of the wall time (what
bounds K: at 1/ms-per-message messages a second the lock is never free),
the load; then K / 1.

    .venv/bin/python bench/bench_summary_collectors.py [--racks 25] [--seconds 40]
        [--prefill-s 10] [--collectors 1,2] [--nodes-per-rack 40]
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def worker(lake: Path, groups_file: Path, out: Path) -> None:
    """Stores its groups one transaction each; notes when it started and
    ended (the epoch clock: the processes' spans are compared) and its CPU."""
    from hushmon.transport.collect_lake import LakeCollectorStore
    from hushmon.transport.collect_store import Message

    groups = pickle.loads(groups_file.read_bytes())
    store = LakeCollectorStore(lake)
    try:
        cpu0, start = time.process_time(), time.time()
        for group in groups:
            msgs = [Message(s, h, d, stream_seq=i) for i, (s, h, d) in enumerate(group, 1)]
            store.write_summaries(msgs)
        end, cpu = time.time(), time.process_time() - cpu0
        stored = store.stats.summaries_stored
        held_s = store.writer.commits.held_s
    finally:
        store.close()
    out.write_text(
        json.dumps({"start": start, "end": end, "cpu_s": cpu, "stored": stored, "held_s": held_s})
    )


def run_count(k: int, lake: Path, groups: list, tmp: Path) -> dict[str, Any]:
    """K processes at once, process i storing groups i, i + K, ..."""
    procs, outs = [], []
    for i in range(k):
        gfile, out = tmp / f"k{k}-{i}.groups", tmp / f"k{k}-{i}.json"
        gfile.write_bytes(pickle.dumps(groups[i::k]))
        cmd = [sys.executable, __file__, "--worker", str(lake), str(gfile), str(out)]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
        procs.append(subprocess.Popen(cmd, env=env, cwd=tmp))
        outs.append(out)
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"bench_summary_collectors: a collector of {k} failed")
    rs = [json.loads(o.read_text()) for o in outs]
    messages = sum(len(g) for g in groups)
    if sum(r["stored"] for r in rs) != messages:
        raise SystemExit(f"bench_summary_collectors: {k} collectors stored "
                         f"{sum(r['stored'] for r in rs)} of {messages} messages")  # fmt: skip
    wall = max(r["end"] for r in rs) - min(r["start"] for r in rs)
    cpu = sum(r["cpu_s"] for r in rs)
    held = sum(r["held_s"] for r in rs)
    return {"messages": messages, "wall_s": wall, "cpu_s": cpu,
            "per_wall_s": messages / wall, "cpu_ms_per_message": cpu / messages * 1e3,
            "lock_ms_per_message": held / messages * 1e3, "lock_share": held / wall}  # fmt: skip


def main() -> int:
    import bench_summary_collect as messages_of

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--racks", type=int, default=25)
    ap.add_argument("--racks-per-job", type=int, default=2)
    ap.add_argument("--nodes-per-rack", type=int, default=40)
    ap.add_argument("--seconds", type=int, default=40, help="periods stored per count")
    ap.add_argument("--prefill-s", type=int, default=10, help="periods stored first")
    ap.add_argument(
        "--collectors", type=messages_of.positive_ints("collector counts"), default=[1, 2]
    )
    ap.add_argument("--json", metavar="FILE", help="the figures as JSON ('-': stdout only)")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*(Path(p) for p in args.worker))
        return 0
    if min(args.racks, args.racks_per_job, args.nodes_per_rack, args.seconds, args.prefill_s) < 1:
        print("bench_summary_collectors: --racks, --racks-per-job, --nodes-per-rack, --seconds "
              "and --prefill-s must be >= 1", file=sys.stderr)  # fmt: skip
        return 2
    log = sys.stderr if args.json == "-" else sys.stdout
    shape = argparse.Namespace(racks=args.racks, racks_per_job=args.racks_per_job,
                               sensor_nodes=None)  # fmt: skip
    groups = messages_of.messages(shape, args.nodes_per_rack, args.prefill_s + args.seconds)
    results: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="hm-sumcollectors-") as name:
        tmp = Path(name)
        lake, pristine = tmp / "s.lake", tmp / "pristine"
        run_count(1, lake, groups[: args.prefill_s], tmp)
        shutil.copytree(lake, pristine)
        for k in args.collectors:
            # a lake keeps its own path in its catalog: each count gets the
            # prefilled lake back at the same path
            shutil.rmtree(lake)
            shutil.copytree(pristine, lake)
            before = _load()
            results[k] = run_count(k, lake, groups[args.prefill_s :], tmp)
            results[k]["load"] = f"{before} -> {_load()}"
            print(f"load {results[k]['load']}: {k} collector(s) done", file=sys.stderr)
    per_group = len(groups[0])
    print(f"summary collectors on one lake: {args.seconds} groups of {per_group} messages "
          f"({args.racks} rack partials of {args.nodes_per_rack} nodes + "
          f"{per_group - args.racks} job summaries) after {args.prefill_s} stored; "
          f"{os.cpu_count()} CPUs", file=log)  # fmt: skip
    for k, r in results.items():
        print(f"  {k} collector(s): {r['per_wall_s']:8.1f} messages per wall-second, "
              f"{r['cpu_ms_per_message']:6.2f} ms CPU and {r['lock_ms_per_message']:5.2f} ms "
              f"of the commit lock per message (held {r['lock_share']:.0%} of the wall), "
              f"wall {r['wall_s']:.1f} s "
              f"(load {r['load']})", file=log)  # fmt: skip
    first = results[args.collectors[0]]
    for k, r in results.items():
        if k != args.collectors[0]:
            print(f"  {k} / {args.collectors[0]}: {r['per_wall_s'] / first['per_wall_s']:.2f}x "
                  f"messages per wall-second", file=log)  # fmt: skip
    if args.json:
        text = json.dumps({str(k): r for k, r in results.items()}, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
