"""The agent's nats sink against a real nats-server (docs/transport.md,
"Agent sink"): batches reach HM_RAW in order with the contract's headers
and the spool's exact bytes; nothing is lost when the server goes away and
comes back, or when the agent is killed -9 and started again; the spool's
bound, reached while disconnected, shows as counted drops and a gap; bad
settings are refused in one line."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest

from hushmon.transport.natsserver import (
    RAW_STREAM,
    LocalNatsServer,
    NatsServerConfig,
    ensure_streams,
    free_port,
)

PERIOD_MS = 100
HOST = "n1"
RACK = "r1"


@dataclass
class RawMsg:
    headers: dict[str, str]
    data: bytes
    subject: str

    @property
    def seq(self) -> int:
        return int(self.headers["Hm-Seq"])


def stream_messages(url: str) -> list[RawMsg]:
    """Every message in HM_RAW, in stream order."""

    async def fetch() -> list[RawMsg]:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            state = (await js.stream_info(RAW_STREAM)).state
            out = []
            for seq in range(state.first_seq, state.last_seq + 1):
                m = await js.get_msg(RAW_STREAM, seq)
                out.append(RawMsg(dict(m.headers or {}), m.data or b"", m.subject or ""))
            return out
        finally:
            await nc.close()

    return asyncio.run(fetch())


def wait_until(check: Callable[[], bool], timeout_s: float = 20, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.05)


class NatsAgent:
    """hushmon-agent with sink nats, cheap sources and a short period."""

    def __init__(self, bin_dir: Path, work: Path, url: str, *extra: str) -> None:
        self.work = work
        self.spool = work / "spool"
        self.sock = work / "agent.sock"
        self.log = work / "agent.log"
        self.args = [
            str(bin_dir / "hushmon-agent"), "--sink", "nats", "--nats-url", url,
            "--nats-rack", RACK, "--host", HOST, "--period-ms", str(PERIOD_MS),
            "--sources", "self,load", "--spool-dir", str(self.spool), "--socket", str(self.sock),
            *extra,
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> NatsAgent:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 10
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "agent did not answer on its socket"
            try:
                self.status()
                return self
            except OSError:
                time.sleep(0.02)

    def status(self) -> dict[str, str]:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(str(self.sock))
            s.sendall(b"status\n")
            line = s.recv(8192).decode().strip()
        assert line.startswith("ok "), line
        return dict(kv.split("=", 1) for kv in line[3:].split(" "))

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture()
def agents(bin_dir: Path) -> Iterator[Callable[..., NatsAgent]]:
    started: list[NatsAgent] = []

    def make(work: Path, url: str, *extra: str) -> NatsAgent:
        a = NatsAgent(bin_dir, work, url, *extra)
        started.append(a)
        return a

    yield make
    for a in started:
        a.stop(signal.SIGKILL)


def check_complete(msgs: list[RawMsg], upto: int) -> None:
    """Every seq 1..upto of this agent exactly once, one epoch."""
    seqs = [m.seq for m in msgs]
    assert sorted(seqs) == list(range(1, upto + 1)), seqs
    assert len({m.headers["Hm-Epoch"] for m in msgs}) == 1


def test_batches_arrive_in_order_with_headers_and_spool_bytes(
    nats_server: LocalNatsServer, agents: Callable[..., NatsAgent], tmp_path: Path
) -> None:
    agent = agents(tmp_path, nats_server.url).start()
    wait_until(lambda: int(agent.status()["acked_seq"]) >= 10, what="10 batches acked")
    # The open spool file holds every batch so far, in order.
    (spooled,) = list(agent.spool.glob(f"{HOST}-*.lp.open"))
    spool_bytes = spooled.read_bytes()
    msgs = stream_messages(nats_server.url)
    assert len(msgs) >= 10
    assert [m.seq for m in msgs] == list(range(1, len(msgs) + 1))  # in order, no gap
    body = b"".join(m.data for m in msgs)
    assert spool_bytes.startswith(body)  # the spool's exact bytes, batch by batch
    epoch = msgs[0].headers["Hm-Epoch"]
    for m in msgs:
        assert m.subject == f"hm.raw.{RACK}.{HOST}"
        h = m.headers
        assert h["Nats-Msg-Id"] == f"{HOST}:{epoch}:{m.seq}"
        assert h["Hm-Host"] == HOST and h["Hm-Epoch"] == epoch
        assert int(h["Hm-Lines"]) == m.data.count(b"\n") == 2  # load + hushmon_agent
        assert h["Hm-Dropped"] == "0"
        assert "Hm-Replay" not in h
        assert all(f"host={HOST}".encode() in line for line in m.data.splitlines())
    status = agent.status()
    assert status["sink"] == "nats" and status["connected"] == "1"
    assert status["dropped"] == "0" and status["replayed"] == "0"
    agent.stop()
    # Everything was acked: the closed spool file went with it.
    assert not list(agent.spool.glob("*.lp*"))


def test_server_outage_loses_nothing_and_marks_the_replay(
    nats_server: LocalNatsServer, agents: Callable[..., NatsAgent], tmp_path: Path
) -> None:
    agent = agents(tmp_path, nats_server.url).start()
    wait_until(lambda: int(agent.status()["acked_seq"]) >= 5, what="first batches acked")
    nats_server.stop()
    wait_until(lambda: agent.status()["connected"] == "0", what="agent sees the outage")
    at_stop = int(agent.status()["next_seq"])
    # sampling goes on into the spool: 20 periods (2 s alone; a loaded machine
    # may take longer, an agent that stopped sampling never gets there)
    wait_until(lambda: int(agent.status()["next_seq"]) - at_stop >= 20, what="sampling went on")
    during = int(agent.status()["next_seq"])
    nats_server.start()  # same port, same store dir
    wait_until(lambda: agent.status()["connected"] == "1", what="reconnection")
    wait_until(lambda: int(agent.status()["acked_seq"]) >= during, what="replay acked")
    status = agent.status()
    assert int(status["replayed"]) >= during - at_stop - 1
    agent.stop()
    last = int(agent_last_seq(agent))
    msgs = stream_messages(nats_server.url)
    check_complete(msgs, last)
    replayed = {m.seq for m in msgs if m.headers.get("Hm-Replay") == "1"}
    assert set(range(at_stop + 1, during)) <= replayed  # written while away, sent on return
    assert 1 not in replayed


def agent_last_seq(agent: NatsAgent) -> int:
    """The last seq the agent numbered, from its outbox log."""
    last = 0
    for line in (agent.spool / "nats.outbox").read_text().splitlines():
        if line.startswith("hm-outbox"):
            last = int(line.split("next=")[1].split()[0]) - 1
        elif line.startswith("B "):
            last = int(line.split()[1])
    return last


def test_kill_9_and_restart_continues_the_sequence(
    nats_server: LocalNatsServer, agents: Callable[..., NatsAgent], tmp_path: Path
) -> None:
    agent = agents(tmp_path, nats_server.url).start()
    killed_at = 0
    for _ in range(2):  # twice: the second start reads a log the first rewrote
        target = killed_at + 8
        current = agent
        wait_until(lambda: int(current.status()["acked_seq"]) >= target)  # noqa: B023
        time.sleep(0.23)  # somewhere inside a period
        agent.stop(signal.SIGKILL)
        killed_at = agent_last_seq(agent)
        agent = agents(tmp_path, nats_server.url).start()
    wait_until(lambda: int(agent.status()["acked_seq"]) >= killed_at + 5, what="new batches")
    agent.stop()
    last = agent_last_seq(agent)
    msgs = stream_messages(nats_server.url)
    check_complete(msgs, last)  # one epoch, seq continued, none lost, none twice
    assert last > killed_at + 5
    log = agent.log.read_text()
    assert "stopping" in log and "nats: connected" in log
    assert "not an outbox record" not in log


def test_spool_bound_while_disconnected_counts_drops_and_shows_the_gap(
    agents: Callable[..., NatsAgent], tmp_path: Path
) -> None:
    server = LocalNatsServer(
        NatsServerConfig(name="late", store_dir=tmp_path / "js", port=free_port()), tmp_path
    )
    # ~190 bytes a batch: a file holds ~21 batches, the spool ~2 files.
    agent = agents(
        tmp_path, server.url, "--spool-file-bytes", "4096", "--spool-total-bytes", "8192",
        "--nats-publish-every-ms", "0",  # each batch as it comes: pending says the backlog
    ).start()  # fmt: skip
    wait_until(lambda: int(agent.status()["dropped"]) >= 10, what="bound reached", timeout_s=30)
    assert agent.status()["connected"] == "0"
    server.start()
    try:
        ensure_streams(server.url)
        wait_until(lambda: int(agent.status()["pending"]) <= 1, what="backlog published")
        wait_until(lambda: int(agent.status()["acked_seq"]) >= int(agent.status()["next_seq"]) - 3)
        status = agent.status()
        agent.stop()
        dropped = int(status["dropped"])
        assert int(status["samples_dropped"]) >= 2 * dropped  # 2 lines per batch
        msgs = stream_messages(server.url)
        seqs = sorted(m.seq for m in msgs)
        last = agent_last_seq(agent)
        missing = sorted(set(range(1, last + 1)) - set(seqs))
        # The gap is the oldest batches, exactly as many as counted.
        assert missing == list(range(1, len(missing) + 1)) and len(missing) >= dropped
        assert len(seqs) == len(set(seqs))
        assert int(msgs[-1].headers["Hm-Dropped"]) == len(missing)
        assert all(m.headers.get("Hm-Replay") == "1" for m in msgs[:5])
    finally:
        server.stop()


def set_raw_subjects(url: str, subjects: str) -> None:
    """Changes which subjects HM_RAW takes (the rest are dropped unheard)."""

    async def update() -> None:
        from nats.js.api import StorageType, StreamConfig

        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            cfg = (await js.stream_info(RAW_STREAM)).config
            await js.update_stream(
                StreamConfig(
                    name=RAW_STREAM,
                    subjects=[subjects],
                    storage=StorageType.FILE,
                    duplicate_window=cfg.duplicate_window,
                    max_msg_size=cfg.max_msg_size,
                )
            )
        finally:
            await nc.close()

    asyncio.run(update())


def test_batches_the_server_drops_while_connected_are_sent_again(
    nats_server: LocalNatsServer, agents: Callable[..., NatsAgent], tmp_path: Path
) -> None:
    """While HM_RAW stops taking the agent's subject the server drops its
    batches (the connection stays up, nothing is stored): only the
    per-batch acks can tell, and the batches must be sent again."""
    agent = agents(tmp_path, nats_server.url, "--nats-publish-every-ms", "0").start()
    wait_until(lambda: int(agent.status()["acked_seq"]) >= 3, what="first batches acked")
    lost_from = int(agent.status()["next_seq"])
    set_raw_subjects(nats_server.url, "hm.raw.nobody.>")
    # 3 periods published into the void (0.3 s alone), however slow the machine
    wait_until(lambda: int(agent.status()["next_seq"]) - lost_from >= 4, what="3 batches lost")
    set_raw_subjects(nats_server.url, "hm.raw.>")
    lost_to = int(agent.status()["next_seq"])
    assert lost_to - lost_from >= 3
    wait_until(
        lambda: int(agent.status()["acked_seq"]) >= lost_to + 2, what="lost batches sent again"
    )
    status = agent.status()
    agent.stop()
    assert int(status["replayed"]) >= 3
    msgs = stream_messages(nats_server.url)
    check_complete(msgs, agent_last_seq(agent))  # none lost, none twice
    replayed = {m.seq for m in msgs if m.headers.get("Hm-Replay") == "1"}
    assert len(replayed & set(range(lost_from, lost_to))) >= 2


@pytest.mark.parametrize("every_ms", [0, 1000])
def test_publish_every_ms_sends_the_batches_of_several_periods_together(
    nats_server: LocalNatsServer, agents: Callable[..., NatsAgent], tmp_path: Path, every_ms: int
) -> None:
    """nats.publish_every_ms: at a 100 ms period and 1000 ms the batches go
    ~10 at a time (one write); at 0 one per period. Either way in order,
    none lost, none marked as a replay."""
    agent = agents(tmp_path, nats_server.url, "--nats-publish-every-ms", str(every_ms)).start()
    # Watched until enough was published (about 3 s alone), not for a fixed
    # window a loaded machine fills with fewer periods. A late look (the
    # status poll is slow under load) can see two writes as one step: at 0
    # the bound is 4, still far below the ~10 a write of 1000 ms carries.
    seen = [int(agent.status()["published"])]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and seen[-1] - seen[0] < 30:
        time.sleep(0.03)
        seen.append(int(agent.status()["published"]))
    steps = [b - a for a, b in itertools.pairwise(seen) if b != a]
    agent.stop()
    assert seen[-1] - seen[0] >= 30, seen
    if every_ms:
        assert len(steps) >= 2 and max(steps) >= 6, steps
    else:
        assert len(steps) >= 8 and max(steps) <= 4, steps
    msgs = stream_messages(nats_server.url)
    check_complete(msgs, agent_last_seq(agent))
    assert not any(m.headers.get("Hm-Replay") for m in msgs)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nats-rack", "rack.1"], "nats.rack 'rack.1' is not a NATS subject token"),
        (["--nats-rack", "r>"], "is not a NATS subject token"),
        (["--nats-rack", ""], "nats.rack must not be empty"),
        (["--host", "n*1"], "host 'n*1' is not a NATS subject token"),
        (["--host", "n 1"], "is not a NATS subject token"),
        (["--nats-url", " , "], "nats.url must name at least one server"),
        (["--nats-url", "nats://a:1, nats://b c:2"], "expected a comma list of servers"),
    ],
)
def test_bad_settings_one_line_exit_2(
    bin_dir: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    proc = subprocess.run(
        [str(bin_dir / "hushmon-agent"), "--sink", "nats", "--spool-dir", str(tmp_path / "s"),
         "--socket", "", "--host", "n1", *args],
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "s").exists()


def test_bad_settings_in_the_file_one_line_exit_2(bin_dir: Path, tmp_path: Path) -> None:
    conf = tmp_path / "agent.toml"
    conf.write_text('[sink]\ntype = "nats"\n[nats]\nrack = "a b"\n')
    proc = subprocess.run(
        [str(bin_dir / "hushmon-agent"), "--config", str(conf), "--socket", ""],
        capture_output=True, text=True, timeout=10, check=False,
        env={**os.environ},
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "nats.rack 'a b'" in proc.stderr
