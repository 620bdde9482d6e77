"""How long a control request over NATS takes to be acknowledged.

Starts a local nats-server and N hushmon-agents (sink nats, source self)
at each sampling period asked for, then sends `set period=<same>` to all of
them at once (``hushmon ctl``'s scatter/gather, ``ask_nats``) at random
instants and prints the time until the last agent's answer: median, min,
max. An agent reads its connection once per period, so the answer should
come within one period plus a round trip (docs/transport.md, "Control
channel"). The client's own start is not counted.

    .venv/bin/python bench/bench_ctl_latency.py [--agents 4] [--requests 15]
        [--periods-ms 1000,200]

Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.paths import program
from hushmon.transport.ctl import ask_nats
from hushmon.transport.natsserver import LocalNatsServer, NatsServerConfig, ensure_streams


def measure(url: str, work: Path, agents: int, requests: int, period_ms: int) -> list[float]:
    hosts = [f"c{i}" for i in range(agents)]

    def start(h: str) -> subprocess.Popen[bytes]:
        cmd = [str(program("hushmon-agent")), "--socket", str(work / f"{h}.sock"), "--sink",
               "nats", "--nats-url", url, "--sources", "self", "--host", h, "--spool-dir",
               str(work / f"{h}.spool"), "--period-ms", str(period_ms)]  # fmt: skip
        return subprocess.Popen(cmd, stderr=subprocess.DEVNULL)

    procs = [start(h) for h in hosts]
    try:
        deadline = time.monotonic() + 20
        while ask_nats(url, "status", hosts, 3).exit_code() != 0:
            if time.monotonic() > deadline:
                raise HushmonError("the agents did not all answer within 20 s")
        took = []
        for _ in range(requests):
            time.sleep(random.random() * period_ms / 1000)
            t0 = time.monotonic()
            outcome = ask_nats(url, f"set period={period_ms}ms", hosts, 3 + period_ms / 1000)
            took.append(time.monotonic() - t0)
            if outcome.exit_code() != 0:
                raise HushmonError("; ".join(outcome.lines()))
        return took
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--requests", type=int, default=15)
    ap.add_argument("--periods-ms", default="1000,200")
    args = ap.parse_args()
    try:
        periods = [int(p) for p in args.periods_ms.split(",")]
        if args.agents < 1 or args.requests < 1 or any(not 10 <= p <= 10000 for p in periods):
            raise HushmonError("--agents, --requests >= 1; periods 10 .. 10000 ms")
        with tempfile.TemporaryDirectory(prefix="hm-ctl-bench-") as d:
            work = Path(d)
            server = LocalNatsServer(NatsServerConfig(name="ctl", store_dir=work / "js"), work)
            server.start()
            try:
                ensure_streams(server.url)
                print(f"load {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
                for period in periods:
                    t = measure(server.url, work, args.agents, args.requests, period)
                    print(
                        f"period {period} ms, {args.agents} agents, {args.requests} set requests: "
                        f"median {statistics.median(t):.3f} s, min {min(t):.3f} s, "
                        f"max {max(t):.3f} s"
                    )
            finally:
                server.stop()
    except (HushmonError, ValueError) as exc:
        print(f"bench_ctl_latency: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
