"""Cost of libhushmon per call, and of an MPI loop calling it every iteration.

1. ns per ``hm_metric`` call (tests/c/app_sender --bench, one thread, N calls,
   several repetitions, median) with the agent present, absent (no socket),
   and stopped (SIGSTOP); with one name (aggregated in the library: a send
   per 100 ms) and cycling over 64 names (a batch holds 24: a send every
   24 calls, so a stopped agent's socket fills and the library drops).
2. The same loop under ``mpirun -np 2`` (slowest rank), agent present vs
   absent.
3. The control path (hm_poll every iteration): alone without a callback
   (poll_unused: what an application that never registers pays) and with
   one registered (poll_registered: a coarse clock read, a recv every
   50 ms), and hm_metric + hm_poll against hm_metric alone, side by side.
   Costs are the calling thread's CPU time (app_sender reads
   CLOCK_THREAD_CPUTIME_ID), so other processes on a loaded machine do not
   inflate them. The MPI loop with the noise detector:
   ``HUSHMON_DETECT_METRIC=NAME hushmon noise detect --noise-cmd AGENT``
   (docs/libhushmon.md).

    .venv/bin/python bench/bench_libhushmon.py [--calls N] [--reps R] [--json FILE|-]

Say the load average with the numbers (printed).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("HUSHMON_BIN", ROOT / "build" / "bin")).parent
SENDER = BUILD / "tests" / "app_sender"
AGENT = BUILD / "bin" / "hushmon-agent"


def one(
    env: dict[str, str],
    calls: int,
    mpi: int = 0,
    names: int = 1,
    poll: str = "",
    only: bool = False,
) -> float:
    cmd = [str(SENDER), "--count", str(calls), "--bench", "--names", str(names)]
    cmd += ["--poll", poll] if poll else []
    cmd += ["--no-metric"] if only else []
    if mpi:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(mpi), *cmd]
    out = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=300, check=True
    ).stdout
    costs = [json.loads(line)["ns_per_call"] for line in out.splitlines() if line.startswith("{")]
    return max(costs)  # the slowest rank's loop


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2_000_000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", default=None, help="FILE or - (stdout holds only the JSON)")
    args = ap.parse_args()
    if args.calls < 1 or args.reps < 1:
        print("bench_libhushmon: --calls and --reps must be >= 1", file=sys.stderr)
        return 2
    for p in (SENDER, AGENT):
        if not p.is_file():
            print(f"bench_libhushmon: {p} missing: run 'make'", file=sys.stderr)
            return 2
    work = Path(tempfile.mkdtemp(prefix="hm_bench_lib_"))
    sock = work / "agent.sock"
    agent = subprocess.Popen(
        [str(AGENT), "--socket", str(sock), "--spool-dir", str(work / "spool"),
         "--sources", "self", "--host", "bench", "--period-ms", "1000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not (work / "app.sock").exists():
            if time.monotonic() > deadline:
                print("bench_libhushmon: the agent did not start", file=sys.stderr)
                return 1
            time.sleep(0.05)
        subprocess.run(
            [str(AGENT), "--socket", str(sock), "--send", "job begin bench"],
            capture_output=True, check=True,
        )  # fmt: skip
        present = {"HUSHMON_APP_SOCKET": str(work / "app.sock"), "HUSHMON_JOB": "bench"}
        absent = {"HUSHMON_APP_SOCKET": str(work / "none.sock")}
        res: dict[str, list[float]] = {
            "present": [], "present_64names": [], "absent": [], "stopped": [],
            "stopped_64names": [], "mpi_present": [], "mpi_absent": [],
            "poll_unused": [], "poll_registered": [], "present_poll_unused": [],
            "present_poll_registered": [],
        }  # fmt: skip
        for _ in range(args.reps):  # interleaved, so load changes hit every mode alike
            res["present"].append(one(present, args.calls))
            res["present_64names"].append(one(present, args.calls, names=64))
            res["absent"].append(one(absent, args.calls))
            os.kill(agent.pid, signal.SIGSTOP)
            try:
                res["stopped"].append(one(present, args.calls))
                res["stopped_64names"].append(one(present, args.calls, names=64))
            finally:
                os.kill(agent.pid, signal.SIGCONT)
            res["poll_unused"].append(one(present, args.calls, poll="unused", only=True))
            res["poll_registered"].append(one(present, args.calls, poll="registered", only=True))
            res["present_poll_unused"].append(one(present, args.calls, poll="unused"))
            res["present_poll_registered"].append(one(present, args.calls, poll="registered"))
            res["mpi_present"].append(one(present, args.calls, mpi=2))
            res["mpi_absent"].append(one(absent, args.calls, mpi=2))
    finally:
        agent.terminate()
        agent.wait(timeout=10)
    load = os.getloadavg()[0]
    summary = {
        "calls": args.calls,
        "reps": args.reps,
        "load1": round(load, 2),
        "ns_per_call_median": {k: round(statistics.median(v), 2) for k, v in res.items()},
        "ns_per_call_min": {k: round(min(v), 2) for k, v in res.items()},
        "raw": res,
    }
    text = "\n".join(
        f"{k:24s} median {summary['ns_per_call_median'][k]:8.2f} ns/call"
        f"  min {summary['ns_per_call_min'][k]:8.2f}"
        for k in res
    )
    print(f"{text}\nload average {load:.2f}", file=sys.stderr if args.json == "-" else sys.stdout)
    if args.json:
        data = json.dumps(summary, indent=2)
        if args.json == "-":
            print(data)
        else:
            Path(args.json).write_text(data + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
