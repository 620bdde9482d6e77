"""``hushmon ctl``: change the measurement while jobs run (the control channel)."""

from __future__ import annotations

import argparse
from typing import Any

from hushmon import jsonio
from hushmon.display import printable

DEFAULT_SOCKET = "/run/hushmon/agent.sock"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "ctl",
        help="change the agents' measurement at run time (period, sources); ask their state",
        description="Sends 'set' or 'status' to agents and shows each agent's answer with its "
        "applied state. With --url: over NATS to the agents named by --nodes (Slurm host list, "
        "e.g. n[1-4,7]), or to every agent (hm.ctl.all), answers gathered until --timeout; "
        "agents that do not answer are listed and the exit status is 1. Without --url: the "
        "local agent's control socket. Authorization: docs/agent.md, 'Control channel'.",
    )
    sub = p.add_subparsers(dest="ctl_command", metavar="{set,status,app}", required=True)
    for name, help_text in (
        ("set", "set period=DUR, sources=+a,-b (or a,b), apps=-NAME,+NAME on the agents"),
        ("status", "each agent's applied state"),
        (
            "app",
            "send a control message (e.g. dump-profile) to a job's programs that take them "
            "(libhushmon hm_on_control); shows how many processes acknowledged it",
        ),
    ):
        q = sub.add_parser(name, help=help_text, description=help_text)
        if name == "app":
            q.add_argument(
                "name",
                metavar="NAME",
                help="the program's name as the kernel knows it (ps -o comm, 15 characters at "
                "most), or '*' for every program of the job",
            )
            q.add_argument("command", metavar="COMMAND", help="e.g. dump-profile")
            q.add_argument(
                "args", nargs="*", metavar="ARG", help="words after the command (4 at most)"
            )
        if name == "set":
            q.add_argument(
                "settings",
                nargs="+",
                metavar="KEY=VALUE",
                help="period=200ms (10ms .. 1h), sources=+pmu,-disk (edit) or sources=cpu,mem, "
                "apps=-NAME,+NAME (unsubscribe / subscribe application metrics by name)",
            )
        q.add_argument("--nodes", metavar="HOSTLIST", help="these agents, e.g. n[1-4,7]")
        q.add_argument(
            "--job",
            metavar="ID",
            help="the change is the job's: allowed to its owner on nodes that are all theirs, "
            "undone when the job ends; without --nodes the job's nodes from Slurm (squeue) are "
            "asked, else every agent, and those where the job does not run are left out",
        )
        q.add_argument("--url", help="NATS server(s); without it, the local control socket")
        q.add_argument(
            "--socket",
            default=DEFAULT_SOCKET,
            help=f"the local agent's control socket (default {DEFAULT_SOCKET})",
        )
        q.add_argument(
            "--timeout",
            type=float,
            default=3.0,
            metavar="S",
            help="seconds to wait for answers (default 3; an agent reads requests once per "
            "sampling period, so give at least a period more)",
        )
        q.add_argument("--json", metavar="FILE|-", help="write the answers as JSON ('-' = stdout)")
        q.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hushmon.errors import HushmonError
    from hushmon.hostlist import expand_hostlist
    from hushmon.transport.ctl import ask_nats, ask_socket, build_request

    if not 0 < args.timeout <= 600:
        raise HushmonError("--timeout must be in (0, 600] seconds")
    if (
        args.job is not None
        and not args.job.replace("_", "").replace(".", "").replace("-", "").isalnum()
    ):
        raise HushmonError(f"--job {args.job!r}: a job id is letters, digits, '_', '.', '-'")
    hosts = expand_hostlist(args.nodes) if args.nodes else []
    if args.nodes and not hosts:
        raise HushmonError(f"--nodes {args.nodes!r} names no host")
    if args.ctl_command == "app" and args.job is None:
        raise HushmonError("ctl app needs --job ID (the job whose programs get the message)")
    request = ""
    if args.ctl_command != "app":
        request = build_request(args.ctl_command, getattr(args, "settings", []), args.job)
    if args.url and args.job is not None and not hosts:
        # A Slurm job's own nodes, each asked by name: one that does not
        # answer is listed, and the answers end the wait (a broadcast waits
        # the whole timeout and cannot name the silent).
        from hushmon.transport.slurmjob import job_nodes

        hosts = job_nodes(args.job) or []
    if args.ctl_command == "app":
        return run_app(args, hosts)
    if args.url:
        outcome = ask_nats(args.url, request, hosts, args.timeout)
    else:
        if hosts:
            raise HushmonError(
                "--nodes needs --url (NATS); the local socket reaches this node only"
            )
        outcome = ask_socket(args.socket, request, args.timeout)
    if args.ctl_command == "status" and args.job and not hosts:
        # every agent answered: keep those the job runs on
        outcome.answers = [
            a for a in outcome.answers if not a.ok or args.job in a.state["jobs"].split(",")
        ]
    human = jsonio.human_stream(args.json)
    for line in outcome.lines():
        print(printable(line), file=human)
    jsonio.emit(args.json, outcome.to_json())
    return outcome.exit_code()


def run_app(args: argparse.Namespace, hosts: list[str]) -> int:
    from hushmon.errors import HushmonError
    from hushmon.transport.ctl import app_control, build_app_request

    if hosts and not args.url:
        raise HushmonError("--nodes needs --url (NATS); the local socket reaches this node only")
    request = build_app_request(args.job, args.name, args.command, args.args)
    outcome = app_control(request, args.timeout, args.socket, args.url or "", hosts)
    human = jsonio.human_stream(args.json)
    for line in outcome.lines():
        print(printable(line), file=human)
    jsonio.emit(args.json, outcome.to_json())
    return outcome.exit_code()
