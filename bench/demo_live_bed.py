"""Issue 12's demo on the test bed, with figures: the live path from an MPI
program's per-iteration metric to the views, and the control channel back.

Brings up `hushmon testbed up --nodes 4 --racks 2 --transport nats` (root),
starts `hushmon serve` on the bed's hub and runs

    hushmon run -- srun -N 4 build/bin/butterfly --cycles 70 ...

(butterfly reports `cycle_time_s` through libhushmon every cycle). While it
runs:

- the metric as `hushmon top --once --job N` and `hushmon serve`'s events
  show it, and the seconds from the job's start until top first has it;
- `hushmon ctl set period=1000ms --job N` several times at random instants
  (the period the agents have: acknowledgement at a 1 s period), then
  `set period=100ms` (the change), then several more at 100 ms: per node
  the seconds until its answer (the command's own start not counted),
  median and max;
- after the job: the period seen in the store (median gap between the
  job's samples per node) before and after the change, and the digest's
  app_timeline finding.

Then a probe job on one node calls libhushmon (Python binding) twice a
second with the wall clock as the value; a viewer in this process follows
the summaries with the code `hushmon top` uses (hushmon.live.feed +
LiveState) and prints the time from each call to the first snapshot that
holds it, at the agents' 1 s period and after `ctl set period=100ms`.

    sudo .venv/bin/python bench/demo_live_bed.py [--acks 5] [--probe-s 15]

Everything is taken down at the end (also on failure). Not a test: nothing
is asserted; tests/testbed/test_live_bed.py checks the same path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from hushmon.live.feed import connect, subscribe
from hushmon.live.state import LiveState
from hushmon.paths import REPO_ROOT, build_bin_dir
from hushmon.testbed import livecheck, transport
from hushmon.testbed.state import load
from hushmon.transport.natsserver import free_port

HUSHMON = livecheck.HUSHMON
METRIC = "cycle_time_s"
PROBE = "probe_unix_s"
# The probe: the wall clock of the call as the value, twice a second.
PROBE_CODE = f"""
import time
from hushmon.app import Hushmon
hm = Hushmon()
end = time.time() + float(__import__("sys").argv[1])
while time.time() < end:
    hm.metric("{PROBE}", time.time())
    hm.flush()
    time.sleep(0.5)
hm.close()
"""


def say(text: str) -> None:
    print(text, flush=True)


def fig(xs: list[float]) -> str:
    if not xs:
        return "-"
    return f"median {statistics.median(xs):.3f} s, max {max(xs):.3f} s (n={len(xs)})"


def per_node(outcomes: list[dict[str, object]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for o in outcomes:
        for host, (ok, _period, took) in livecheck.acks(o).items():
            if ok:
                out.setdefault(host, []).append(took)
    return out


def ack_figures(label: str, outcomes: list[dict[str, object]], nodes: list[str]) -> None:
    took = per_node(outcomes)
    failed = [o for o in outcomes if o["exit_code"] != 0]
    say(f"  {label}: {len(outcomes)} commands, {len(failed)} not acknowledged by all")
    for host in nodes:
        say(f"    {host}: {fig(took.get(host, []))}")
    for o in failed:
        bad = [f"{a['host']}: {a['error']}" for a in o["answers"] if not a["ok"]]  # type: ignore[attr-defined]
        say(
            f"    not acknowledged ({o['t_s']:.1f} s into the job): {bad} "
            f"no answer {o.get('no_answer')} {o.get('error', '')}"
        )


async def follow_probe(url: str, job: str, until: float) -> list[tuple[float, float]]:
    """(call time, seconds until a snapshot held it) for each probe value,
    following the summaries as `hushmon top` does."""
    state = LiveState()
    nc = await connect(url)
    seen: list[tuple[float, float]] = []
    try:
        await subscribe(nc, state)
        last = 0.0
        while time.time() < until:
            await asyncio.sleep(0.05)
            snap = state.snapshot(time.time_ns())
            for j in snap["jobs"]:
                if j["job"] != job:
                    continue
                for a in j["app"]:
                    if a["name"] == PROBE and a["max"] is not None and a["max"] > last:
                        last = a["max"]
                        seen.append((last, time.time() - last))
    finally:
        await nc.close()
    return seen


def probe(hub: str, seconds: float, nodes: list[str]) -> None:
    newest = max((int(w) for w in squeue_ids()), default=0)
    proc = subprocess.Popen(
        ["srun", "-N", "1", "-w", nodes[0], sys.executable, "-c", PROBE_CODE, str(seconds * 2)],
        cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        found = livecheck.running_job(newest, 30)
        if found is None:
            say("  probe: the job did not start")
            return
        job = found[0]
        t0 = time.time()
        at_1s = asyncio.run(follow_probe(hub, job, t0 + seconds))
        ctl = livecheck.ctl_set(hub, job, "period=100ms")
        at_100ms = asyncio.run(follow_probe(hub, job, time.time() + seconds))
        say(f"  probe job {job} on {nodes[0]}: app call -> in the view (hushmon top's state)")
        say(f"    agents at 1 s period: {fig([d for _, d in at_1s[1:]])}")
        say(f"    after ctl set period=100ms (exit {ctl['exit_code']}): "
            f"{fig([d for t, d in at_100ms if t > ctl['sent_ns'] / 1e9 + 1])}")  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def squeue_ids() -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True)
    return [w for w in out.stdout.split() if w.isdigit()]


def demo(args: argparse.Namespace, data: Path) -> None:
    t0 = time.monotonic()
    up = livecheck.cli("testbed", "up", "--nodes", "4", "--racks", "2", "--transport", "nats",
                       "--data-dir", str(data), "--json", "-", timeout=300)  # fmt: skip
    if up.returncode != 0:
        raise SystemExit(f"testbed up failed: {up.stderr.strip()}")
    info = json.loads(up.stdout)
    hub = str(info["transport"]["hub_url"])
    os.environ.update(transport.client_env())  # the bed's NATS is TLS: this process's feed too
    bed = load()
    assert bed is not None
    say(f"bed up in {time.monotonic() - t0:.1f} s: 4 nodes in 2 racks, NATS hub {hub}")
    port = free_port()
    token_file, token = livecheck.serve_token(data)
    serve = subprocess.Popen([*HUSHMON, "serve", "--url", hub, "--port", str(port),
                              "--history-s", "0", "--token-file", str(token_file)], cwd=REPO_ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    app = [str(build_bin_dir() / "butterfly"), "--cycles", str(args.cycles), "--comm-ms", "300",
           "--compute-ms", "700", "--length", "64K"]  # fmt: skip
    say("running: hushmon run -- srun -N 4 " + " ".join(app))
    run = subprocess.Popen([*HUSHMON, "run", "--data-dir", str(data), "--json", "-", "--",
                            "srun", "-N", "4", *app], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        found = livecheck.running_job(0, 60)
        if found is None:
            raise SystemExit("the Slurm job did not start within 60 s")
        job, nodes = found
        started = time.monotonic()
        say(f"Slurm job {job} on {','.join(nodes)}")
        row = None
        while row is None and time.monotonic() - started < 30:
            row, _frame = livecheck.top_app(hub, job, METRIC)
        say(f"  hushmon top --once --job {job}: {row} "
            f"({time.monotonic() - started:.1f} s after the job started)")  # fmt: skip
        slow: list[dict[str, object]] = []
        for _ in range(args.acks):
            if not livecheck.job_running(job):
                break
            time.sleep(random.random())
            slow.append(livecheck.ctl_set(hub, job, "period=1000ms"))
            slow[-1]["t_s"] = time.monotonic() - started
        change = livecheck.ctl_set(hub, job, "period=100ms")
        change["t_s"] = time.monotonic() - started
        fast: list[dict[str, object]] = []
        for _ in range(args.acks):
            if not livecheck.job_running(job):
                say(f"  (job {job} ended: {len(fast)} of {args.acks} commands at 100 ms sent)")
                break
            time.sleep(random.random() * 0.1)
            fast.append(livecheck.ctl_set(hub, job, "period=100ms"))
            fast[-1]["t_s"] = time.monotonic() - started
        say(f"ctl set --job {job}: seconds until each node's answer")
        ack_figures("period=1000ms at a 1 s period", slow, nodes)
        ack_figures("the change to period=100ms", [change], nodes)
        ack_figures("period=100ms at a 100 ms period", fast, nodes)
        if livecheck.wait_http(f"http://127.0.0.1:{port}", token, 10):
            srow = livecheck.serve_app(f"http://127.0.0.1:{port}", token, job, METRIC, 8)
            say(f"  hushmon serve /events: {srow}")
        out, err = run.communicate(timeout=600)
        if run.returncode != 0:
            raise SystemExit(f"hushmon run failed: {err[-2000:]}")
        result = json.loads(out)
        (data / "run.json").write_text(out)
        (data / "run.err").write_text(err)
        if not result.get("digest"):
            say(f"hushmon run made no digest: {result.get('warnings')}; {err[-1500:]}")
            return
        say(f"hushmon run: job {result['job']}, {result['duration_s']:.1f} s, "
            f"digest {result['digest']['json']}")  # fmt: skip
        for p in livecheck.periods_seen(bed, job, change["sent_ns"]):
            say(
                f"  {p.host}: period in the data {p.before_ms:.0f} ms before ({p.n_before} "
                f"gaps), {p.after_ms:.0f} ms from 1 s after ({p.n_after} gaps)"
            )
        evidence = livecheck.digest_app(result["digest"]["json"], METRIC)
        say(f"  digest app_timeline {METRIC}: {evidence}")
        probe(hub, args.probe_s, nodes)
    finally:
        for proc in (run, serve):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
    say(f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} at the end")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--acks", type=int, default=5, help="ctl commands per period (default 5)")
    ap.add_argument("--cycles", type=int, default=70, help="butterfly cycles of ~1 s (70)")
    ap.add_argument("--probe-s", type=float, default=15, help="probe seconds per period (15)")
    ap.add_argument("--keep", action="store_true", help="keep the data folder (logs, store)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the test bed needs root")
    data = Path("/var/tmp") / f"hushmon-demo-live-{os.getpid()}"
    say(f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} at the start")
    try:
        demo(args, data)
    finally:
        livecheck.cli("testbed", "down", timeout=120)
        if args.keep:
            say(f"data kept in {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
