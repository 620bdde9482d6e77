"""Which tests must not overlap when pytest-xdist spreads the suite over
workers (`make test-py`: ``-n WORKERS --dist loadgroup``), and the
scheduler that keeps each such group on one worker.

Groups are whole folders, decided from the test's node id alone, because
the scheduler runs in the controller, which collects nothing:

- ``tests/testbed/`` -> "bed": one test bed per machine (`testbed up`
  refuses a second, `testbed down` removes whichever is up).
- ``tests/mpi/`` and the modules in MPI_MODULES -> "mpi": MPI ranks
  busy-poll, so two jobs of 2-4 ranks on a 2-core machine would take turns
  on the cores and stretch the timing checks of hushmon-bench and the noise
  detector.

Every other test is its own unit: most of them wait (NATS servers, the
agents' periods, subprocesses, DuckDB files), and run beside the groups.

xdist's own ``loadgroup`` reads ``xdist_group`` marks by renaming items'
node ids, which pytest 9 no longer honours; this scheduler still groups
such marked tests by the ``@name`` suffix where an older pytest adds one.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

GROUP_FOLDERS = {"tests/testbed/": "bed", "tests/mpi/": "mpi"}
# Modules elsewhere that start MPI jobs (hushmon bench, noise, run under
# mpirun): with the MPI group, not beside it (an lu run of tests/mpi timed
# out at 120 s on the first 3-worker run, with these on other workers).
MPI_MODULES = (
    "tests/python/test_bench_cli.py",
    "tests/python/test_bench_e2e.py",
    "tests/python/test_bench_repeat.py",
    "tests/python/test_noise_schedtrace.py",
    "tests/python/test_run.py",
)


def group_of(nodeid: str) -> str | None:
    """The group a test belongs to, or None when it may run beside any other."""
    for folder, group in GROUP_FOLDERS.items():
        if nodeid.startswith(folder):
            return group
    if nodeid.split("::", 1)[0] in MPI_MODULES:
        return "mpi"
    # "path::test[params]@name": the xdist_group suffix, not an '@' in params
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.rsplit("@", 1)[1]
    return None


class FolderGroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with the scopes above: a group is one unit of
    work sent to one worker (largest first); any other test is a unit alone."""

    def _split_scope(self, nodeid: str) -> str:
        group = group_of(nodeid)
        return f"group:{group}" if group is not None else nodeid


class GroupScheduler:
    """The plugin tests/conftest.py registers where pytest-xdist is loaded:
    ``--dist loadgroup`` schedules with the groups above."""

    @pytest.hookimpl(tryfirst=True)  # before xdist's own, which knows only its modes
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "loadgroup":
            return None
        return FolderGroupScheduling(config, log)
