"""The transport's faults on the test bed, full length: a bed of 4 nodes in 2
racks with ``--transport nats`` (hub of 3, a leaf per rack, 2 reducers per
rack, top reducer, collector; no Slurm), data flowing at the agents' period
(2 s by default), then in turn:

- kill -9 one rack reducer (the rack's other instance carries on);
- kill -9 the whole hub, 10 s down, start it again;
- the last rack's uplink down for 60 s (``ip link set up-rN down``);
- kill -9 an agent 4 ms after a sampling instant, start it again;
- kill -9 the collector, start it again.

After each: every batch every agent wrote (its spool is the truth) is in
the store exactly once, counted by (host, epoch, seq) and by value, and the
tree repaired itself (agents reconnected, reducers caught up). Prints, per
fault, ``lost = N, duplicated = N``. Needs root; takes about 3 minutes.

    sudo .venv/bin/python bench/bench_transport_faults.py [--short] [--only PREFIX ...]

``--short`` uses the test's durations (tests/testbed/test_transport_faults.py).
The bed's data goes to /var/tmp/hushmon-faults-<pid> and is removed at the end
(kept with --keep)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.testbed import bed as bedmod
from hushmon.testbed import faults
from hushmon.testbed.spec import BedSpec


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", action="store_true", help="the test's durations")
    ap.add_argument("--only", nargs="*", help="faults whose name begins so (e.g. uplink hub)")
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--racks", type=int, default=2)
    # 2 s: at 1 s, 4 nodes make the collector fall behind (docs/transport.md,
    # "On the test bed"), and the check would count its backlog as lost.
    ap.add_argument("--period-ms", type=int, default=2000, help="the agents' period")
    ap.add_argument("--keep", action="store_true", help="keep the bed's data folder")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_transport_faults: the test bed needs root", file=sys.stderr)
        return 2
    data = Path(f"/var/tmp/hushmon-faults-{os.getpid()}")
    spec = BedSpec(
        nodes=args.nodes,
        racks=args.racks,
        period_ms=args.period_ms,
        slurm=False,
        transport="nats",
    )
    durations = faults.SHORT if args.short else faults.FULL
    started = time.monotonic()
    try:
        bed = bedmod.up(spec, data, say=say)
        say(f"bed up in {time.monotonic() - started:.1f} s: {args.nodes} nodes, {args.racks} racks")
        results = faults.run_faults(bed, durations, say, args.only)
    except KeyboardInterrupt:
        print("bench_transport_faults: interrupted", file=sys.stderr)
        return 130
    except HushmonError as exc:
        print(f"bench_transport_faults: {exc}", file=sys.stderr)
        return 1
    finally:
        bedmod.down()
        if not args.keep:
            shutil.rmtree(data, ignore_errors=True)
    print()
    bad = 0
    for check, repaired in results:
        print(check.line())
        for line in check.details() + repaired:
            print(f"    {line}")
        bad += check.lost + check.duplicated + len(repaired) + len(check.not_collected)
    print(f"total {time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.1f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
