"""What the agent's bmc source (node power from the BMC) costs, side by
side with the agent without it, in one run.

A BMC is not at hand here: the Redfish BMC is Python's HTTPS server on
127.0.0.1 with a CA made for the run (the Power resource of
tests/fixtures/agent/bmc/redfish-power-ilo.json), and the DCMI one a
fake ``ipmitool`` on PATH that prints tests/fixtures/agent/bmc/
dcmi-reading.txt. What a real BMC costs the node is the same kind of work
(a TLS request, a fork and exec of ipmitool, which then talks to
/dev/ipmi0) minus the fake's side, which runs in other processes.

Two parts, the variants ``off`` (bmc.backend none), ``redfish`` and
``dcmi`` alternating for --rounds rounds (medians):

1. The sampling path: ``hushmon-agent --measure-cost CYCLES`` with the
   default sources (the sampling thread's CPU clock per cycle; the poller
   thread reads the BMC every second meanwhile, outside that clock).
2. The whole process: the agent as a daemon at 1 s periods for
   --seconds, the BMC read every --interval-ms; its CPU time from start to
   exit (wait4: every thread's, and the ipmitool children's it reaped) per
   second, and what each BMC read adds over ``off``.

Not a test: nothing is asserted; the figures go to docs/agent.md ("Node
power from the BMC").

    .venv/bin/python bench/bench_agent_bmc.py [--cycles 2000] [--rounds 3]
        [--seconds 20] [--interval-ms 1000] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import os
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_agent_sources import alternate, default_sources, loadavg

from hushmon import jsonio
from hushmon.errors import HushmonError
from hushmon.paths import REPO_ROOT, program
from hushmon.transport.natstls import make_ca, write_identity

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "agent" / "bmc"
USER, PASSWORD = "monitor", "bench"


def serve_bmc(work: Path) -> tuple[ThreadingHTTPServer, str, Path]:
    """An HTTPS Redfish service answering the Power resource of chassis 1."""
    make_ca(work / "tls", "bench BMC CA")
    files = write_identity(work / "tls", "bmc", "127.0.0.1", server=True)
    body = (FIXTURES / "redfish-power-ilo.json").read_bytes()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as BMCs do

        def do_GET(self) -> None:
            found = self.path == "/redfish/v1/Chassis/1/Power"
            data = body if found else b"{}"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    assert files.cert_file is not None and files.key_file is not None
    ctx.load_cert_chain(files.cert_file, files.key_file)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cred = work / "bmc.cred"
    cred.write_text(f"{USER}:{PASSWORD}\n")
    cred.chmod(0o600)
    return server, f"https://127.0.0.1:{server.server_address[1]}", cred


def fake_ipmitool(work: Path) -> Path:
    tools = work / "bin"
    tools.mkdir()
    tool = tools / "ipmitool"
    tool.write_text(f'#!/bin/sh\ncat "{FIXTURES / "dcmi-reading.txt"}"\n')
    tool.chmod(0o755)
    return tools


def daemon_cpu_s(agent: Path, work: Path, seconds: float, args: list[str]) -> tuple[float, int]:
    """The agent's CPU seconds over a run of ``seconds`` at 1 s periods (from
    its start: opening the sources is in it), every thread's and the
    children's it reaped (wait4's rusage), and the bmc lines it wrote."""
    out = work / "out.lp"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [str(agent), "--socket", "", "--sink", "stdout", "--period-ms", "1000", *args],
            stdout=sink,
            stderr=subprocess.DEVNULL,
        )
    time.sleep(seconds)
    proc.send_signal(signal.SIGTERM)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise HushmonError(f"the agent ended with {proc.returncode}")
    lines = sum(1 for line in out.read_text().splitlines() if line.startswith("bmc,"))
    return usage.ru_utime + usage.ru_stime, lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=2000, help="cycles per --measure-cost run")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (medians)")
    ap.add_argument("--seconds", type=float, default=20, help="each daemon run's length")
    ap.add_argument("--interval-ms", type=int, default=1000, help="bmc.interval_ms of the runs")
    ap.add_argument("--json", metavar="FILE", help="the figures as JSON ('-' = stdout)")
    args = ap.parse_args(argv)
    if args.cycles < 10 or args.rounds < 1 or args.seconds < 2 or args.interval_ms < 1000:
        print(
            "bench_agent_bmc: --cycles >= 10, --rounds >= 1, --seconds >= 2, --interval-ms >= 1000",
            file=sys.stderr,
        )
        return 2
    human = sys.stderr if args.json == "-" else sys.stdout
    try:
        agent = program("hushmon-agent")
        sources = ",".join(default_sources(agent))
        load_before = loadavg()
        with tempfile.TemporaryDirectory(prefix="hm-bench-bmc-") as tmp:
            work = Path(tmp)
            server, url, cred = serve_bmc(work)
            os.environ["PATH"] = f"{fake_ipmitool(work)}:{os.environ['PATH']}"
            every = ["--bmc-interval-ms", str(args.interval_ms), "--bmc-timeout-ms", "900"]
            variants = {
                "off": ["--sources", sources],
                "redfish": ["--sources", sources, "--bmc", "redfish", "--bmc-url", url,
                            "--bmc-credentials-file", str(cred),
                            "--bmc-ca-file", str(work / "tls" / "ca.pem"), *every],
                "dcmi": ["--sources", sources, "--bmc", "dcmi", *every],
            }  # fmt: skip
            hot = alternate(agent, args.cycles, args.rounds, variants)
            whole: dict[str, list[float]] = {name: [] for name in variants}
            lines: dict[str, int] = {}
            for _ in range(args.rounds):
                for name, vargs in variants.items():
                    cpu, lines[name] = daemon_cpu_s(agent, work, args.seconds, vargs)
                    whole[name].append(cpu / args.seconds)
            server.shutdown()
            server.server_close()
        load_after = loadavg()
    except (HushmonError, OSError, subprocess.SubprocessError) as exc:
        print(f"bench_agent_bmc: {exc}", file=sys.stderr)
        return 1
    cpu_ms_per_s = {k: statistics.median(v) * 1e3 for k, v in whole.items()}
    polls_per_s = 1000 / args.interval_ms
    print(
        f"loadavg {load_before} (before) / {load_after} (after); {os.cpu_count()} CPUs", file=human
    )
    print(
        f"1. sampling path, default sources; {args.cycles} cycles x {args.rounds} rounds",
        file=human,
    )
    print(f"   {'variant':<8} {'total us':>9} {'bmc us':>7}", file=human)
    for name, costs in hot.items():
        print(f"   {name:<8} {costs['total']:9.2f} {costs.get('bmc', 0.0):7.2f}", file=human)
    print(
        f"2. whole process, 1 s periods, bmc every {args.interval_ms} ms, {args.seconds:g} s x "
        f"{args.rounds} rounds",
        file=human,
    )
    for name, ms in cpu_ms_per_s.items():
        extra = ms - cpu_ms_per_s["off"]
        per_read = f"; +{extra / polls_per_s:.2f} ms CPU per read" if name != "off" else ""
        print(
            f"   {name:<8} {ms:7.2f} ms CPU per s ({lines.get(name, 0)} bmc lines){per_read}",
            file=human,
        )
    result: dict[str, Any] = {
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "cycles": args.cycles,
        "rounds": args.rounds,
        "interval_ms": args.interval_ms,
        "sampling_path_us": hot,
        "process_cpu_ms_per_s": cpu_ms_per_s,
    }
    jsonio.emit(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
