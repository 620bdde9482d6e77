"""What a monitored run asks of the agents that watch its command.

:class:`session.Monitor` is this machine's agent (running or embedded). A
cluster whose nodes have agents of their own (the test bed, a site) plugs
in through a :data:`ClusterFinder` handed to the run in
``RunOptions.clusters``: the run calls it, and uses the monitor it returns,
without knowing what kind of cluster that is. The program that assembles
``hushmon run`` (:mod:`hushmon.runcmd`) passes the finders, so this
package imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from hushmon.datadir import DataDir

Warn = Callable[[str], None]


class JobMonitor(Protocol):
    """The agent side of one run. Every method turns monitoring trouble
    into ``warn(...)``: the command runs whatever happens here."""

    # "embedded", "running", "testbed"... or "none" (nothing watches the command)
    mode: str
    # Where the agents' spool files are, for ingest after the run.
    spool: Path

    def connect(self) -> None: ...

    def job_begin(self, job: str) -> None: ...

    def env(self) -> dict[str, str] | None:
        """The command's environment (None: ours)."""

    def job_end(self, job: str) -> None: ...

    def collected_store(self) -> AbstractContextManager[Path] | None:
        """A store the data already is in (a collector's), held while the
        digest reads it; None: ingest the spool."""

    def jobs(self, run_job: str) -> list[str]:
        """The job ids the run's data is stored under (a batch system may
        give its own), the run's own last."""

    def close(self) -> None: ...


# (command, data directory, required, warn) -> the cluster's monitor when
# COMMAND runs on that cluster's nodes (or ``required``: the user asked for
# it), else None. It may raise HushmonError when required and impossible.
ClusterFinder = Callable[[Sequence[str], DataDir, bool, Warn], JobMonitor | None]
