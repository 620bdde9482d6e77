"""Faults on a bed with the NATS transport, and the exactly-once check
after each (tests/testbed/test_transport_faults.py, shortened;
bench/bench_transport_faults.py, full length).

The truth is each agent's own numbering: the agent writes every batch to
its spool before it publishes it (write-ahead), numbered 1, 2, 3 ... per
(host, epoch), and its outbox log (<spool>/nats.outbox) records each
batch's seq and lines. The nats sink removes a spool file once every batch
in it is acknowledged, so the spool files themselves cannot be read back
afterwards; the numbering and the stream's copy can. After a fault the
check fixes, per node, the last batch written so far, waits until the
stream has acknowledged it and the collector has stored the stream up to
there, then compares:

- batches: every (host, epoch, seq) from 1 to that last one is in the
  store's ``transport_batches`` (lost = those missing), with the lines the
  outbox log recorded for it (where the log still holds the record);
- values: HM_RAW's messages (the exact bytes the agents spooled), ingested
  into a scratch store the embedded way (``hushmon ingest``'s code), hold
  exactly the values the collector stored, up to that batch's period
  (lost = in the stream, not in the store; extra = the other way round);
- duplicated: values stored more than once for one (series, time).
"""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hushmon.agentclient import AgentError
from hushmon.errors import HushmonError
from hushmon.testbed import agents, delivery, network, system, transport
from hushmon.testbed.spec import rack_name
from hushmon.testbed.state import Bed

Say = Callable[[str], None]


def _quiet(_message: str) -> None:
    pass


@dataclass
class NodeCount:
    host: str
    epoch: int
    last_seq: int
    batches_stored: int = 0
    batches_lost: list[int] = field(default_factory=list)
    lines_mismatch: list[int] = field(default_factory=list)
    values_spool: int = 0
    values_lost: int = 0
    values_extra: int = 0
    values_duplicated: int = 0


@dataclass
class Check:
    """The outcome of one exactly-once check over every node."""

    fault: str
    nodes: list[NodeCount]
    waited_s: float
    not_collected: list[str]

    @property
    def lost(self) -> int:
        return sum(len(n.batches_lost) + len(n.lines_mismatch) + n.values_lost for n in self.nodes)

    @property
    def duplicated(self) -> int:
        return sum(n.values_duplicated + n.values_extra for n in self.nodes)

    @property
    def batches(self) -> int:
        return sum(n.batches_stored for n in self.nodes)

    @property
    def values(self) -> int:
        return sum(n.values_spool for n in self.nodes)

    def line(self) -> str:
        late = (
            " - NOT ALL COLLECTED before the timeout: what was still on its way counts as lost"
            if self.not_collected
            else ""
        )
        return (
            f"{self.fault}: lost = {self.lost}, duplicated = {self.duplicated}{late} "
            f"({self.batches} batches, {self.values} values from {len(self.nodes)} nodes; "
            f"collected {self.waited_s:.1f} s after the check began)"
        )

    def details(self) -> list[str]:
        out = list(self.not_collected)
        for n in self.nodes:
            if (
                n.batches_lost
                or n.lines_mismatch
                or n.values_lost
                or n.values_extra
                or n.values_duplicated
            ):
                out.append(
                    f"{n.host}: epoch {n.epoch} seq 1..{n.last_seq}: "
                    f"batches lost {n.batches_lost[:10]}, lines differ in {n.lines_mismatch[:10]}, "
                    f"values lost {n.values_lost}, "
                    f"extra {n.values_extra}, duplicated {n.values_duplicated}"
                )
        return out


def _targets(bed: Bed) -> dict[str, tuple[int, int]]:
    """Per node: (epoch, last seq written so far)."""
    out = {}
    for node in bed.nodes():
        st = agents.client(bed, node.name).status()
        if st.get("sink") != "nats":
            raise HushmonError(f"the agent of {node.name} has sink {st.get('sink')}, not nats")
        out[node.name] = (int(st["epoch"]), int(st["next_seq"]) - 1)
    return out


def check_exactly_once(bed: Bed, fault: str, timeout_s: float = 120.0) -> Check:
    """Every batch the agents have written so far is in the store exactly once."""
    from hushmon.store.ingest import ingest_spool
    from hushmon.store.schema import open_store

    started = time.monotonic()
    targets = _targets(bed)
    missing = delivery.wait_collected(bed, timeout_s)
    waited = time.monotonic() - started
    counts = [NodeCount(h, e, s) for h, (e, s) in sorted(targets.items())]
    with tempfile.TemporaryDirectory(prefix="hm-truth-", dir="/var/tmp") as tmp:
        truth = Path(tmp) / "stream.duckdb"
        copy = Path(tmp) / "spool"
        asyncio.run(_stream_to_spool(copy))
        ingest_spool(truth, copy)  # the embedded path, from the same bytes
        con = open_store(truth)
        try:
            _attach_store(con, bed.store)  # the lake, read while the collector writes
            for n in counts:
                _count_node(con, n, _outbox_lines(bed.node_spool(n.host), n.epoch))
        finally:
            con.close()
    return Check(fault, counts, waited, missing)


def _attach_store(con: Any, store: Path) -> None:
    """The bed's store as ``store`` beside the truth: a lake read-only (its
    views too: ``series`` is one over ``series_rows``), or a DuckDB file."""
    from hushmon.store.lake import CATALOG_NAME, DATA_NAME, is_lake, load_extensions

    if not is_lake(store):
        con.execute(f"ATTACH '{store}' AS store (READ_ONLY)")
        return
    load_extensions(con)
    con.execute(
        f"ATTACH 'ducklake:sqlite:{store / CATALOG_NAME}' AS store "
        f"(DATA_PATH '{store / DATA_NAME}/', READ_ONLY)"
    )


async def _stream_to_spool(folder: Path) -> None:
    """HM_RAW's messages as spool files, one per host (an ephemeral consumer
    reads the stream from its start; the stream has dropped duplicates)."""

    folder.mkdir(parents=True)
    nc = await transport.connect_hub()
    files: dict[str, Any] = {}
    try:
        js = nc.jetstream(timeout=10)
        last, sub = await _truth_consumer(js)
        seen = 0
        while seen < last:
            for msg in await sub.fetch(500, timeout=10):
                seen = max(seen, int(msg.metadata.sequence.stream))
                host = (msg.headers or {}).get("Hm-Host") or msg.subject.rsplit(".", 1)[-1]
                if host not in files:
                    files[host] = (folder / f"{host}-1-1.lp").open("wb")
                files[host].write(msg.data if msg.data.endswith(b"\n") else msg.data + b"\n")
                await msg.ack()
        await sub.unsubscribe()
    finally:
        for f in files.values():
            f.close()
        await nc.close()


async def _truth_consumer(js: Any, wait_s: float = 90.0) -> tuple[int, Any]:
    """HM_RAW's last sequence and an ephemeral pull consumer from its start.
    Right after every hub was killed the JetStream API may still be electing
    its leaders (the collector was already served, but under CI's load a
    first consumer creation ran past 10 s): asked again until wait_s."""
    import nats

    from hushmon.transport import natsserver as ns

    deadline = time.monotonic() + wait_s
    while True:
        try:
            last = (await js.stream_info(ns.RAW_STREAM)).state.last_seq
            return last, await js.pull_subscribe(ns.RAW_SUBJECTS, stream=ns.RAW_STREAM)
        except (nats.errors.TimeoutError, TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1.0)


def _outbox_lines(spool: Path, epoch: int) -> dict[int, int]:
    """seq -> lines of the batches the agent's outbox log still records
    (the log is compacted on start and when it grows: older acked batches
    are gone from it)."""
    out: dict[int, int] = {}
    try:
        text = (spool / "nats.outbox").read_text()
    except OSError:
        return out
    lines = text.splitlines()
    if not lines or f"epoch={epoch} " not in lines[0] + " ":
        return out
    for line in lines[1:]:
        parts = line.split()
        if len(parts) == 7 and parts[0] == "B":
            out[int(parts[1])] = int(parts[6])
    return out


def _count_node(con: Any, n: NodeCount, outbox: dict[int, int]) -> None:
    stored = {
        int(r[0]): int(r[1])
        for r in con.execute(
            "SELECT seq, lines FROM store.transport_batches "
            "WHERE host = ? AND epoch = ? AND seq <= ?",
            [n.host, n.epoch, n.last_seq],
        ).fetchall()
    }
    seqs = set(stored)
    n.batches_stored = len(seqs)
    n.batches_lost = sorted(set(range(1, n.last_seq + 1)) - seqs)
    n.lines_mismatch = sorted(
        q for q, lines in outbox.items() if q in stored and stored[q] != lines
    )
    row = con.execute(
        "SELECT period_ns FROM store.transport_batches WHERE host = ? AND epoch = ? AND seq = ?",
        [n.host, n.epoch, n.last_seq],
    ).fetchone()
    if row is None or row[0] is None:
        return  # the last batch itself is lost: counted above
    t_max = int(row[0])

    def values(db: str) -> str:
        return f"""SELECT s.measurement, s.tags, s.field, v.time_ns, v.value
                   FROM {db}.samples v JOIN {db}.series s USING (series_id)
                   WHERE s.host = '{n.host}' AND v.time_ns <= {t_max}"""

    spool, store = values("main"), values("store")
    n.values_spool = int(con.execute(f"SELECT count(*) FROM ({spool})").fetchone()[0])
    n.values_lost = int(
        con.execute(f"SELECT count(*) FROM ({spool} EXCEPT ALL {store})").fetchone()[0]
    )
    n.values_extra = int(
        con.execute(f"SELECT count(*) FROM ({store} EXCEPT ALL {spool})").fetchone()[0]
    )
    n.values_duplicated = int(
        con.execute(
            f"""SELECT coalesce(sum(c - 1), 0) FROM (
                    SELECT count(*) AS c FROM store.samples v
                    JOIN store.series s USING (series_id)
                    WHERE s.host = '{n.host}' AND v.time_ns <= {t_max}
                    GROUP BY v.series_id, v.time_ns HAVING count(*) > 1)"""
        ).fetchone()[0]
    )


# ---- the faults ----------------------------------------------------------


def kill9(bed: Bed, name: str) -> int:
    transport.refresh_pids(bed)
    pid = bed.daemons.get(name)
    if not pid or not system.running(pid):
        raise HushmonError(f"{name} is not running")
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while system.running(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return pid


def kill_rack_reducer(bed: Bed, rack: int = 1, say: Say = _quiet) -> None:
    """kill -9 one of the rack's two reducers; the other takes its messages
    over (the durable consumer redelivers what the dead one had not acked)."""
    name = f"reduce@{rack_name(rack)}.a"
    say(f"kill -9 {name} (pid {kill9(bed, name)}); reduce@{rack_name(rack)}.b carries on")


def restart_reducer(bed: Bed, rack: int = 1) -> None:
    transport.restart(bed, f"reduce@{rack_name(rack)}.a")


def kill_hub(bed: Bed, down_s: float, say: Say = _quiet) -> None:
    """kill -9 every hub server, wait, start them again (streams recover
    from their files; leaves, agents, reducers and the collector reconnect
    on their own)."""
    hubs = sorted(n for n in bed.daemons if n.startswith("nats@hub"))
    for name in hubs:
        kill9(bed, name)
    say(f"kill -9 {', '.join(hubs)}; down {down_s:g} s")
    time.sleep(down_s)
    for name in hubs:
        transport.restart(bed, name)
    bed.save()


def kill_hub_server(bed: Bed, name: str, down_s: float, say: Say = _quiet) -> None:
    """kill -9 one hub server (the cluster keeps a quorum), then start it again."""
    kill9(bed, name)
    say(f"kill -9 {name}; down {down_s:g} s")
    time.sleep(down_s)
    transport.restart(bed, name)


def uplink_down(bed: Bed, rack: int, down_s: float, say: Say = _quiet) -> None:
    """The rack's uplink down (its veth at the rack switch), then up again."""
    network.set_uplink(rack, False)
    say(f"uplink of rack {rack} down for {down_s:g} s")
    try:
        time.sleep(down_s)
    finally:
        network.set_uplink(rack, True)


def kill_agent_mid_batch(bed: Bed, node: str, say: Say = _quiet) -> None:
    """kill -9 the node's agent a few ms after a sampling instant (while it
    writes and publishes that period's batch), then start it again."""
    period_s = bed.spec.period_ms / 1000.0
    now = time.time()
    # Agents sample on instants aligned to the period (offset 0).
    time.sleep(period_s - (now % period_s) + 0.004)
    pid = kill9(bed, f"agent@{node}")
    say(f"kill -9 agent@{node} (pid {pid}) 4 ms after a sampling instant")
    agents.start(bed, [node])
    bed.save()


def kill_collector(bed: Bed, say: Say = _quiet) -> None:
    """kill -9 the collector (mid-transaction, likely), then start it again."""
    say(f"kill -9 collect (pid {kill9(bed, 'collect')}); started again")
    transport.restart(bed, "collect")


def agents_connected(bed: Bed, timeout_s: float = 30.0) -> list[str]:
    """Nodes whose agent is not (yet) connected to its leaf after the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        off = []
        for node in bed.nodes():
            try:
                if agents.client(bed, node.name).status().get("connected") != "1":
                    off.append(node.name)
            except AgentError:
                off.append(node.name)
        if not off or time.monotonic() > deadline:
            return off
        time.sleep(0.25)


def reducers_drained(bed: Bed, timeout_s: float = 60.0) -> list[str]:
    """The rack reducers' and the top reducer's consumers have taken every
    message (the tree works again); returns those still behind."""

    async def backlog() -> dict[str, int]:

        from hushmon.transport import natsserver as ns

        nc = await transport.connect_hub()
        try:
            js = nc.jetstream(timeout=5)
            out = {}
            names = [
                (ns.RAW_STREAM, f"reduce-{rack_name(r)}") for r in range(1, bed.spec.racks + 1)
            ]
            names.append(transport.TOP_CONSUMER)
            for stream, durable in names:
                info = await js.consumer_info(stream, durable)
                last = (await js.stream_info(stream)).state.last_seq
                # Delivered up to (nearly) the end of the stream: a period or
                # two may be held open by the reducer, waiting for stragglers.
                out[durable] = int(last) - int(info.delivered.stream_seq or 0)
            return out
        finally:
            await nc.close()

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            # A rack reducer may hold the last periods open (grace: 2 periods).
            allowed = 3 * bed.spec.nodes
            behind = {k: v for k, v in asyncio.run(backlog()).items() if v > allowed}
        except Exception as exc:  # noqa: BLE001 - nats-py raises many kinds
            behind = {f"hub ({type(exc).__name__})": -1}
        if not behind or time.monotonic() > deadline:
            return [f"{k}: {v} behind" for k, v in behind.items()]
        time.sleep(0.5)


# ---- the sequence the test and the benchmark run ---------------------------


@dataclass(frozen=True)
class Durations:
    """How long each fault lasts and data flows around it."""

    flow_s: float = 3.0  # data flowing before and after each fault
    hub_down_s: float = 3.0
    uplink_down_s: float = 10.0


SHORT = Durations()
FULL = Durations(flow_s=10.0, hub_down_s=10.0, uplink_down_s=60.0)


def tree_repaired(bed: Bed) -> list[str]:
    """What is not back after a fault: agents off their leaf, reducers behind."""
    return [f"agent of {n} not connected" for n in agents_connected(bed)] + reducers_drained(bed)


def run_faults(
    bed: Bed, d: Durations = SHORT, say: Say = _quiet, only: list[str] | None = None
) -> list[tuple[Check, list[str]]]:
    """Every fault in turn, data flowing around it; after each the
    exactly-once check and whether the tree repaired itself."""
    last_rack = bed.spec.racks
    node = bed.nodes()[-1].name
    faults: list[tuple[str, Callable[[], None]]] = [
        ("reducer kill -9", lambda: kill_rack_reducer(bed, 1, say)),
        ("hub kill -9 and restart", lambda: kill_hub(bed, d.hub_down_s, say)),
        (
            f"uplink of rack {last_rack} down {d.uplink_down_s:g} s",
            lambda: uplink_down(bed, last_rack, d.uplink_down_s, say),
        ),
        (f"agent kill -9 mid-batch ({node})", lambda: kill_agent_mid_batch(bed, node, say)),
        ("collector kill -9 and restart", lambda: kill_collector(bed, say)),
    ]
    out = []
    for name, act in faults:
        if only and not any(name.startswith(o) for o in only):
            continue
        time.sleep(d.flow_s)
        act()
        time.sleep(d.flow_s)
        check = check_exactly_once(bed, name)
        repaired = tree_repaired(bed)
        say(check.line())
        for line in check.details() + [f"not repaired: {r}" for r in repaired]:
            say(f"    {line}")
        out.append((check, repaired))
        if name.startswith("reducer"):
            restart_reducer(bed, 1)  # back to two instances for the next faults
    return out
