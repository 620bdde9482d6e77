"""``hushmon serve``'s threads and resident size under many users at once,
this tree next to a baseline commit.

Writes ``--jobs`` synthetic job records into a lake (bench_job_history.py's
records: 200 users, a year of jobs), then per side starts ``hushmon serve
--db LAKE`` (the job history only; the side's package first on PYTHONPATH)
and lets ``--clients`` clients ask for job pages at once for ``--seconds``
(the JSON and HTML pages of /jobs, searches by user and factor, later
pages), each request waiting for its answer before the next. Every second
it samples the server's threads and its anonymous resident size
(RssAnon: the heap, not the libraries). Printed per side: requests
answered and their rate, p50/p99 latency, the most threads, RssAnon after
the first 10 s, at the end and at most, the lowest RssAnon of each 10 s
window after the first (a heap that swings between requests moves the
end figure, only memory that stays raises the floors), and this tree's
figures over the baseline's as a ratio. The sides run one after the
other on the same lake, so both have the machine to themselves.

    .venv/bin/python bench/bench_serve_memory.py [--jobs 20000] [--clients 16]
        [--seconds 60] [--baseline COMMIT|DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

from baseline import baseline_tree  # noqa: E402
from bench_job_history import FACTORS, _records, _write  # noqa: E402

TOKEN = "bench-serve-memory-token-0123456789abcdef"
WARM_S = 10.0
WINDOW_S = 10.0
START_TIMEOUT_S = 120.0


@dataclass
class Side:
    name: str
    latencies_s: list[float] = field(default_factory=list)
    errors: int = 0
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # t, RssAnon KiB, threads
    seconds: float = 0.0

    def figures(self) -> dict[str, float]:
        after = [(t, kib) for t, kib, _ in self.samples if t >= WARM_S]
        rss = [kib / 1024 for _, kib in after] or [float("nan")]
        lat = sorted(self.latencies_s) or [float("nan")]
        return {
            "requests": len(self.latencies_s),
            "errors": self.errors,
            "requests_per_s": len(self.latencies_s) / self.seconds if self.seconds else 0.0,
            "p50_ms": statistics.median(lat) * 1000,
            "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
            "threads_max": max((n for _, _, n in self.samples), default=0),
            "rss_anon_warm_mib": rss[0],
            "rss_anon_end_mib": rss[-1],
            "rss_anon_max_mib": max(rss),
        }

    def floors_mib(self) -> list[float]:
        windows: dict[int, float] = {}
        for t, kib, _ in self.samples:
            if t >= WARM_S:
                k = int((t - WARM_S) // WINDOW_S)
                windows[k] = min(windows.get(k, float("inf")), kib / 1024)
        whole = int((self.seconds - WARM_S) // WINDOW_S)
        return [windows[k] for k in sorted(windows) if k < whole]


def paths(client: int) -> list[str]:
    """What one user's browsing asks for, in turn."""
    user = f"user{client * 7 % 200:03d}"
    factor = FACTORS[client % len(FACTORS)]
    return [
        "/jobs.json",
        "/jobs",
        f"/jobs.json?user={user}",
        f"/jobs.json?factor={factor}&severity=medium",
        f"/jobs.json?page={2 + client % 5}",
        "/jobs.json?sort=nodes&order=desc",
    ]


def _status(pid: int) -> tuple[int, int]:
    """RssAnon KiB and threads of a live process; (0, 0) once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    anon = re.search(r"^RssAnon:\s+(\d+)", text, re.M)
    threads = re.search(r"^Threads:\s+(\d+)", text, re.M)
    return (int(anon.group(1)) if anon else 0, int(threads.group(1)) if threads else 0)


def _client(port: int, k: int, stop: threading.Event, side: Side, lock: threading.Lock) -> None:
    todo = paths(k)
    i = 0
    while not stop.is_set():
        path = todo[i % len(todo)]
        i += 1
        t = time.monotonic()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            conn.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
            r = conn.getresponse()
            r.read()
            conn.close()
            ok = r.status == 200
        except OSError:
            ok = False
        with lock:
            if ok:
                side.latencies_s.append(time.monotonic() - t)
            else:
                side.errors += 1


def run_side(side: Side, python: Path, lake: Path, tmp: Path, a: argparse.Namespace) -> None:
    token_file = tmp / f"{side.name}.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    log = tmp / f"{side.name}.log"
    # the side's package first; what the caller's path holds (a machine's
    # wheels unpacked elsewhere) after it
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        x for x in (str(python), os.environ.get("PYTHONPATH", "")) if x
    )}  # fmt: skip
    argv = [sys.executable, "-m", "hushmon.cli", "serve", "--db", str(lake), "--port", "0",
            "--token-file", str(token_file)]  # fmt: skip
    with log.open("w") as err:
        proc = subprocess.Popen(argv, stderr=err, stdout=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (m := re.search(r"http://127\.0\.0\.1:(\d+)/", log.read_text())):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"bench_serve_memory: {side.name}: serve did not start: "
                                 f"{log.read_text().strip()[-300:]}")  # fmt: skip
            time.sleep(0.2)
        port = int(m.group(1))
        stop, lock = threading.Event(), threading.Lock()
        clients = [
            threading.Thread(target=_client, args=(port, k, stop, side, lock), daemon=True)
            for k in range(a.clients)
        ]
        t0 = time.monotonic()
        for c in clients:
            c.start()
        while (t := time.monotonic() - t0) < a.seconds:
            side.samples.append((t, *_status(proc.pid)))
            done = len(side.latencies_s)
            print(f"\r  {side.name}: {t:4.0f} / {a.seconds:.0f} s, {done} answered",
                  end="", file=sys.stderr, flush=True)  # fmt: skip
            time.sleep(1.0)
        stop.set()
        for c in clients:
            c.join(timeout=120)
        side.seconds = time.monotonic() - t0
        print(file=sys.stderr)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument(
        "--baseline",
        metavar="COMMIT",
        help="also run this commit's package (or a folder's python/hushmon: one made by "
        "git archive for a machine without the repository)",
    )
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    a = ap.parse_args()
    if a.jobs < 100 or a.clients < 1 or a.seconds < 2 * WARM_S:
        need = f"--jobs >= 100, --clients >= 1, --seconds >= {2 * WARM_S:g}"
        print(f"bench_serve_memory: need {need}", file=sys.stderr)
        return 2
    print(f"# bench_serve_memory: --jobs {a.jobs} --clients {a.clients} --seconds {a.seconds:g}"
          f"{' --baseline ' + a.baseline if a.baseline else ''}; {os.cpu_count()} CPUs; "
          f"load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="hm-bench-serve-") as name:
        tmp = Path(name)
        lake = tmp / "hushmon.lake"
        _write(lake, _records(a.jobs, 200), chunks=20)
        trees = [("this tree", ROOT / "python")]
        if a.baseline:
            made = Path(a.baseline) / "python" / "hushmon"
            tree = Path(a.baseline) if made.is_dir() else baseline_tree(a.baseline, tmp)
            trees.append((f"baseline {a.baseline}", tree / "python"))
        sides = []
        for label, python in trees:
            side = Side(label.split()[0])
            run_side(side, python, lake, tmp, a)
            sides.append((label, side))
    results = {label: s.figures() for label, s in sides}
    floors = {label: s.floors_mib() for label, s in sides}
    for label, f in results.items():
        print(f"{label}: {f['requests']:,} answered ({f['errors']} failed), "
              f"{f['requests_per_s']:.1f}/s, p50 {f['p50_ms']:.0f} ms, p99 {f['p99_ms']:.0f} ms; "
              f"threads at most {f['threads_max']}; RssAnon MiB after {WARM_S:g} s "
              f"{f['rss_anon_warm_mib']:.1f}, end {f['rss_anon_end_mib']:.1f}, "
              f"max {f['rss_anon_max_mib']:.1f}")  # fmt: skip
        print(
            f"  lowest RssAnon of each {WINDOW_S:g} s: "
            + " ".join(f"{x:.1f}" for x in floors[label])
        )
    if len(sides) == 2:
        new, old = (results[label] for label, _ in sides)
        print("this tree / baseline: " + ", ".join(
            f"{k} {new[k] / old[k]:.2f}" for k in
            ("requests_per_s", "p99_ms", "threads_max", "rss_anon_end_mib", "rss_anon_max_mib")
            if old[k]
        ))  # fmt: skip
    if a.json:
        Path(a.json).write_text(
            json.dumps({"args": vars(a), "sides": results, "floors_mib": floors}, indent=1)
        )
    return 0 if all(s.errors == 0 for _, s in sides) else 1


if __name__ == "__main__":
    sys.exit(main())
