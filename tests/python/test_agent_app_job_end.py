"""What a program sends through libhushmon just before it exits goes to its
job, although the job's end reaches the agent before the agent's next
period reads the app socket: the epilog's ``job end`` reads the socket
first (c/agent/agent_control.c, hm_app_read).

Seen on the bed: the phases program flushes its last phase's record and
exits, Slurm's epilog ends the job on the node within the period, and the
record, read afterwards, was counted ``unattributed`` and lost: the digest
missed the program's last phase on both nodes (tests/testbed/
test_bed_phases.py). A 5-s period here leaves no period between the
program's send and the job's end, so the record can only reach its job
through that read."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from agentproc import run_agent, running_agent

JOB = "85"
CLIENT = """
from hushmon.app.binding import Hushmon
hm = Hushmon()
hm.phase_begin("last_phase")
hm.phase_end("last_phase")
hm.flush()
stats = hm.stats()
assert stats.sent_records == 1, stats
"""


def _spool_lines(work: Path, prefix: str) -> list[str]:
    return [
        line
        for path in (work / "spool").glob("*.lp*")
        for line in path.read_text().splitlines()
        if line.startswith(prefix)
    ]


def test_the_last_record_before_the_jobs_end_goes_to_the_job(bin_dir: Path, tmp_path: Path) -> None:
    with running_agent(bin_dir, tmp_path, "--period-ms", "5000") as agent:

        def send(request: str) -> str:
            proc = run_agent(bin_dir, "--socket", str(agent.sock), "--send", request)
            assert proc.returncode == 0, proc.stderr
            return proc.stdout.strip()

        assert send(f"job begin {JOB}") == f"ok job {JOB} begins"
        env = {
            **os.environ,
            "HUSHMON_APP_SOCKET": str(agent.sock.parent / "app.sock"),
            "HUSHMON_JOB": JOB,
        }
        client = subprocess.run(
            [sys.executable, "-c", CLIENT], env=env, capture_output=True, text=True, timeout=60
        )
        assert client.returncode == 0, client.stderr
        # the program has ended; its record waits in the socket for the next period
        assert send(f"job end {JOB}") == f"ok job {JOB} ends"
        deadline = time.monotonic() + 30
        while not _spool_lines(tmp_path, "app_channel,"):
            assert time.monotonic() < deadline, "no app_channel line within 30 s"
            time.sleep(0.2)
            send("flush")
        phase = _spool_lines(tmp_path, "app_phase,")
        assert len(phase) == 1 and f",job={JOB}," in phase[0], phase
        assert "phase=last_phase count=1i" in phase[0]
        channel = _spool_lines(tmp_path, "app_channel,")[-1]
        assert "unattributed=0i" in channel and "records=1i" in channel, channel
