"""The agent's quietness options on the real daemon: --cpus binds it to a
housekeeping CPU; --cpus, --sources-every and the perf_sw options refuse bad
values in one line; migrations are counted with BPF where it is allowed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentproc import run_agent, running_agent

FIXTURE = Path(__file__).parent.parent / "fixtures" / "agent" / "t0"


def test_agent_runs_on_the_cpus_given(bin_dir: Path, tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[-1]
    with running_agent(bin_dir, tmp_path, "--cpus", str(cpu)) as agent:
        status = Path(f"/proc/{agent.proc.pid}/status").read_text()
    line = next(ln for ln in status.splitlines() if ln.startswith("Cpus_allowed_list:"))
    assert line.split()[1] == str(cpu)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--cpus", "1-0", "bad range"),
        ("--cpus", "x", "expected a list"),
        ("--sources-every", "disk", "is not name=N"),
        ("--sources-every", "nosuch=2", "unknown source 'nosuch'"),
        ("--perf-sw-migrations-every", "-1", "perf_sw.migrations_every"),
        ("--perf-sw-migrations", "ipi", "perf_sw.migrations"),
    ],
)
def test_bad_values_are_one_line_errors(
    bin_dir: Path, tmp_path: Path, flag: str, value: str, message: str
) -> None:
    proc = run_agent(
        bin_dir, "--once", "--sources", "load", "--socket", "", "--root",
        str(FIXTURE), flag, value,
    )  # fmt: skip
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


def test_migrations_counted_without_reading_every_cpu(bin_dir: Path) -> None:
    """As root the migrations come from the BPF counter every period (no
    notice about falling back to perf_event reads); elsewhere the agent says
    that it reads them, and how often."""
    proc = run_agent(bin_dir, "--once", "--sources", "perf_sw", "--socket", "")
    assert proc.returncode == 0, proc.stderr
    if os.geteuid() == 0:
        assert "no BPF counting" not in proc.stderr
        assert "cpu_migrations_per_s=" in proc.stdout
    else:
        assert "no BPF counting of migrations" in proc.stderr
