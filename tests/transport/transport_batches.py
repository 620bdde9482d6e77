"""Raw batches and summaries published as the contract says (docs/transport.md),
with nats-py: what the agent's nats sink and the reducers send, so the
collector's tests do not wait for them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import nats

from hushmon.store.ingest import spool_files
from hushmon.transport.collect_store import Message
from hushmon.transport.summary import Summary
from hushmon.transport.wire import batch_headers, raw_subject

EPOCH = 1_700_000_000_000_000_000


@dataclass
class Batch:
    host: str
    rack: str
    epoch: int
    seq: int
    data: bytes
    dropped: int = 0
    replay: bool = False
    msg_id: str | None = None  # None: the contract's host:epoch:seq

    @property
    def lines(self) -> int:
        return self.data.count(b"\n")

    def headers(self) -> dict[str, str]:
        h = batch_headers(self.host, self.epoch, self.seq, self.lines, self.dropped, self.replay)
        if self.msg_id is not None:
            h["Nats-Msg-Id"] = self.msg_id
        return h


def host_of(line: str) -> str:
    key = line.split(" ", 1)[0]
    for tag in key.split(",")[1:]:
        if tag.startswith("host="):
            return tag[5:]
    raise ValueError(f"no host tag in {line!r}")


def spool_batches(spool: Path, racks: dict[str, str], epoch: int = EPOCH) -> list[Batch]:
    """A spool folder cut into the agent's batches: one per host and period,
    lines in spool order, seq 1, 2, ... per host (periods in time order)."""
    periods: dict[tuple[str, int], list[str]] = {}
    for path in spool_files(spool):
        for line in path.read_text().splitlines():
            if line:
                periods.setdefault((host_of(line), int(line.rsplit(" ", 1)[1])), []).append(line)
    out: list[Batch] = []
    seq: dict[str, int] = {}
    for (host, _t), lines in sorted(periods.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        seq[host] = seq.get(host, 0) + 1
        out.append(Batch(host, racks[host], epoch, seq[host], ("\n".join(lines) + "\n").encode()))
    return out


def synthetic_batch(
    host: str,
    seq: int,
    time_ns: int,
    job: str = "j1",
    rack: str = "r1",
    value: float = 1.0,
    epoch: int = EPOCH,
) -> Batch:
    lines = [
        f"cpu,host={host},cpu=total user_pct={value},system_pct={value / 2} {time_ns}",
        f"mem,host={host} used_pct={value * 3} {time_ns}",
        f"job,host={host},job={job} active=1i {time_ns}",
    ]
    return Batch(host, rack, epoch, seq, ("\n".join(lines) + "\n").encode())


async def publish_async(url: str, batches: Iterable[Batch]) -> list[bool]:
    """Publishes with JetStream acks; returns per batch whether the stream
    dropped it as a duplicate."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    dup = []
    for b in batches:
        ack = await js.publish(raw_subject(b.rack, b.host), b.data, headers=b.headers())
        dup.append(bool(ack.duplicate))
    await nc.close()
    return dup


def publish(url: str, batches: Iterable[Batch]) -> list[bool]:
    return asyncio.run(publish_async(url, list(batches)))


def summary_payload(
    level: str,
    rack: str,
    job: str,
    time_ns: int,
    sources: Sequence[tuple[str, int, int]],
    sensors: dict[str, Summary],
) -> bytes:
    return json.dumps(
        {
            "v": 1,
            "level": level,
            "rack": rack,
            "job": job,
            "time_ns": time_ns,
            "sources": [list(s) for s in sources],
            "sensors": {k: s.to_json() for k, s in sensors.items()},
        }
    ).encode()


def rack_batches(
    racks: dict[str, tuple[str, ...]], periods: int, t0_ns: int, period_ns: int
) -> dict[tuple[str, int], list[Batch]]:
    """Per (rack, period), a batch of job j1 from each of the rack's hosts
    (seq = period + 1), their values differing by host and period."""
    return {
        (rack, i): [
            synthetic_batch(h, i + 1, t0_ns + i * period_ns, rack=rack, value=i + k)
            for k, h in enumerate(hosts)
        ]
        for rack, hosts in racks.items()
        for i in range(periods)
    }


def rack_partial(batches: Sequence[Batch], rack: str, job: str, time_ns: int) -> bytes:
    """What a rack reducer sends for (job, period): its rack's batches
    merged per sensor (job lines are not sensors), the batches as sources."""
    sensors: dict[str, Summary] = {}
    for b in batches:
        for line in b.data.decode().splitlines():
            key, fields, _t = line.split(" ")
            if key.startswith("job,"):
                continue
            tags = ",".join(t for t in key.split(",") if not t.startswith("host="))
            for f in fields.split(","):
                name, v = f.split("=")
                sensors.setdefault(f"{tags} {name}", Summary()).merge(Summary.of([float(v)]))
    sources = [(b.host, b.epoch, b.seq) for b in batches]
    return summary_payload("rack", rack, job, time_ns, sources, sensors)


def publish_raw_messages(url: str, messages: Sequence[tuple[str, bytes, dict[str, str]]]) -> None:
    async def run() -> None:
        nc = await nats.connect(url)
        js = nc.jetstream()
        for subject, data, headers in messages:
            await js.publish(subject, data, headers=headers)
        await nc.close()

    asyncio.run(run())


def hushmon(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hushmon.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def store_rows(db: Path, sql: str) -> list[tuple]:
    """The rows of ``sql`` on the store at ``db`` (a DuckDB file or a lake),
    opened read-only."""
    from hushmon.store.schema import open_store_readonly

    con = open_store_readonly(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def raw_message(b: Batch, seq: int = 0) -> Message:
    """A batch as the collector gets it from HM_RAW (stream sequence ``seq``)."""
    return Message(f"hm.raw.{b.rack}.{b.host}", b.headers(), b.data, stream_seq=seq)


def partial_message(
    batches: Sequence[Batch], rack: str, time_ns: int, msg_id: str, seq: int = 0, job: str = "j1"
) -> Message:
    """A rack's partial summary of ``batches`` as the collector gets it from HM_SUM."""
    payload = rack_partial(batches, rack, job, time_ns)
    return Message(f"hm.sum.rack.{rack}", {"Nats-Msg-Id": msg_id}, payload, stream_seq=seq)
