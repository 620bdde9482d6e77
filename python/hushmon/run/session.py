"""One monitored run: agent up, job announced, command run, job ended, data
flushed, agent down, spool ingested, digest built.

The order matters and is the point of this module:

1. find the agent on the data directory's socket, else start one (embedded
   mode) and wait for its first sample, so the job's first interval already
   has rates;
2. ``job begin``; run the command in its own process group;
3. ``job end`` (the agent keeps the job for the period it ends in), wait
   for the sample that closes that period, then ``flush`` (the spool file is
   closed so ingest sees it);
4. stop the agent if we started it;
5. ingest the spool into the store and build the digest.

Monitoring trouble at any step is a warning: the command runs anyway, and
``hushmon run`` exits with the command's exit code.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hushmon.agentclient import AgentClient, AgentError, remove_stale_socket
from hushmon.agentclient import running_agent as find_running_agent
from hushmon.datadir import DataDir, owner_only
from hushmon.errors import HushmonError
from hushmon.run.agent import EmbeddedAgent
from hushmon.run.command import CommandResult, run_in_group
from hushmon.run.monitor import ClusterFinder, JobMonitor, Warn

DEFAULT_PERIOD_MS = 1000
JOB_ID = re.compile(r"^[A-Za-z0-9_.-]{1,63}$")


def warn_stderr(message: str) -> None:
    print(f"hushmon: warning: {message}", file=sys.stderr, flush=True)


def check_job_id(job: str) -> str:
    if not JOB_ID.match(job):
        raise HushmonError(
            f"job id {job!r} is not valid: use 1-63 characters of letters, digits, '_', '.', '-'"
        )
    return job


def new_job_id() -> str:
    """Unique on this machine: time to the second, then our pid."""
    return time.strftime("run-%Y%m%dT%H%M%S") + f"-{os.getpid()}"


@dataclass
class RunOptions:
    command: Sequence[str]
    data: DataDir
    job: str
    period_ms: int | None = None  # None: the running agent's, or DEFAULT_PERIOD_MS
    digest: bool = True
    agent_path: Path | None = None  # None: build/bin/hushmon-agent
    job_stdout_to_stderr: bool = False  # our stdout is taken (--json -): the job's goes to stderr
    # True: the agents of a cluster (``clusters``) must watch COMMAND; False:
    # this machine's only; None: a cluster's when COMMAND goes to its nodes.
    cluster: bool | None = None
    clusters: Sequence[ClusterFinder] = ()


@dataclass
class RunOutcome:
    job: str
    command: list[str]
    exit_code: int
    agent_mode: str  # "embedded", "running", "testbed" or "none"
    interrupted_by: int | None = None
    duration_s: float = 0.0
    started_ns: int = 0
    ended_ns: int = 0
    warnings: list[str] = field(default_factory=list)
    ingest: Any = None  # hushmon.store.ingest.IngestReport
    # With the bed's NATS transport: the collector's store the data was read from.
    collected_store: str | None = None
    digest: Any = None  # hushmon.digest.build.Digest (of the last job)
    jobs: list[str] = field(default_factory=list)  # every job the data is stored under
    digests: list[Any] = field(default_factory=list)

    @property
    def monitored(self) -> bool:
        return self.agent_mode != "none"


class Monitor:
    """The agent side of a run; every method turns failures into warnings."""

    def __init__(self, options: RunOptions, warn: Warn) -> None:
        self.options = options
        self.warn = warn
        self.client: AgentClient | None = None
        self.embedded: EmbeddedAgent | None = None
        self.mode = "none"
        self.period_s = (options.period_ms or DEFAULT_PERIOD_MS) / 1000.0
        # The agent's own period, which it goes back to when the job ends.
        self.node_period_s = self.period_s
        self.restore_period_ms: int | None = None
        # A standing agent refuses a user's node-wide `set period=`: the
        # period is then asked for the job alone once it is announced.
        self.job_period_ms: int | None = None
        self.job_open = False
        self.job_ours = False
        self.job = ""
        self.spool = options.data.spool  # where this run's samples are written

    def connect(self) -> None:
        data = self.options.data
        try:
            data.create()
        except OSError as exc:
            self.warn(f"cannot create the data directory {data.root}: {exc}; running unmonitored")
            return
        client = find_running_agent(data)
        if client is not None:
            self.client, self.mode = client, "running"
            self._adopt_period(client)
            return
        try:
            agent_path = self.options.agent_path or _default_agent_path()
            remove_stale_socket(data)
            self.embedded = EmbeddedAgent.start(
                agent_path, data, self.options.period_ms or DEFAULT_PERIOD_MS
            )
        except (AgentError, HushmonError) as exc:
            self.warn(f"no monitoring agent: {exc}; running unmonitored")
            return
        self.client, self.mode = self.embedded.client, "embedded"
        # The first sample of a fresh agent has no rates (nothing to
        # difference against): let it happen before the job starts.
        self._wait_sample("waiting for the agent's first sample")

    def _adopt_period(self, client: AgentClient) -> None:
        try:
            status = client.status()
            current = int(status.get("period_ms", status.get("period", "0"))) or None
        except (AgentError, ValueError):
            current = None
            status = {}
        # A standing agent may spool elsewhere than the data directory: its
        # status says where (docs/formats.md, `status`).
        spool = status.get("spool")
        if spool and Path(spool).is_absolute() and Path(spool).is_dir():
            self.spool = Path(spool)
        want = self.options.period_ms
        if current:
            self.node_period_s = current / 1000.0
        if want is None:
            if current:
                self.period_s = current / 1000.0
            return
        if current and current != want:
            try:
                client.request(f"set period={want}ms")
                self.restore_period_ms = current
            except AgentError as exc:
                self.period_s = current / 1000.0
                if "not authorized" in str(exc):
                    self.job_period_ms = want  # the job's owner may: set job=ID period=
                else:
                    self.warn(f"cannot set the running agent's period: {exc}")

    def _wait_sample(self, what: str, period_s: float | None = None) -> None:
        if self.client is None:
            return
        try:
            self.client.wait_for_next_sample(period_s or self.period_s)
        except AgentError as exc:
            self.warn(f"{what}: {exc}")

    def _request(self, line: str) -> bool:
        return self._answer(line) is not None

    def _answer(self, line: str) -> str | None:
        """The agent's answer after ``ok``; None (warned) when refused."""
        if self.client is None:
            return None
        try:
            return self.client.request(line)
        except AgentError as exc:
            self.warn(str(exc))
            return None

    def job_begin(self, job: str) -> None:
        self.job = job
        answer = self._answer(f"job begin {job}")
        self.job_open = answer is not None
        # Announced before us (Slurm's prolog, as root): its end is the
        # epilog's, after every step of the job, not this command's.
        self.job_ours = answer is not None and "runs already" not in answer
        if not self.job_open and self.client is not None:
            self.warn(f"job {job} was not announced: its samples will not be attributed to it")
        if self.job_period_ms is not None and self.client is not None:
            # The agent undoes a job's setting when the job ends.
            try:
                if not self.job_open:
                    raise AgentError("the job was not announced")
                self.client.request(f"set job={job} period={self.job_period_ms}ms")
                self.period_s = self.job_period_ms / 1000.0
            except AgentError as exc:
                self.warn(f"cannot set the running agent's period: {exc}")

    def job_end(self, job: str) -> None:
        if self.client is None:
            return
        # The interval in which the command ended belongs to the job: the
        # agent keeps a job for the period it ends in (docs/agent.md, "Jobs"),
        # so the job ends now and the sample that closes that period is its
        # last. Ended after that sample, it would get one more period.
        wait_s = self.period_s
        if self.job_ours:
            self._request(f"job end {job}")
            # a job's `set job=` period is undone at its end
            wait_s = max(wait_s, self.node_period_s)
        self._wait_sample("waiting for the job's last sample", wait_s)
        if self.restore_period_ms is not None:
            self._request(f"set period={self.restore_period_ms}ms")
        self._request("flush")

    def env(self) -> dict[str, str] | None:
        """Our environment, plus where libhushmon finds the agent's
        application socket and which job it claims (the agent checks the
        claim against the announcer's uid, docs/libhushmon.md)."""
        if self.client is None or not self.job_open:
            return None
        app_socket = Path(self.client.socket_path).parent / "app.sock"
        return {**os.environ, "HUSHMON_APP_SOCKET": str(app_socket), "HUSHMON_JOB": self.job}

    def collected_store(self) -> AbstractContextManager[Path] | None:
        """None: the data is in the spool, to be ingested."""
        return None

    def jobs(self, run_job: str) -> list[str]:
        return [run_job]

    def close(self) -> None:
        if self.embedded is None:
            return
        code = self.embedded.stop()
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            self.warn(f"the embedded agent was killed by {name}{self.embedded.log_tail()}")
        elif code not in (0, None):
            self.warn(f"the embedded agent exited with code {code}{self.embedded.log_tail()}")
        self.embedded = None


def _default_agent_path() -> Path:
    from hushmon.paths import program

    return program("hushmon-agent")


def analyse(
    outcome: RunOutcome,
    options: RunOptions,
    spool: Path,
    warn: Warn,
    collected: AbstractContextManager[Path] | None = None,
) -> None:
    """Ingest the spool and build the digest; trouble becomes a warning.
    ``collected``: the data is in a store the online transport's collector
    wrote (the test bed with NATS); nothing is ingested, the digest is
    built there while the context holds it."""
    with owner_only():  # after the job: its own files keep the user's umask
        _analyse(outcome, options, spool, warn, collected)


def _analyse(
    outcome: RunOutcome,
    options: RunOptions,
    spool: Path,
    warn: Warn,
    collected: AbstractContextManager[Path] | None,
) -> None:
    if collected is not None:
        try:
            with collected as db:
                outcome.collected_store = str(db)
                _digests(outcome, options, db, warn)
        except (HushmonError, OSError) as exc:
            warn(f"the collector's store: {exc}")
        return
    data = options.data
    try:
        from hushmon.store.ingest import ingest_spool
    except ModuleNotFoundError as exc:
        warn(f"the store is not available ({exc}); the data stays in {spool}")
        return
    try:
        outcome.ingest = ingest_spool(data.database, spool)
    except (HushmonError, OSError) as exc:
        warn(f"ingesting {spool}: {exc}; the spool is kept")
        return
    except Exception as exc:  # noqa: BLE001 - see _unexpected
        _unexpected(warn, data, f"ingesting {spool}", exc)
        return
    _digests(outcome, options, data.database, warn)


def _digests(outcome: RunOutcome, options: RunOptions, database: Path, warn: Warn) -> None:
    data = options.data
    if not options.digest:
        return
    try:
        from hushmon.digest.build import build_digest
    except ModuleNotFoundError as exc:
        warn(f"the digest is not available ({exc}); the data is in {database}")
        return
    for job in outcome.jobs or [outcome.job]:
        try:
            digest = build_digest(database, job, data.reports(job))
        except (HushmonError, OSError) as exc:
            warn(f"building the digest of job {job}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - see _unexpected
            _unexpected(warn, data, f"building the digest of job {job}", exc)
            continue
        outcome.digests.append(digest)
        outcome.digest = digest
    from hushmon.history.run_record import record_run  # the job history (hushmon serve)

    span = (outcome.started_ns, outcome.ended_ns)
    record_run(database, outcome.jobs or [outcome.job], outcome.command, outcome.exit_code,
               outcome.interrupted_by, span, data.reports, warn)  # fmt: skip
    from hushmon.jobsum.at_end import after_job  # tags; Slurm's AdminComment

    after_job(data, database, outcome.jobs or [outcome.job], warn)


def _unexpected(warn: Warn, data: DataDir, what: str, exc: Exception) -> None:
    """A bug in the store or the digest. The command has run and its exit
    code is the contract of `hushmon run`, so the bug may not replace it: it
    is reported as a warning, with the traceback kept in a log for a fix."""
    log = data.run / "errors.log"
    try:
        with log.open("a") as out:
            out.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} {what}\n")
            out.write(traceback.format_exc())
        where = f"traceback in {log}"
    except OSError:
        where = "no traceback kept"
    warn(f"{what}: unexpected {type(exc).__name__}: {exc} (a bug; {where})")


def _monitor(options: RunOptions, warn: Warn) -> JobMonitor:
    """The agents that see the command: a cluster's, when one of
    ``options.clusters`` says the command goes to its nodes (Slurm, or an
    MPI host list naming them); else this machine's own (running or
    embedded)."""
    if options.cluster is not False:
        required = bool(options.cluster)
        for find in options.clusters:
            monitor = find(list(options.command), options.data, required, warn)
            if monitor is not None:
                return monitor
        if required:
            raise HushmonError("no cluster's agents can watch this command: none is known here")
    return Monitor(options, warn)


def run_monitored(options: RunOptions, warn: Warn = warn_stderr) -> RunOutcome:
    """The whole run; returns what happened (exit code = the command's)."""
    job = check_job_id(options.job)
    warnings: list[str] = []

    def note(message: str) -> None:
        warnings.append(message)
        warn(message)

    monitor = _monitor(options, note)
    result: CommandResult
    try:
        monitor.connect()
        monitor.job_begin(job)

        def on_signal(signum: int) -> None:
            name = signal.Signals(signum).name
            note(f"{name}: stopping the job, keeping the data gathered so far")

        result = run_in_group(
            options.command, on_signal, options.job_stdout_to_stderr, env=monitor.env()
        )
        if result.error:
            note(f"cannot run the command: {result.error}")
        monitor.job_end(job)
    finally:
        monitor.close()
    outcome = RunOutcome(
        job=job,
        command=list(options.command),
        exit_code=result.exit_code,
        agent_mode=monitor.mode,
        interrupted_by=result.interrupted_by,
        duration_s=result.duration_s,
        started_ns=result.started_ns,
        ended_ns=result.ended_ns,
        warnings=warnings,
        jobs=monitor.jobs(job),
    )
    if outcome.jobs and outcome.jobs[-1] != job:
        outcome.job = outcome.jobs[-1]  # Slurm's id: the one users know the job by
    if outcome.monitored:
        analyse(outcome, options, monitor.spool, note, monitor.collected_store())
    return outcome
