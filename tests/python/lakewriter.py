"""A collector's writer appending raw batches to a lake from another
process, for tests of what compaction does while collection goes on
(test_lake_retention). It is the collector's store path
(`LakeCollectorStore.write_raw`: the raw path, the lake writer, its
commits retried against other writers) without NATS.

Run as ``python lakewriter.py LAKE STOP_FILE START_NS``: groups of 5 and
of 40 batches in turn (15 values: inlined into the catalog; 120: Parquet
files), one period after the other from START_NS, until STOP_FILE exists;
one line ``committed BATCHES VALUES TIME_NS`` after each commit (the
totals so far, and the wall clock).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HOSTS = ("w1", "w2", "w3", "w4", "w5")
VALUES_PER_BATCH = 3
GROUPS = (1, 8)  # periods per group: 5 and 40 batches
EPOCH = 7


def _group(first_period: int, periods: int, start_ns: int) -> list[object]:
    from hushmon.transport.collect_store import Message
    from hushmon.transport.wire import batch_headers

    out: list[object] = []
    for p in range(first_period, first_period + periods):
        t = start_ns + p * 1_000_000_000
        for host in HOSTS:
            data = (
                f"cpu,host={host},cpu=total user_pct={p % 97},system_pct={p % 13} {t}\n"
                f"mem,host={host} used_pct={p % 89} {t}\n"
            ).encode()
            out.append(
                Message(
                    f"hm.raw.r1.{host}",
                    batch_headers(host, EPOCH, p + 1, 2),
                    data,
                    stream_seq=len(HOSTS) * p + HOSTS.index(host) + 1,
                )
            )
    return out


def main(lake: Path, stop: Path, start_ns: int) -> int:
    from hushmon.transport.collect_lake import LakeCollectorStore

    store = LakeCollectorStore(lake)
    period = 0
    try:
        for n in range(1_000_000):
            if stop.exists():
                break
            periods = GROUPS[n % len(GROUPS)]
            store.write_raw(_group(period, periods, start_ns))  # type: ignore[arg-type]
            period += periods
            batches = period * len(HOSTS)
            print(f"committed {batches} {batches * VALUES_PER_BATCH} {time.time_ns()}", flush=True)
    finally:
        store.close()
    return 0


@dataclass
class Written:
    batches: int = 0
    values: int = 0
    commit_times_ns: list[int] = field(default_factory=list)

    def commits_between(self, start_ns: int, end_ns: int) -> int:
        return sum(start_ns <= t <= end_ns for t in self.commit_times_ns)


@contextmanager
def writing(lake: Path, start_ns: int, first_commit_s: float = 120.0) -> Iterator[Written]:
    """A writer process running from its first commit (waited for) until
    the block ends; then what it committed, from its own report."""
    stop = lake.parent / f"{lake.name}.stop-writer"
    stop.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, __file__, str(lake), str(stop), str(start_ns)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    written = Written()
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + first_commit_s
        first = proc.stdout.readline()  # blocks until the first commit or an exit
        assert first.startswith("committed "), f"writer: {first!r} {proc.stderr.read()}"  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the writer's first commit took too long"
        yield written
    finally:
        stop.touch()
        out, err = proc.communicate(timeout=120)
        stop.unlink(missing_ok=True)
    assert proc.returncode == 0, err
    lines = [line.split() for line in [first, *out.splitlines()]]
    written.batches, written.values = int(lines[-1][1]), int(lines[-1][2])
    written.commit_times_ns = [int(line[3]) for line in lines]


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])))
