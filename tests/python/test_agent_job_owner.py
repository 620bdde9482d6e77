"""Who owns a job and who may change the node's period, with two real uids
(setpriv): root (a Slurm prolog) announces a user's job with
`job begin ID uid=N`, and that user, not another, may then steer it; only
root or an admin announces jobs; a node-wide `set period=` is refused to a
uid that is neither root nor an admin, with the way that is allowed, and the
retired `period MS` request is unknown. The attacks on the sockets are in test_agent_sockets.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentproc import RunningAgent, running_agent
from test_slurm_scripts import install

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="two uids need root (setpriv)")

OWNER, OTHER = 61011, 61012


@pytest.fixture
def agent(bin_dir: Path) -> Iterator[RunningAgent]:
    # pytest's tmp_path sits below a 0700 folder the other users cannot pass
    work = Path(tempfile.mkdtemp(prefix="hm-owner-"))
    work.chmod(0o755)
    try:
        # both users reach the socket; the agent tells them apart
        with running_agent(bin_dir, work, "--period-ms", "500", "--socket-mode", "0666") as a:
            yield a
    finally:
        shutil.rmtree(work)


def send(agent: RunningAgent, request: str, uid: int | None = None) -> str:
    cmd = [str(agent.bin), "--socket", str(agent.sock), "--send", request]
    if uid is not None:
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    if proc.returncode == 0:
        return proc.stdout.strip()
    # --send prints a refusal as "hushmon-agent: agent on SOCK: REASON", exit 1
    prefix = f"hushmon-agent: agent on {agent.sock}: "
    assert proc.stderr.startswith(prefix), proc.stderr
    return "error " + proc.stderr[len(prefix) :].strip()


def test_root_announces_a_users_job_and_only_that_user_steers_it(
    bin_dir: Path, agent: RunningAgent, tmp_path: Path
) -> None:
    env = {
        "SLURM_JOB_ID": "4243",
        "SLURM_JOB_UID": str(OWNER),
        "SLURMD_NODENAME": "n1",
        "HUSHMON_AGENT_SOCKET": str(agent.sock),
    }
    scripts = install(tmp_path / "slurm", f"agent={bin_dir / 'hushmon-agent'}\n")
    proc = subprocess.run(
        [str(scripts / "prolog.sh")],
        env=env, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert (proc.returncode, proc.stderr) == (0, "")
    assert " jobs=4243 " in agent.status()
    other = send(agent, "set job=4243 period=300ms", OTHER)
    assert other.startswith(f"error not authorized: uid {OTHER} is not the owner of job 4243 "
                            f"(owner {OWNER})"), other  # fmt: skip
    mine = send(agent, "set job=4243 period=300ms", OWNER)
    assert mine.startswith("ok applied") and "period_ms=300" in mine, mine
    assert "scope=job:4243" in mine


def test_only_root_or_an_admin_announces_jobs(agent: RunningAgent) -> None:
    refused = send(agent, f"job begin 55 uid={OTHER}", OWNER)
    assert refused.startswith(f"error not authorized: uid {OWNER} may not announce job 55"), refused
    assert send(agent, "job begin 56", OWNER).startswith("error not authorized")
    assert " jobs=- " in agent.status()
    for bad in ("uid=-3", "uid=x", "owner=1"):
        answer = send(agent, f"job begin 57 {bad}")
        assert answer.startswith("error"), (bad, answer)
    assert send(agent, f"job begin 58 uid={OWNER} cgroup=x/job_58") == "ok job 58 begins"
    # its owner may confirm it runs (hushmon run inside the job), not re-point it
    assert send(agent, "job begin 58", OWNER) == f"ok job 58 runs already (owner {OWNER})"
    assert send(agent, "job begin 58 cgroup=y/job_58", OWNER).startswith("error not authorized")
    assert send(agent, "set job=58 period=400ms", OWNER).startswith("ok applied")


def test_node_wide_period_needs_root_or_an_admin(bin_dir: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="hm-owner-"))
    work.chmod(0o755)
    cfg = work / "agent.toml"
    cfg.write_text(f'period_ms = 500\n[control]\nadmin_uids = "{OTHER}"\nsocket_mode = "0666"\n')
    try:
        with running_agent(bin_dir, work, "--config", str(cfg)) as a:
            refused = send(a, "set period=200ms", OWNER)
            assert refused == (
                f"error not authorized: uid {OWNER} may not change the node's measurement (a "
                "job's owner names it: job=ID): only root or an admin (control.admin_uids, "
                "control.admin_group) may"
            ), refused
            assert "period_ms=500 " in a.status()
            assert " period_ms=200 " in send(a, "set period=200ms", OTHER)  # an admin
            assert " period_ms=300 " in send(a, "set period=300ms")  # root
            assert "period_ms=300 " in a.status()
            assert send(a, "period 200").startswith("error unknown request 'period 200'")
    finally:
        shutil.rmtree(work)


def test_only_the_owner_root_or_an_admin_ends_a_job(agent: RunningAgent) -> None:
    assert send(agent, f"job begin 60 uid={OWNER}") == "ok job 60 begins"
    refused = send(agent, "job end 60", OTHER)
    assert refused.startswith(f"error not authorized: uid {OTHER} is not the owner of job 60 "
                              f"(owner {OWNER})"), refused  # fmt: skip
    assert " jobs=60 " in agent.status()
    assert send(agent, "job end 60", OWNER) == "ok job 60 ends"
    assert " jobs=- " in agent.status()
    assert send(agent, f"job begin 61 uid={OWNER}") == "ok job 61 begins"
    assert send(agent, "job end 61") == "ok job 61 ends"  # root
