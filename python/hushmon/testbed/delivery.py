"""Waiting until a run's data is collected on a bed with ``--transport
nats``: every batch the nodes' agents had written is in the hub's stream
and stored by the collector. Used by a monitored run's end (the digest
reads the collector's store) and by the fault checks.

Apart from :mod:`hushmon.testbed.transport` (which builds the NATS side)
because it asks the agents (:mod:`hushmon.testbed.agents`), which in turn
take their NATS settings from there.
"""

from __future__ import annotations

import asyncio
import time

from hushmon.agentclient import AgentError
from hushmon.testbed import agents
from hushmon.testbed.state import Bed
from hushmon.testbed.transport import COLLECT_CONSUMERS, connect_hub
from hushmon.transport import natsserver as ns

DELIVERY_TIMEOUT_S = 60.0
DELIVERY_POLL_S = 0.25


def _agent_targets(bed: Bed, nodes: list[str]) -> tuple[dict[str, int], list[str]]:
    """Each nats agent's last batch so far (next_seq - 1): once the stream
    has acknowledged it, every batch written before it is in HM_RAW."""
    targets, trouble = {}, []
    for node in nodes:
        try:
            st = agents.client(bed, node).status()
        except AgentError as exc:
            trouble.append(f"{node}: agent not answering ({exc})")
            continue
        if st.get("sink") == "nats":
            targets[node] = int(st.get("next_seq", "1")) - 1
    return targets, trouble


def _agents_behind(bed: Bed, targets: dict[str, int]) -> list[str]:
    behind = []
    for node, seq in targets.items():
        try:
            acked = int(agents.client(bed, node).status().get("acked_seq", "0"))
        except AgentError as exc:
            behind.append(f"{node}: agent not answering ({exc})")
            continue
        if acked < seq:
            behind.append(f"{node}: batches {acked + 1}..{seq} not acknowledged by the stream")
    return behind


async def _raw_positions() -> tuple[int, int]:
    """(HM_RAW's last stream sequence, the collector's ack floor in it)."""
    nc = await connect_hub()
    try:
        js = nc.jetstream(timeout=5)
        last = (await js.stream_info(ns.RAW_STREAM)).state.last_seq
        info = await js.consumer_info(ns.RAW_STREAM, COLLECT_CONSUMERS[0][1])
        floor = info.ack_floor.stream_seq if info.ack_floor else 0
        return int(last), int(floor or 0)
    finally:
        await nc.close()


def wait_collected(bed: Bed, timeout_s: float = DELIVERY_TIMEOUT_S) -> list[str]:
    """Waits until every batch the agents had written when called is in
    HM_RAW (each agent's acked_seq reached its last seq) and the collector
    has stored and acked the stream up to there; returns what was still
    missing at the timeout (empty: all collected). Agents keep sampling
    meanwhile: the targets are fixed at the call."""
    deadline = time.monotonic() + timeout_s
    targets, left = _agent_targets(bed, [n.name for n in bed.nodes()])
    if left:
        return left
    stream_target = 0
    while True:
        left = [] if stream_target else _agents_behind(bed, targets)
        if not left:
            try:
                last, floor = asyncio.run(_raw_positions())
            except Exception as exc:  # noqa: BLE001 - nats-py raises many kinds
                left = [f"the hub does not answer ({type(exc).__name__}: {exc})"]
            else:
                # Fixed once the agents' batches are all in the stream.
                stream_target = stream_target or last
                if floor >= stream_target:
                    return []
                left = [
                    f"the collector has stored HM_RAW up to {floor}, "
                    f"{stream_target - floor} message(s) to go"
                ]
        if time.monotonic() > deadline:
            return left
        time.sleep(DELIVERY_POLL_S)
