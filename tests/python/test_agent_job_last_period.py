"""A job that ends in the middle of a period is the node's job for that
period: the agent writes its ``job`` line once more at the period's end
(c/agent/jobs.c, samplers/jobs.c), so what the agent attributed to the job
in that period -- above all the program's last libhushmon records, read
by ``job end`` before the job ends (test_agent_app_job_end.py) and
written with the next period's stamp -- lies inside the job's periods,
and the digest's loader, which reads the job's periods only
(``job_activity``), keeps them.

Before, the job's periods ended at the last period boundary before
``job end``: the last records came one period after them and the digest
lost the program's last phase (the bed's phases program, whose
``--linger-s`` worked around it by staying a period longer). The check
holds whatever the timing: the job's end falls inside some period, and
without the line the records of that period are always outside the job.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from agentproc import run_agent, running_agent
from hushmon.digest.jobdata import load_job
from hushmon.store.ingest import ingest_spool

JOB = "86"
PERIOD_MS = 500
CLIENT = """
from hushmon.app.binding import Hushmon
hm = Hushmon()
hm.phase_begin("last_phase")
hm.phase_end("last_phase")
hm.flush()
assert hm.stats().sent_records == 1
"""


def _lines(work: Path, prefix: str) -> list[str]:
    return [
        line
        for path in sorted((work / "spool").glob("*.lp*"))
        for line in path.read_text().splitlines()
        if line.startswith(prefix)
    ]


def _stamp_ns(line: str) -> int:
    return int(line.rsplit(" ", 1)[1])


def test_the_jobs_last_period_holds_what_the_agent_read_at_its_end(
    bin_dir: Path, tmp_path: Path
) -> None:
    agent_args = ["--period-ms", str(PERIOD_MS), "--sources", "self,jobs"]
    # no Slurm job directory of this machine's may come in
    agent_args += ["--slurm-dir", "no-slurm-here"]
    with running_agent(bin_dir, tmp_path, *agent_args) as agent:

        def send(request: str) -> str:
            proc = run_agent(bin_dir, "--socket", str(agent.sock), "--send", request)
            assert proc.returncode == 0, proc.stderr
            return proc.stdout.strip()

        def wait_for(what: str, ready: Callable[[], object]) -> None:
            deadline = time.monotonic() + 30
            while not ready():
                assert time.monotonic() < deadline, f"{what} not in the spool within 30 s"
                time.sleep(0.1)
                send("flush")

        job_line = f"job,host=n1,job={JOB} "
        assert send(f"job begin {JOB}") == f"ok job {JOB} begins"
        # a period of its own first: its end then falls after its first period
        wait_for("the job's first period", lambda: _lines(tmp_path, job_line))
        env = {
            **os.environ,
            "HUSHMON_APP_SOCKET": str(agent.sock.parent / "app.sock"),
            "HUSHMON_JOB": JOB,
        }
        client = subprocess.run(
            [sys.executable, "-c", CLIENT], env=env, capture_output=True, text=True, timeout=60
        )
        assert client.returncode == 0, client.stderr
        assert send(f"job end {JOB}") == f"ok job {JOB} ends"
        wait_for("the last record", lambda: _lines(tmp_path, "app_phase,"))
        (phase,) = _lines(tmp_path, "app_phase,")
        last_ns = _stamp_ns(phase)
        # and two periods after it, to see that the ended job is written once only
        wait_for(
            "two periods after the job's end",
            lambda: any(
                _stamp_ns(s) >= last_ns + 2 * PERIOD_MS * 1_000_000
                for s in _lines(tmp_path, "hushmon_agent,")
            ),
        )
    job_stamps = sorted(_stamp_ns(line) for line in _lines(tmp_path, job_line))
    assert job_stamps[-1] == last_ns, (job_stamps, phase)

    store = tmp_path / "hushmon.duckdb"
    ingest_spool(store, tmp_path / "spool")
    data = load_job(store, JOB)
    assert int(data.times_ns[-1]) == last_ns, (data.times_ns, phase)
    names = [n for n in data.base_names if n.startswith("app_phase.count")]
    assert names, data.base_names
    count = float(data.cube[data.base_names.index(names[0]), 0, -1])
    assert not math.isnan(count) and count == 1.0, (names, data.cube[:, 0, :])
