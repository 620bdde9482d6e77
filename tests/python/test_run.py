"""``hushmon run``'s control flow, against a stand-in agent that speaks the
control-socket protocol of docs/formats.md and writes a line-protocol spool:
the order of requests, the exit code passed through, Ctrl-C keeping the
data, a running agent reused, an agent that cannot start.

(The real agent is exercised in test_run_agent.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from waiting import wait_until

from hushmon.agentclient import AgentClient
from hushmon.datadir import DataDir
from hushmon.run import agent as agent_mod
from hushmon.run import command as command_mod
from hushmon.run.session import RunOptions, run_monitored

# A stand-in for hushmon-agent: same flags, same socket protocol, same spool
# naming; it also logs every request it answers, so the tests can check the
# order. Samples every period: a cpu line, and a job line per active job.
FAKE_AGENT = textwrap.dedent(
    """\
    import os, signal, socket, sys, threading, time
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    spool, sock_path = args["--spool-dir"], args["--socket"]
    period = int(args.get("--period-ms", "1000")) / 1000.0
    log = open(os.environ["FAKE_AGENT_LOG"], "a", buffering=1)
    if os.environ.get("FAKE_AGENT_PIDFILE"):
        open(os.environ["FAKE_AGENT_PIDFILE"], "w").write(str(os.getpid()))
    if os.environ.get("FAKE_AGENT_FAIL"):
        print("fake-agent: cannot open /proc/stat: simulated", file=sys.stderr)
        sys.exit(3)
    # jobs announced before (as Slurm's prolog does on a real node)
    jobs = set(filter(None, os.environ.get("FAKE_AGENT_JOBS", "").split(",")))
    samples, lock = [0], threading.Lock()
    state = {"seq": 0, "file": None}
    def open_file():
        name = f"fake-{time.time_ns()}-{state['seq']}.lp.open"
        state["seq"] += 1
        state["file"] = open(os.path.join(spool, name), "a")
    def close_file():
        f = state["file"]
        if f is not None:
            f.close()
            os.rename(f.name, f.name[: -len(".open")])
            state["file"] = None
    def sampler():
        while True:
            time.sleep(period - time.time() % period)
            now = int(time.time() // period * period * 1e9)
            with lock:
                if state["file"] is None:
                    open_file()
                f = state["file"]
                f.write(f"cpu,host=fake,cpu=total user_pct=50,idle_pct=50 {now}\\n")
                for j in sorted(jobs):
                    f.write(f"job,host=fake,job={j} active=1i {now}\\n")
                f.flush()
                samples[0] += 1
    def stop(*_):
        with lock:
            close_file()
        log.write("stopped\\n")
        os._exit(0)
    signal.signal(signal.SIGTERM, stop)
    if os.path.exists(sock_path):
        os.unlink(sock_path)
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(sock_path)
    srv.listen(8)
    threading.Thread(target=sampler, daemon=True).start()
    while True:
        conn, _ = srv.accept()
        line = conn.makefile().readline().strip()
        log.write(line + "\\n")
        words = line.split()
        with lock:
            if line == "status":
                reply = (f"ok period_ms={int(period * 1000)} samples={samples[0]} "
                         f"jobs={','.join(sorted(jobs)) or '-'} spool={spool}")
            elif words[:2] == ["job", "begin"] and words[2] in jobs:
                reply = f"ok job {words[2]} runs already (owner 1000)"
            elif words[:2] == ["job", "begin"]:
                jobs.add(words[2]); reply = "ok"
            elif words[:2] == ["job", "end"]:
                jobs.discard(words[2]); reply = "ok"
            elif line == "flush":
                close_file(); reply = "ok"
            elif len(words) == 2 and words[0] == "set" and os.environ.get("FAKE_AGENT_USER_ONLY"):
                reply = "error not authorized: uid 1000 may not change the node's measurement"
            elif words[:1] == ["set"] and len(words) == 2 and words[1].startswith("period="):
                period = int(words[1].removeprefix("period=").removesuffix("ms")) / 1000.0
                reply = f"ok applied period_ms={int(period * 1000)} scope=node"
            elif len(words) == 3 and words[0] == "set" and words[1][4:] in jobs:
                period = int(words[2].removeprefix("period=").removesuffix("ms")) / 1000.0
                reply = f"ok applied period_ms={int(period * 1000)} scope=job:{words[1][4:]}"
            else:
                reply = "error unknown request"
        conn.sendall((reply + "\\n").encode())
        conn.close()
    """
)


@pytest.fixture
def fake_agent(tmp_path: Path) -> Path:
    path = tmp_path / "fake-agent"
    path.write_text(f"#!{sys.executable}\n" + FAKE_AGENT)
    path.chmod(0o755)
    return path


@pytest.fixture
def agent_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "agent-requests.log"
    monkeypatch.setenv("FAKE_AGENT_LOG", str(log))
    return log


def requests(log: Path) -> list[str]:
    return [ln for ln in log.read_text().splitlines() if ln != "status"]


def hushmon_run(
    *args: str, timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hushmon.cli", "run", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie may linger in a container
    whose init does not reap)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


def spool_text(data: Path) -> str:
    texts = []
    for path in sorted((data / "spool").glob("*.lp*")):
        try:
            texts.append(path.read_text())
        except FileNotFoundError:  # an open file closed (renamed) while reading
            continue
    return "".join(texts)


def test_control_flow_in_order(tmp_path: Path, fake_agent: Path, agent_log: Path) -> None:
    data, summary = tmp_path / "data", tmp_path / "run.json"
    out = hushmon_run(
        "--data-dir", str(data), "--job", "flow1", "--period", "200", "--agent", str(fake_agent),
        "--json", str(summary), "--", "sh", "-c", "sleep 0.5; echo from-the-job",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == "from-the-job\n"  # the command's stdout is untouched
    assert requests(agent_log) == ["job begin flow1", "job end flow1", "flush", "stopped"]
    # Every spool file is closed (renamed .lp) before ingest, and the job's
    # periods are in it.
    assert not list((data / "spool").glob("*.open"))
    assert "job=flow1 active=1i" in spool_text(data)
    result = json.loads(summary.read_text())
    assert result["job"] == "flow1" and result["agent"] == "embedded"
    assert result["exit_code"] == 0 and result["interrupted_by"] is None
    assert result["duration_s"] >= 0.5
    if result["ingest"] is not None:  # the store is present: the job reached it
        assert "flow1" in result["ingest"]["jobs"]


@pytest.mark.parametrize("code", [0, 3, 77])
def test_exit_code_passes_through(
    tmp_path: Path, fake_agent: Path, agent_log: Path, code: int
) -> None:
    out = hushmon_run(
        "--data-dir", str(tmp_path / "d"), "--period", "100", "--no-digest",
        "--agent", str(fake_agent), "--", "sh", "-c", f"exit {code}",
    )  # fmt: skip
    assert out.returncode == code, out.stderr
    assert f"exit code {code}" in out.stderr


def test_command_not_found_is_127_and_still_ends_the_job(
    tmp_path: Path, fake_agent: Path, agent_log: Path
) -> None:
    out = hushmon_run(
        "--data-dir", str(tmp_path / "d"), "--job", "nf", "--period", "100", "--no-digest",
        "--agent", str(fake_agent), "--", str(tmp_path / "no-such-program"),
    )  # fmt: skip
    assert out.returncode == 127
    assert "no-such-program: No such file or directory" in out.stderr
    assert requests(agent_log)[:3] == ["job begin nf", "job end nf", "flush"]


def test_ctrl_c_stops_the_job_and_keeps_the_data(
    tmp_path: Path, fake_agent: Path, agent_log: Path
) -> None:
    data, summary = tmp_path / "data", tmp_path / "run.json"
    marker = tmp_path / "job-started"
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "hushmon.cli", "run", "--data-dir", str(data),
            "--job", "cc1", "--period", "100", "--no-digest", "--agent", str(fake_agent),
            "--json", str(summary), "--", "sh", "-c", f"touch {marker}; sleep 3600",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the job never started"
    wait_until(lambda: "job=cc1 active=1i" in spool_text(data), "a sample inside the job")
    proc.send_signal(signal.SIGINT)
    # A run that waited for the job's own end would hit this timeout.
    _out, err = proc.communicate(timeout=180)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "stopped by SIGINT" in err
    assert requests(agent_log) == ["job begin cc1", "job end cc1", "flush", "stopped"]
    assert "job=cc1 active=1i" in spool_text(data)  # what was gathered is kept
    result = json.loads(summary.read_text())
    assert result["interrupted_by"] == "SIGINT"
    if result["ingest"] is not None:
        assert "cc1" in result["ingest"]["jobs"]


def test_sigterm_is_forwarded_to_the_whole_group(tmp_path: Path) -> None:
    """Batch systems stop jobs with SIGTERM: every process of the command
    goes, including grandchildren in the same group."""
    pids = tmp_path / "pids"
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "hushmon.cli", "run", "--data-dir", str(tmp_path / "d"),
            "--agent", str(tmp_path / "missing-agent"), "--",
            "sh", "-c", f"sleep 60 & echo $! > {pids}; wait",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(pids.read_text())
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM
    # killed at once; gone when a loaded machine gets to it
    wait_until(lambda: not running(grandchild), "the grandchild gone", timeout_s=10)


@contextmanager
def standing_agent(
    fake_agent: Path, data: DataDir, spool: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """The stand-in agent already running on the data folder's socket (100 ms
    period), answering before the block starts; stopped after it."""
    spool.mkdir()
    agent = subprocess.Popen(
        [str(fake_agent), "--spool-dir", str(spool), "--socket", str(data.agent_socket),
         "--period-ms", "100"],
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    try:
        client = AgentClient(data.agent_socket)
        deadline = time.monotonic() + 20
        while not client.answers() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield agent
    finally:
        agent.terminate()
        agent.wait(timeout=10)


def test_running_agent_is_used_and_left_running(
    tmp_path: Path, fake_agent: Path, agent_log: Path
) -> None:
    """A standing agent is used as it is: its spool (from `status`) is
    ingested, a --period for the job is restored afterwards, and it is not
    ours to stop."""
    data = DataDir(tmp_path / "data").create()
    other_spool = tmp_path / "standing-spool"
    with standing_agent(fake_agent, data, other_spool) as agent:
        summary = tmp_path / "run.json"
        out = hushmon_run(
            "--data-dir", str(data.root), "--job", "shared1", "--period", "200", "--no-digest",
            "--json", str(summary), "--", "sleep", "0.5",
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        result = json.loads(summary.read_text())
        assert result["agent"] == "running" and result["warnings"] == []
        assert agent.poll() is None, "a running agent is not ours to stop"
        assert requests(agent_log) == [
            "set period=200ms", "job begin shared1", "job end shared1", "set period=100ms",
            "flush",
        ]  # fmt: skip
        assert "job=shared1 active=1i" in "".join(p.read_text() for p in other_spool.iterdir())
        if result["ingest"] is not None:
            assert result["ingest"]["spool_dir"] == str(other_spool)
            assert "shared1" in result["ingest"]["jobs"]


def test_a_users_period_on_a_running_agent_is_the_jobs(
    tmp_path: Path, fake_agent: Path, agent_log: Path
) -> None:
    """A standing agent refuses a user's node-wide `set period=` (only root or
    an admin): the period is then set for the job alone, which the job's
    owner may and the agent undoes at the job's end; no warning."""
    data = DataDir(tmp_path / "data").create()
    spool = tmp_path / "standing-spool"
    with standing_agent(fake_agent, data, spool, {"FAKE_AGENT_USER_ONLY": "1"}):
        summary = tmp_path / "run.json"
        out = hushmon_run(
            "--data-dir", str(data.root), "--job", "mine1", "--period", "200", "--no-digest",
            "--json", str(summary), "--", "sleep", "0.3",
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert json.loads(summary.read_text())["warnings"] == []
        assert requests(agent_log) == [
            "set period=200ms", "job begin mine1", "set job=mine1 period=200ms", "job end mine1",
            "flush",
        ]  # fmt: skip


def test_a_job_the_prolog_announced_is_left_for_its_epilog_to_end(
    tmp_path: Path, fake_agent: Path, agent_log: Path
) -> None:
    """Under Slurm the prolog announced the job (as root): hushmon run's
    `job begin` is answered 'runs already', and the job is not hushmon run's
    to end: its other steps still run, the epilog ends it."""
    data = DataDir(tmp_path / "data").create()
    spool = tmp_path / "standing-spool"
    with standing_agent(fake_agent, data, spool, {"FAKE_AGENT_JOBS": "77"}):
        out = hushmon_run(
            "--data-dir", str(data.root), "--job", "77", "--no-digest", "--", "sleep", "0.3",
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert "job begin 77" in requests(agent_log)
        assert "job end 77" not in requests(agent_log)
        assert AgentClient(data.agent_socket).status()["jobs"] == "77"


def test_agent_that_cannot_start_leaves_the_command_running(
    tmp_path: Path, fake_agent: Path, agent_log: Path
) -> None:
    marker = tmp_path / "ran"
    out = hushmon_run(
        "--data-dir", str(tmp_path / "d"), "--agent", str(fake_agent), "--",
        "sh", "-c", f"touch {marker}; exit 5",
        env={"FAKE_AGENT_FAIL": "1"},
    )  # fmt: skip
    assert out.returncode == 5
    assert marker.exists()
    warning = next(ln for ln in out.stderr.splitlines() if "warning" in ln)
    assert "exited with code 3 at start" in warning
    assert "simulated" in warning  # the agent's own reason, from its log
    assert "running unmonitored" in warning
    assert "ran unmonitored" in out.stderr


def test_missing_agent_runs_unmonitored(tmp_path: Path) -> None:
    out = hushmon_run(
        "--data-dir", str(tmp_path / "d"), "--agent", str(tmp_path / "nope"), "--", "true"
    )
    assert out.returncode == 0
    assert "no monitoring agent" in out.stderr and "running unmonitored" in out.stderr


def test_agent_silent_on_its_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    silent = tmp_path / "silent-agent"
    silent.write_text("#!/bin/sh\nexec sleep 60\n")
    silent.chmod(0o755)
    monkeypatch.setattr(agent_mod, "START_TIMEOUT_S", 0.5)
    outcome = run_monitored(
        RunOptions(
            command=["sh", "-c", "exit 4"],
            data=DataDir(tmp_path / "d"),
            job="silent1",
            agent_path=silent,
        )
    )
    assert outcome.exit_code == 4
    assert outcome.agent_mode == "none"
    assert any("did not open" in w for w in outcome.warnings)


def test_job_id_from_slurm_and_validation(tmp_path: Path) -> None:
    args = ["--data-dir", str(tmp_path / "d"), "--agent", str(tmp_path / "nope")]
    out = hushmon_run(*args, "--json", "-", "--", "true", env={"SLURM_JOB_ID": "4242"})
    assert json.loads(out.stdout)["job"] == "4242"
    bad = hushmon_run(*args, "--job", "a/b", "--", "true")
    assert bad.returncode == 2 and "job id 'a/b' is not valid" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--period", "5", "--", "true"], "outside 10"),
        (["--period", "fast", "--", "true"], "not a whole number"),
        ([], "no command given"),
        (["--demo", "--", "true"], "--demo takes no COMMAND"),
    ],
)
def test_bad_usage(tmp_path: Path, args: list[str], message: str) -> None:
    out = hushmon_run("--data-dir", str(tmp_path / "d"), *args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def start_unmonitored(tmp_path: Path, *command: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "hushmon.cli", "run", "--data-dir", str(tmp_path / "d"),
            "--agent", str(tmp_path / "missing-agent"), "--", *command,
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def wait_for_pid(path: Path) -> int:
    deadline = time.monotonic() + 90
    while not (path.exists() and path.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(path.read_text())


def test_interrupt_reaches_ranks_in_their_own_process_groups(tmp_path: Path) -> None:
    """mpirun gives each rank a process group of its own; what survives the
    command's exit in its session (here: a child in its own group that
    ignores SIGINT) is killed too."""
    pid_file = tmp_path / "rank.pid"
    rank = (
        "import os, signal, time; os.setpgid(0, 0); "
        "signal.signal(signal.SIGINT, signal.SIG_IGN); "
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    )
    proc = start_unmonitored(tmp_path, "sh", "-c", f'{sys.executable} -c "{rank}" & wait')
    stray = wait_for_pid(pid_file)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGINT
    wait_until(lambda: not running(stray), "the stray rank gone", timeout_s=10)


def test_second_ctrl_c_kills_a_job_that_ignores_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process, with the grace period out of reach: only the second
    SIGINT can end a job that ignores the first."""
    monkeypatch.setattr(command_mod, "GRACE_S", 3600.0)
    pid_file = tmp_path / "job.pid"
    seen: list[int] = []

    def interrupt_twice() -> None:
        wait_for_pid(pid_file)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_twice, daemon=True).start()
    result = command_mod.run_in_group(
        ["sh", "-c", f"trap '' INT; echo $$ > {pid_file}; sleep 3600"], seen.append
    )
    assert result.exit_code == 128 + signal.SIGKILL
    assert result.interrupted_by == signal.SIGINT and seen == [signal.SIGINT]


def test_agent_crash_during_the_job_keeps_what_it_wrote(
    tmp_path: Path, fake_agent: Path, agent_log: Path
) -> None:
    """The agent dies (SIGKILL) while the job runs: the command is not
    disturbed, the failure is reported, and the spool file it left open is
    still ingested up to its last complete line."""
    data, summary, pid_file = tmp_path / "data", tmp_path / "run.json", tmp_path / "agent.pid"
    out = hushmon_run(
        "--data-dir", str(data), "--job", "crash1", "--period", "100", "--no-digest",
        "--agent", str(fake_agent), "--json", str(summary),
        "--", "sh", "-c", f"sleep 0.5; kill -9 $(cat {pid_file}); sleep 0.3; exit 6",
        env={"FAKE_AGENT_PIDFILE": str(pid_file)},
    )  # fmt: skip
    assert out.returncode == 6, out.stderr
    result = json.loads(summary.read_text())
    assert any("control socket" in w for w in result["warnings"]), result["warnings"]
    assert any("killed by SIGKILL" in w for w in result["warnings"]), result["warnings"]
    assert "job=crash1 active=1i" in spool_text(data)
    if result["ingest"] is not None:
        assert result["ingest"]["partial_files"] == 1
        assert "crash1" in result["ingest"]["jobs"]


def test_session_members_parses_stat_lines(tmp_path: Path) -> None:
    """The session is field 6 of /proc/PID/stat, after a command name that
    may hold spaces and parentheses."""
    lines = {
        "101": "101 (mpirun) S 1 101 101 0 -1",
        "102": "102 (my (odd) rank) R 101 102 101 0 -1",  # own group, same session
        "103": "103 (other) S 1 103 103 0 -1",
        "self": "ignored",
    }
    for pid, text in lines.items():
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "stat").write_text(text + "\n")
    (tmp_path / "104").mkdir()  # exited between listing and reading: no stat
    assert sorted(command_mod.session_members(101, tmp_path)) == [101, 102]


def test_a_digest_bug_does_not_replace_the_exit_code(
    tmp_path: Path, fake_agent: Path, agent_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = pytest.importorskip("hushmon.digest.build")

    def broken(*_args: object) -> None:
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr(build, "build_digest", broken)
    data = DataDir(tmp_path / "d")
    outcome = run_monitored(
        RunOptions(
            command=["sh", "-c", "exit 9"], data=data, job="bug1", period_ms=100,
            agent_path=fake_agent,
        )
    )  # fmt: skip
    assert outcome.exit_code == 9
    assert any("unexpected ZeroDivisionError: simulated bug" in w for w in outcome.warnings)
    assert "ZeroDivisionError" in (data.run / "errors.log").read_text()
