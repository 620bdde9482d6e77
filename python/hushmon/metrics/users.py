"""Who runs a job, for the ``user`` label of the job series.

The summaries name jobs, not users; Slurm knows both (``squeue -o '%A %u'``),
asked at most once a minute for every job at once (one call, not one per
job). A job id Slurm does not know (no Slurm here, a `hushmon run` id, a
job gone from squeue before it was seen) has no user label. A name once
learnt is kept until the job leaves the exposition.
"""

from __future__ import annotations

import shutil
import time

REFRESH_S = 60.0


class JobUsers:
    """The cache: ``refresh_due`` tells when Slurm should be asked again."""

    def __init__(self) -> None:
        self.users: dict[str, str] = {}
        self.asked_mono = -REFRESH_S
        self.slurm = shutil.which("squeue") is not None

    def refresh_due(self, jobs: list[str]) -> bool:
        if not self.slurm:
            return False
        unknown = any(j not in self.users for j in jobs)
        return unknown and time.monotonic() - self.asked_mono >= REFRESH_S

    def update(self, found: dict[str, str] | None) -> None:
        self.asked_mono = time.monotonic()
        if found is not None:
            self.users.update(found)

    def forget(self, keep: set[str]) -> None:
        for job in [j for j in self.users if j not in keep]:
            del self.users[job]
