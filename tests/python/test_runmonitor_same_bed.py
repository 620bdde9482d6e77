"""`hushmon run` on the bed waits for the Slurm jobs its command submitted
with no deadline (a job may run for hours); it stops instead when the bed it
started on went down or was replaced (a swapped bed once left bench_findings
waiting past 600 s). The check is by the bed's data folder, not its daemons'
pids, which the fault tests change under a run."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

from hushmon.testbed.runmonitor import same_bed
from hushmon.testbed.state import Bed


def _bed(data_root: Path, daemons: dict[str, int]) -> Bed:
    # spec and cgroups play no part in the check
    return Bed(cast(Any, None), data_root, cast(Any, None), daemons)


def test_a_restarted_daemon_is_still_the_same_bed(tmp_path: Path) -> None:
    ours = _bed(tmp_path / "bed", {"slurmctld": 10, "collector": 11})
    assert same_bed(ours, dataclasses.replace(ours, daemons={"slurmctld": 10, "collector": 99}))


def test_a_bed_down_or_another_bed_is_not(tmp_path: Path) -> None:
    ours = _bed(tmp_path / "bed", {"slurmctld": 10})
    assert not same_bed(ours, None)
    assert not same_bed(ours, _bed(tmp_path / "other", {"slurmctld": 10}))
    # the same folder named another way is the same bed
    (tmp_path / "bed").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "bed")
    assert same_bed(ours, _bed(tmp_path / "link", {"slurmctld": 12}))
