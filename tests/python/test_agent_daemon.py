"""hushmon-agent running as a daemon: the control protocol over its real
Unix socket, the spool (rotation, size bound, nothing lost on restart or
crash) and wall-clock-aligned timestamps."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


class Agent:
    """A hushmon-agent started for one test, stopped at its end."""

    def __init__(self, bin_dir: Path, work: Path, *args: str) -> None:
        self.work = work
        self.spool = work / "spool"
        self.sock = work / "agent.sock"
        self.log = work / "agent.log"
        self.args = [
            str(bin_dir / "hushmon-agent"),
            "--spool-dir",
            str(self.spool),
            "--socket",
            str(self.sock),
            "--host",
            "n1",
            *args,
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Agent:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=log)
        # Ready when it answers (a killed agent's socket file may still be
        # there until the new one replaces it).
        deadline = time.monotonic() + 10
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "agent did not answer on its socket"
            try:
                if self.request("status")[0].startswith("ok"):
                    return self
            except OSError:
                pass
            time.sleep(0.02)

    def request(self, *lines: str) -> list[str]:
        """Sends lines over one connection; one response line each."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(str(self.sock))
            s.sendall("".join(f"{line}\n" for line in lines).encode())
            answers: list[str] = []
            buf = b""
            while len(answers) < len(lines):
                chunk = s.recv(4096)
                assert chunk, "agent closed the connection early"
                buf += chunk
                *done, rest = buf.split(b"\n")
                answers.extend(d.decode() for d in done)
                buf = rest
            return answers

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 10) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def status(self) -> dict[str, str]:
        answer = self.request("status")[0]
        assert answer.startswith("ok "), answer
        return dict(item.split("=", 1) for item in answer.split()[1:])

    def spool_text(self) -> str:
        """Everything a reader would take: .lp whole, .lp.open to its last newline."""
        parts = []
        for f in sorted(self.spool.iterdir()):
            text = f.read_text()
            if f.name.endswith(".lp.open"):
                text = text[: text.rfind("\n") + 1]
            parts.append(text)
        return "".join(parts)


AgentFactory = Callable[..., Agent]


@pytest.fixture
def agent_factory(bin_dir: Path, tmp_path: Path) -> Iterator[AgentFactory]:
    started: list[Agent] = []

    def make(*args: str) -> Agent:
        agent = Agent(bin_dir, tmp_path, *args)
        started.append(agent)
        return agent

    yield make
    for agent in started:
        agent.stop()


def wait_until(check: Callable[[], object], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_control_protocol(agent_factory: AgentFactory) -> None:
    agent = agent_factory("--period-ms", "50", "--sources", "cpu,jobs,self")
    agent.start()
    status = agent.status()
    assert status["period_ms"] == "50" and status["sources"] == "cpu,jobs,self"
    assert status["jobs"] == "-" and status["sink"] == "spool"
    answers = agent.request(
        "job begin 42",
        "job begin 43 cgroup=system.slice/job43",
        "job begin bad/id",
        "job end 99",
        "jobs please",
        "set period=5ms",
        "set period=100ms",
        "",
    )
    assert answers[0] == "ok job 42 begins"
    assert answers[1] == "ok job 43 begins"
    assert answers[2].startswith("error bad job id 'bad/id'")
    assert answers[3] == "error job 99 is not running on this node"
    assert answers[4].startswith("error unknown request 'jobs please' (status, set [job=ID]")
    assert answers[5].startswith("error set: period '5ms' is not a whole number of ms in 10ms")
    assert answers[6].startswith("ok applied host=n1 period_ms=100 ")
    assert answers[7].startswith("error empty request")
    assert agent.status()["jobs"] == "42,43"
    samples = int(agent.status()["samples"])
    wait_until(lambda: int(agent.status()["samples"]) >= samples + 3)
    assert agent.request("flush") == ["ok flushed"]
    text = agent.spool_text()
    assert "job,host=n1,job=42 active=1i" in text
    assert "job,host=n1,job=43 active=1i" in text
    # the job's cgroup does not exist: logged, and sampling went on
    assert "cgroup of job 43" not in agent.log.read_text()  # cgroup source is off here
    assert agent.request("job end 42", "job end 43") == ["ok job 42 ends", "ok job 43 ends"]
    assert agent.status()["jobs"] == "-"
    # a line longer than the protocol allows closes that client only
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(str(agent.sock))
        s.sendall(b"x" * 5000)
        assert s.recv(100).startswith(b"error request line too long")
    assert agent.status()["period_ms"] == "100"


def test_timestamps_are_aligned_and_jitter_published(agent_factory: AgentFactory) -> None:
    agent = agent_factory("--period-ms", "100", "--offset-ms", "30", "--sources", "cpu,self")
    agent.start()
    wait_until(lambda: int(agent.status()["samples"]) >= 5)
    agent.request("flush")
    lines = [x for x in agent.spool_text().splitlines() if x.startswith("hushmon_agent,")]
    assert len(lines) >= 4
    for line in lines:
        ts = int(line.rsplit(" ", 1)[1])
        assert ts % 100_000_000 == 30_000_000, "timestamp = scheduled aligned instant + offset"
        fields = dict(kv.split("=") for kv in line.split(" ")[1].split(","))
        assert float(fields["jitter_us"]) >= 0
        assert fields["period_ms"] == "100i"
        assert 0 < int(fields["rss_bytes"][:-1]) < 64 * 2**20
    assert any("cpu_us" in line for line in lines[1:])


def test_reload_keeps_old_config_on_error(agent_factory: AgentFactory, tmp_path: Path) -> None:
    cfg = tmp_path / "agent.toml"
    cfg.write_text('period_ms = 100\nsources = ["cpu", "self"]\n')
    agent = agent_factory("--config", str(cfg))
    agent.start()
    assert agent.status()["period_ms"] == "100"
    cfg.write_text('period_ms = 200\nsources = ["cpu"\n')
    answer = agent.request("reload")[0]
    assert answer.startswith("error reload: ") and "(old config kept)" in answer
    assert agent.status()["period_ms"] == "100"
    cfg.write_text('period_ms = 200\nsources = ["cpu", "self", "mem"]\n')
    assert agent.request("reload") == ["ok reloaded period_ms=200 sources=3"]
    assert agent.status()["sources"] == "cpu,mem,self"
    # SIGHUP reloads too
    cfg.write_text('period_ms = 300\nsources = ["cpu"]\n')
    agent.signal(signal.SIGHUP)
    wait_until(lambda: agent.status()["period_ms"] == "300")
    samples = int(agent.status()["samples"])
    wait_until(lambda: int(agent.status()["samples"]) > samples)  # still sampling


def test_spool_rotation_and_clean_exit(agent_factory: AgentFactory) -> None:
    agent = agent_factory(
        "--period-ms", "20", "--sources", "cpu,load,mem,self", "--spool-file-bytes", "4096"
    )
    agent.start()
    wait_until(lambda: len(list(agent.spool.glob("*.lp"))) >= 3)
    agent.signal(signal.SIGTERM)
    assert agent.wait() == 0
    files = sorted(agent.spool.iterdir())
    assert files and all(f.name.endswith(".lp") for f in files), "exit closes the open file"
    for f in files:
        assert f.name.startswith("n1-")
        text = f.read_text()
        assert text.endswith("\n")
        assert len(text.encode()) <= 4096, "a file never passes its size limit"
        # whole batches: a file starts with the first line of a period
        assert text.startswith("cpu,host=n1,cpu=total") or text.startswith("load,")
    assert not agent.sock.exists(), "socket removed on exit"


def test_crash_recovery_and_restart(agent_factory: AgentFactory) -> None:
    agent = agent_factory("--period-ms", "20", "--sources", "cpu,self")
    agent.start()
    wait_until(lambda: int(agent.status()["samples"]) >= 5)
    agent.signal(signal.SIGKILL)
    agent.wait()
    leftovers = list(agent.spool.glob("*.lp.open"))
    assert len(leftovers) == 1
    # simulate a write cut in the middle of a line
    with leftovers[0].open("a") as f:
        f.write("cpu,host=n1,cpu=total user_pct=1")
    complete_lines = leftovers[0].read_text().count("\n")
    restarted = agent_factory("--period-ms", "20", "--sources", "cpu,self")
    restarted.start()
    assert "spool: recovered" in restarted.log.read_text()
    recovered = leftovers[0].with_name(leftovers[0].name[: -len(".open")])
    assert recovered.exists() and not leftovers[0].exists()
    text = recovered.read_text()
    assert text.count("\n") == complete_lines and text.endswith("\n")
    restarted.stop()
    assert not list(agent.spool.glob("*.lp.open"))


def test_spool_bound_drops_oldest_and_counts(agent_factory: AgentFactory) -> None:
    agent = agent_factory(
        "--period-ms", "10", "--sources", "cpu,load,mem,vm,self",
        "--spool-file-bytes", "4096", "--spool-total-bytes", "16384",
    )  # fmt: skip
    agent.start()
    wait_until(lambda: int(agent.status()["samples_dropped"]) > 0)
    total = sum(f.stat().st_size for f in agent.spool.iterdir())
    assert total <= 16384 + 4096
    agent.request("flush")
    last = [x for x in agent.spool_text().splitlines() if x.startswith("hushmon_agent,")][-1]
    assert "samples_dropped=0i" not in last


def test_another_agent_on_the_same_socket_is_refused(
    agent_factory: AgentFactory, bin_dir: Path, tmp_path: Path
) -> None:
    agent = agent_factory("--period-ms", "1000", "--sources", "self")
    agent.start()
    proc = subprocess.run(
        [str(bin_dir / "hushmon-agent"), "--socket", str(agent.sock), "--sources", "self",
         "--spool-dir", str(tmp_path / "other")],
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert f"another agent is listening on {agent.sock}" in proc.stderr
    assert agent.status()["period_ms"] == "1000"
    assert agent.proc is not None and agent.proc.poll() is None


def test_vanished_cgroup_is_logged_and_sampling_goes_on(
    agent_factory: AgentFactory, tmp_path: Path
) -> None:
    """A real cgroup v2 directory that disappears under the agent (reads of
    its open files then fail with ENODEV, which a fixture tree cannot do)."""
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    v2 = [line.split()[1] for line in mounts if line.split()[2] == "cgroup2"]
    if not v2 or not os.access(v2[0], os.W_OK):
        pytest.skip("no writable cgroup v2 mount here")
    root = Path(v2[0])
    cgroup = root / f"hm_test_{os.getpid()}"
    cgroup.mkdir()
    try:
        agent = agent_factory(
            "--period-ms", "50", "--sources", "jobs,cgroup,self",
            "--cgroup-root", str(root).lstrip("/"),
        )  # fmt: skip
        agent.start()
        assert agent.request(f"job begin 9 cgroup={cgroup.name}") == ["ok job 9 begins"]
        wait_until(lambda: f"cgroup,host=n1,job=9,cgroup={cgroup.name} " in agent.spool_text())
        cgroup.rmdir()
        wait_until(lambda: "cgroup of job 9 vanished" in agent.log.read_text())
        samples = int(agent.status()["samples"])
        wait_until(lambda: int(agent.status()["samples"]) > samples + 2)
        assert agent.status()["jobs"] == "9", "the announced job lasts until `job end`"
    finally:
        if cgroup.exists():
            cgroup.rmdir()


def test_unwritable_spool_is_logged_once_and_recovers(agent_factory: AgentFactory) -> None:
    agent = agent_factory(
        "--period-ms", "20", "--sources", "cpu,self", "--spool-file-bytes", "4096"
    )  # fmt: skip
    agent.start()
    wait_until(lambda: any(agent.spool.iterdir()))
    # The spool directory goes away and a plain file takes its name: every
    # rotation and every new file fails from now on.
    agent.spool.rename(agent.work / "moved-away")
    agent.spool.touch()
    wait_until(lambda: "counted as dropped" in agent.log.read_text())
    samples = int(agent.status()["samples"])
    wait_until(lambda: int(agent.status()["samples"]) > samples + 5)
    log = agent.log.read_text()
    assert log.count("counted as dropped") == 1, log  # said once, not every period
    assert int(agent.status()["samples_dropped"]) > 0
    agent.spool.unlink()
    wait_until(lambda: "sink works again" in agent.log.read_text())
    wait_until(lambda: agent.spool.is_dir() and any(agent.spool.iterdir()))


def test_daemon_mode_detaches_and_stops_on_sigterm(bin_dir: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "agent.pid"
    sock = tmp_path / "agent.sock"
    proc = subprocess.run(
        [str(bin_dir / "hushmon-agent"), "--daemon", "--pidfile", str(pidfile),
         "--socket", str(sock), "--spool-dir", str(tmp_path / "spool"),
         "--period-ms", "50", "--sources", "cpu,self"],
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr  # the parent returns at once
    wait_until(pidfile.exists)
    pid = int(pidfile.read_text())
    try:
        wait_until(sock.exists)
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(str(sock))
            s.sendall(b"status\n")
            assert s.recv(4096).startswith(b"ok period_ms=50")
    finally:
        os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not pidfile.exists())  # removed on a clean exit
    assert all(f.name.endswith(".lp") for f in (tmp_path / "spool").iterdir())
