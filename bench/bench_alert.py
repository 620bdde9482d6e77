"""hushmon alert's cost per job summary: the live rules (tags/live.py)
beside the full parse every summary reader pays (live/state.parse_payload
of every sensor, as hushmon top does), side by side in one run. hushmon
alert parses only the sensors its live rules read, so its cost per summary
can be below a full parse.

N jobs of M nodes send one job summary per period with the sensors a
node agent's summary carries (cpu, mem, load, net, disk; about 30 keys);
half the jobs idle. Prints CPU microseconds per summary for the parse
of every sensor, for hushmon alert's (its sensors' parse + the rules), and
the ratio.

    .venv/bin/python bench/bench_alert.py --jobs 200 --periods 30
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

from hushmon.live.state import Parsed, parse_payload
from hushmon.tags.live import LiveRules
from hushmon.tags.rules import load_rules


def summary(job: str, nodes: int, t_ns: int, idle: bool, rng: random.Random) -> bytes:
    def stat(mean: float) -> dict[str, float]:
        return {"count": nodes, "sum": mean * nodes, "mean": mean, "m2": 1.0,
                "min": mean * 0.9, "max": mean * 1.1}  # fmt: skip

    busy = 2.0 if idle else rng.uniform(50, 95)
    sensors = {
        "cpu,cpu=total idle_pct": stat(100 - busy), "cpu,cpu=total user_pct": stat(busy * 0.9),
        "cpu,cpu=total system_pct": stat(busy * 0.1), "mem used_pct": stat(40.0),
        "mem used_bytes": stat(4e9), "mem total_bytes": stat(1e10),
    }  # fmt: skip
    for k in range(24):
        sensors[f"net,iface=eth{k % 4} rx_bytes_per_s_{k}"] = stat(1e6)
    sources = [[f"n{j}", 1, t_ns // 10**9] for j in range(nodes)]
    body = {"level": "job", "job": job, "time_ns": t_ns, "sources": sources, "sensors": sensors}
    return json.dumps(body).encode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--nodes", type=int, default=16, help="nodes per job")
    ap.add_argument("--periods", type=int, default=30)
    args = ap.parse_args()
    rng = random.Random(1)
    t0 = 1_790_000_000_000_000_000
    msgs = [
        (f"hm.sum.job.{j}", summary(str(j), args.nodes, t0 + p * 10**9, j % 2 == 0, rng))
        for p in range(args.periods)
        for j in range(args.jobs)
    ]
    live = LiveRules(load_rules())
    c0 = time.process_time()
    for subject, payload in msgs:
        parse_payload(subject, payload)
    parse_s = time.process_time() - c0
    alerts = 0
    c0 = time.process_time()
    for subject, payload in msgs:
        parsed = parse_payload(subject, payload, live.keep)  # as hushmon alert reads
        assert isinstance(parsed, Parsed)
        alerts += len(live.add(parsed, time.time_ns()))
    both_s = time.process_time() - c0
    n = len(msgs)
    print(f"summaries={n} jobs={args.jobs} nodes_per_job={args.nodes} rules={len(live.rules)} "
          f"alerts={alerts}")  # fmt: skip
    print(
        f"full_parse_us_per_summary={1e6 * parse_s / n:.1f} "
        f"alert_us_per_summary={1e6 * both_s / n:.1f} ratio={both_s / parse_s:.2f}"
    )
    print("loadavg=" + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
