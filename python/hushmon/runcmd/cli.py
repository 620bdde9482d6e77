"""``hushmon run [options] -- COMMAND ...``: monitor a job and explain it.

This module assembles the command: :mod:`hushmon.run` (the monitored run)
with the clusters a command may go to (the test bed's
:func:`~hushmon.testbed.runmonitor.find_monitor`) and the demo. It sits
above both, so that ``run`` never imports the bed, nor the bed ``run``.

Our own messages go to stderr, so the command's stdout stays the command's
(with --json -, stdout holds the JSON alone and the command's stdout goes to
stderr too); the exit code is the command's (127/126 if it could not start,
128+N if a signal killed it).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from hushmon import jsonio
from hushmon.datadir import add_data_dir_options, data_dir
from hushmon.errors import HushmonError
from hushmon.period import PERIOD_MS_MAX, PERIOD_MS_MIN
from hushmon.run.output import outcome_json, print_outcome, say
from hushmon.run.session import RunOptions, check_job_id, new_job_id, run_monitored


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="monitor a command (e.g. an mpirun line), then store and explain its data",
        description=(
            "Runs COMMAND as a monitored job: uses the agent answering on the data "
            "directory's socket or starts one (embedded mode), announces the job, runs "
            "COMMAND in its own process group, ends the job, ingests the spool into the "
            "store and builds the job's digest (report.html, digest.json). Ctrl-C stops "
            "the job and keeps the data gathered so far. Exit code: COMMAND's."
        ),
        epilog="example: hushmon run -- mpirun -np 2 build/bin/butterfly --length 1M",
    )
    add_data_dir_options(parser, with_db=False)
    parser.add_argument(
        "--job", metavar="ID", help="job id (default: $SLURM_JOB_ID, else a new unique id)"
    )
    parser.add_argument(
        "--period",
        metavar="MS",
        type=_period,
        help="sampling period in ms (default 1000; a running agent keeps its own unless given)",
    )
    parser.add_argument(
        "--no-digest", action="store_true", help="ingest the data but build no digest"
    )
    parser.add_argument(
        "--agent", metavar="PATH", type=Path, help="hushmon-agent to start in embedded mode"
    )
    parser.add_argument(
        "--json",
        metavar="FILE|-",
        help="write what happened (paths, findings) as JSON; with '-' the command's own "
        "stdout goes to stderr, so that stdout holds the JSON alone",
    )
    parser.add_argument(
        "--testbed",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="monitor with the test bed's agents (default: when a bed is up and COMMAND is "
        "srun/sbatch/salloc or an MPI host list naming its nodes)",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="run butterfly, snake and matmul under monitoring and build their reports: on "
        "the test bed (4 nodes in 2 racks, Slurm) when root and namespaces allow, else on "
        "this machine (--no-testbed: always)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    parser.set_defaults(func=run_command)


def _period(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of ms") from None
    if not PERIOD_MS_MIN <= value <= PERIOD_MS_MAX:
        bounds = f"{PERIOD_MS_MIN} .. {PERIOD_MS_MAX}"
        raise argparse.ArgumentTypeError(f"{value} ms is outside {bounds}")
    return value


def _command(args: argparse.Namespace) -> list[str]:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    return command


def job_id(explicit: str | None) -> str:
    """--job, else the batch system's job id, else a new unique one."""
    if explicit:
        return check_job_id(explicit)
    slurm = os.environ.get("SLURM_JOB_ID")
    if slurm:
        return check_job_id(slurm)
    return new_job_id()


def run_command(args: argparse.Namespace) -> int:
    command = _command(args)
    if args.demo:
        if command:
            raise HushmonError("--demo takes no COMMAND")
        from hushmon.runcmd.demo import run_demo

        return run_demo(
            data_dir(args.data_dir),
            period_ms=args.period,
            json_target=args.json,
            testbed=args.testbed,
        )
    if not command:
        raise HushmonError("no command given: hushmon run [options] -- COMMAND [ARGS...]")
    # Here, not at the top: register() stays cheap (hushmon.commands).
    from hushmon.testbed.runmonitor import find_monitor

    data = data_dir(args.data_dir)
    job = job_id(args.job)
    say(f"job {job}: {' '.join(command)}")
    outcome = run_monitored(
        RunOptions(
            command=command,
            data=data,
            job=job,
            period_ms=args.period,
            digest=not args.no_digest,
            agent_path=args.agent,
            job_stdout_to_stderr=jsonio.to_stdout(args.json),
            cluster=args.testbed,
            clusters=(find_monitor,),
        )
    )
    print_outcome(outcome)
    if args.json:
        jsonio.emit(args.json, outcome_json(outcome))
    return outcome.exit_code
