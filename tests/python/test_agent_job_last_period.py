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
``--linger-s`` worked around it by staying a period longer), and the
summaries (grouped by the job lines of each period) counted it as a
job-less node's. The check holds whatever the timing: the job's end falls inside some period, and
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
from hushmon.store.raw_summaries import NO_JOB, summaries_of_period
from hushmon.store.schema import open_store_readonly

JOB = "86"
PERIOD_NS = 1_000_000_000
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


def _boundary_after(t_ns: int) -> int:
    """The first period boundary after t_ns (the agent's offset is 0)."""
    return (t_ns // PERIOD_NS + 1) * PERIOD_NS


def test_the_jobs_last_period_holds_what_the_agent_read_at_its_end(
    bin_dir: Path, tmp_path: Path
) -> None:
    agent_args = ["--period-ms", str(PERIOD_NS // 1_000_000), "--sources", "self,jobs"]
    # no Slurm job directory of this machine's may come in
    agent_args += ["--slurm-dir", "no-slurm-here"]
    job_line = f"job,host=n1,job={JOB} "
    with running_agent(bin_dir, tmp_path, *agent_args) as agent:

        def send(request: str) -> str:
            proc = run_agent(bin_dir, "--socket", str(agent.sock), "--send", request)
            assert proc.returncode == 0, proc.stderr
            return proc.stdout.strip()

        def samples() -> int:
            return int(send("status").split("samples=")[1].split()[0])

        def wait_for(what: str, ready: Callable[[], object]) -> None:
            deadline = time.monotonic() + 30
            while not ready():
                assert time.monotonic() < deadline, f"{what}: not within 30 s"
                time.sleep(0.05)
                send("flush")

        assert send(f"job begin {JOB}") == f"ok job {JOB} begins"
        # a period of its own first: its end then falls after its first period
        wait_for("the job's first period", lambda: _lines(tmp_path, job_line))
        # Just after a sample, so that the record and the job's end both come
        # before the agent's next regular read of the app socket: `job end`
        # reads the record. (Late on a loaded machine, the record is read in
        # the period before the end, inside the job all the same.)
        seen = samples()
        wait_for("a sample", lambda: samples() > seen)
        env = {
            **os.environ,
            "HUSHMON_APP_SOCKET": str(agent.sock.parent / "app.sock"),
            "HUSHMON_JOB": JOB,
        }
        client = subprocess.run(
            [sys.executable, "-c", CLIENT], env=env, capture_output=True, text=True, timeout=60
        )
        assert client.returncode == 0, client.stderr
        end_ns = time.time_ns()
        assert send(f"job end {JOB}") == f"ok job {JOB} ends"
        wait_for("the record", lambda: _lines(tmp_path, "app_phase,"))
        (phase,) = _lines(tmp_path, "app_phase,")
        record_ns = _stamp_ns(phase)

        def stopped() -> bool:
            """A sample after the job's last line, without a job line: its lines stop."""
            last = max(_stamp_ns(x) for x in _lines(tmp_path, job_line))
            return any(_stamp_ns(x) > last for x in _lines(tmp_path, "hushmon_agent,"))

        wait_for("the ended job's lines stopping", stopped)
    job_stamps = sorted(_stamp_ns(line) for line in _lines(tmp_path, job_line))
    # the job is the node's for the period it ended in, which holds the record
    assert job_stamps[-1] >= _boundary_after(end_ns), (job_stamps, end_ns)
    assert record_ns in job_stamps, (job_stamps, phase)

    store = tmp_path / "hushmon.duckdb"
    ingest_spool(store, tmp_path / "spool")
    data = load_job(store, JOB)
    assert [int(t) for t in data.times_ns] == job_stamps, (data.times_ns, phase)
    names = [n for n in data.base_names if n.startswith("app_phase.count")]
    assert names, data.base_names
    at = job_stamps.index(record_ns)
    count = float(data.cube[data.base_names.index(names[0]), 0, at])
    assert not math.isnan(count) and count == 1.0, (names, data.cube[:, 0, :])
    # The summaries' path groups a node's lines by the job lines of the same
    # period, as the rack reducers do (their truth: test_reduce checks them
    # against it): the record is the job's there too, not the job-less node's.
    con = open_store_readonly(store)
    try:
        job_keys = summaries_of_period(con, JOB, record_ns)
        no_job_keys = summaries_of_period(con, NO_JOB, record_ns)
    finally:
        con.close()
    assert any(m == "app_phase" and f == "count" for m, _, f in job_keys), sorted(job_keys)
    assert not any(m == "app_phase" for m, _, _ in no_job_keys), sorted(no_job_keys)
