"""The agent side of ``hushmon run`` on a test bed (``hushmon testbed up``):
every node's agent instead of one, the bed's MPI and Slurm environment for the
command, and Slurm's job ids when the command goes through Slurm.

With srun/sbatch/salloc the Slurm prolog and epilog announce the job on
each node it runs on, so its samples carry Slurm's job id; any other
command (``mpirun --host n1,n2 ...``) is announced by us on every node.
``sbatch`` returns at submission: we wait for the jobs it submitted to end.

:func:`find_monitor` is a ``hushmon.run.monitor.ClusterFinder`` and
:class:`BedMonitor` a ``JobMonitor``: ``hushmon run`` is handed the finder
by the program that assembles it (:mod:`hushmon.runcmd`), so neither
package imports the other.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from hushmon.agentclient import AgentClient, AgentError
from hushmon.datadir import DataDir
from hushmon.errors import HushmonError
from hushmon.testbed import agents, delivery, launcher, slurm
from hushmon.testbed.state import Bed, load

Warn = Callable[[str], None]

SLURM_COMMANDS = ("srun", "sbatch", "salloc")
FINAL_STATES = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
)
JOB_WAIT_POLL_S = 0.5


# Options of mpirun (Open MPI), mpiexec (hydra) and srun that name hosts.
HOST_OPTIONS = ("--host", "-H", "-host", "-hosts", "--hosts", "-w", "--nodelist")
HOSTFILE_OPTIONS = ("--hostfile", "-hostfile", "--machinefile", "-machinefile", "-f", "-machine")


def is_slurm_command(command: list[str]) -> bool:
    return bool(command) and os.path.basename(command[0]) in SLURM_COMMANDS


def _host_names(text: str) -> set[str]:
    """'n1,n2:4' or 'n1 slots=2' -> {'n1', 'n2'}."""
    names = set()
    for item in text.replace(",", " ").split():
        name = item.split(":", 1)[0]
        if name and "=" not in name:
            names.add(name)
    return names


def targets_bed(command: list[str], bed: Bed) -> bool:
    """Whether COMMAND runs on the bed's nodes: a Slurm command (the bed's
    Slurm is the one that answers), or an MPI launch whose host list or
    host file names a node of the bed."""
    if is_slurm_command(command):
        return bed.spec.slurm
    nodes = {n.name for n in bed.nodes()}
    for i, arg in enumerate(command):
        flag, eq, value = arg.partition("=")
        if not eq:
            value = command[i + 1] if i + 1 < len(command) else ""
        if flag in HOST_OPTIONS and _host_names(value) & nodes:
            return True
        if flag in HOSTFILE_OPTIONS:
            try:
                if _host_names(Path(value).read_text()) & nodes:
                    return True
            except OSError:
                continue
    return False


def find_monitor(
    command: Sequence[str], data: DataDir, required: bool, warn: Warn
) -> BedMonitor | None:
    """The bed's monitor when a bed with agents is up and COMMAND goes to
    its nodes (or ``required``: --testbed); None otherwise."""
    try:
        bed = load()
    except HushmonError as exc:
        warn(f"{exc}; monitoring this machine only")
        bed = None
    if bed is None or not bed.spec.agents:
        if required:
            raise HushmonError("--testbed: no test bed with agents is up ('hushmon testbed up')")
        return None
    if required or targets_bed(list(command), bed):
        return BedMonitor(bed, list(command), data, warn)
    return None


class BedMonitor:
    """A ``JobMonitor`` over every node's agent: failures become warnings."""

    def __init__(self, bed: Bed, command: list[str], data: DataDir, warn: Warn) -> None:
        self.bed = bed
        self.data = data
        self.warn = warn
        self.mode = "testbed"
        self.period_s = bed.spec.period_ms / 1000.0
        self.spool: Path = bed.spool_root
        self.slurm = bed.spec.slurm and is_slurm_command(command)
        self.first_new_job = 0
        self.slurm_jobs: list[str] = []
        self.announced = False
        self.clients: dict[str, AgentClient] = {}

    def env(self) -> dict[str, str]:
        """The command runs with the bed's MPI and Slurm settings."""
        env = dict(os.environ)
        env.update(launcher.mpi_env(self.bed))
        if self.bed.spec.slurm:
            env.update(slurm.env(self.bed))
        return env

    def connect(self) -> None:
        for node in self.bed.nodes():
            client = agents.client(self.bed, node.name)
            if client.answers():
                self.clients[node.name] = client
            else:
                self.warn(f"the agent of {node.name} does not answer: that node is not monitored")
        if not self.clients:
            self.mode = "none"
        if self.slurm:
            self.first_new_job = slurm.newest_job_id(self.bed) + 1

    def _each(self, line: str) -> None:
        for name, client in self.clients.items():
            try:
                client.request(line)
            except AgentError as exc:
                self.warn(f"{name}: {exc}")

    def _wait_sample(self) -> None:
        for name, client in self.clients.items():
            try:
                client.wait_for_next_sample(self.period_s)
            except AgentError as exc:
                self.warn(f"{name}: {exc}")
            # Nodes sample on the same aligned instants: after one, the rest follow.
            break

    def job_begin(self, job: str) -> None:
        if self.slurm or not self.clients:
            return
        self._each(f"job begin {job}")
        self.announced = True

    def job_end(self, job: str) -> None:
        if self.slurm:
            self.slurm_jobs = self._wait_slurm_jobs()
        # The agents keep a job for the period it ends in (docs/agent.md,
        # "Jobs"): ended now, as the command has, its last period is on
        # record after the next sample (the Slurm epilog ended it already).
        if self.announced:
            self._each(f"job end {job}")
        self._wait_sample()
        self._each("flush")
        if self.bed.spec.transport == "nats":
            # The digest reads the collector's store: every batch the agents
            # wrote must have travelled leaf -> hub -> collector first.
            missing = delivery.wait_collected(self.bed)
            if missing:
                self.warn("not everything reached the collector's store: " + "; ".join(missing))

    def collected_store(self) -> AbstractContextManager[Path] | None:
        """With the bed's NATS transport the data is in the collector's
        store, not to be ingested from the spools."""
        if self.bed.spec.transport != "nats":
            return None
        if self.data.lake != self.bed.store:
            self.warn(
                f"the bed's collector writes {self.bed.store}: the digest is built there "
                f"(not in {self.data.store})"
            )
        # a lake: read while the collector goes on writing it
        return contextlib.nullcontext(self.bed.store)

    def _wait_slurm_jobs(self) -> list[str]:
        """The jobs this command submitted, once they have all ended."""
        while True:
            states = {
                jid: st
                for jid, st in slurm.job_states(self.bed).items()
                if jid >= self.first_new_job
            }
            running = [jid for jid, st in states.items() if st not in FINAL_STATES]
            if not running:
                if not states:
                    self.warn("the command submitted no Slurm job")
                return [str(j) for j in sorted(states)]
            # A job may run for hours, so no deadline; but a bed taken down or
            # replaced under this run would leave it waiting on jobs that are
            # not its own forever.
            if not same_bed(self.bed, load()):
                raise HushmonError(
                    f"the test bed of {self.bed.data_root} went down or was replaced while "
                    f"Slurm job(s) {', '.join(map(str, running))} ran; their data is incomplete"
                )
            time.sleep(JOB_WAIT_POLL_S)

    def jobs(self, run_job: str) -> list[str]:
        """The job ids the data of this run is stored under."""
        return self.slurm_jobs if self.slurm else [run_job]

    def close(self) -> None:
        """The bed's agents stay up: they belong to the bed, not to this run."""


def same_bed(ours: Bed, now: Bed | None) -> bool:
    """Whether the bed up now is the one a run started on, by its data folder
    (not its daemons' pids: the fault tests restart daemons under a run)."""
    return now is not None and now.data_root.resolve() == ours.data_root.resolve()
