"""The bed from a checkout under /tmp, which every node covers with its
own private /tmp: the built programs (here $HUSHMON_BIN, a copy of
build/bin under /tmp) must still be there on every node, at their own
path, for the agents, the Slurm prolog and the jobs. A 2-node bed with
its agents and Slurm comes up, every agent answers, the programs are
found on each node, and a Slurm job runs one of them on both nodes.
(Checked by hand as well with a whole clone: docs/testbed.md.)"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from bedlib import DATA_PARENT, bed_lock, bed_unavailable, hushmon

from hushmon.paths import build_bin_dir

pytestmark = pytest.mark.testbed


def test_programs_under_tmp_reach_every_node() -> None:
    reason = bed_unavailable()
    if reason:
        pytest.skip(reason)
    under_tmp = Path(tempfile.mkdtemp(prefix="hm-checkout-", dir="/tmp"))
    under_tmp.chmod(0o755)
    bin_dir = under_tmp / "bin"
    shutil.copytree(build_bin_dir(), bin_dir, symlinks=True)
    data = DATA_PARENT / f"hushmon-test-bed-{uuid.uuid4().hex[:8]}"
    env = {"HUSHMON_BIN": str(bin_dir)}
    with bed_lock():
        _up_and_reach(data, bin_dir, env, under_tmp)


def _up_and_reach(data: Path, bin_dir: Path, env: dict[str, str], under_tmp: Path) -> None:
    try:
        up = hushmon("testbed", "up", "--nodes", "2", "--racks", "1", "--data-dir", str(data),
                     "--json", "-", env=env)  # fmt: skip
        assert up.returncode == 0, up.stderr
        status = hushmon("testbed", "status", env=env)
        assert status.returncode == 0 and status.stdout.count("agent: samples=") == 2, (
            status.stdout + status.stderr
        )
        for node in ("n1", "n2"):
            seen = hushmon("testbed", "exec", node, "--", "ls", str(bin_dir / "butterfly"), env=env)
            assert seen.returncode == 0, seen.stderr
        job = subprocess.run(
            ["srun", "-N", "2", str(bin_dir / "hushmon-agent"), "--once", "--sink", "stdout",
             "--sources", "load"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert job.returncode == 0, job.stderr
        assert {ln.split(",host=")[1].split(",")[0].split(" ")[0]
                for ln in job.stdout.splitlines() if ",host=" in ln} == {"n1", "n2"}  # fmt: skip
    finally:
        hushmon("testbed", "down", env=env)
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(under_tmp, ignore_errors=True)
