"""Each daemon's resident size and CPU over a long whole-path run, and the
slope of its resident size after the warm-up, this tree next to a baseline
commit, both at once on the same machine.

Each side is one ``bench/bench_transport_load.py`` (this tree's script: hub,
leaves, two rack reducers per rack, the top reducer, --collectors raw
collectors and one --summaries-only collector on a lake, jobs starting and
ending, their digests under nice 19) with its own ports and folder; the
baseline side runs the Python package of ``git archive BASELINE`` (put
first on PYTHONPATH, so its ``hushmon collect`` processes run that code),
this side the working tree's; both use build/bin's C programs. Two sides
at once share the load they meet, so their figures compare as a ratio.

This script samples every process under each side every --every-s seconds
(/proc: VmRSS and RssAnon, utime + stime) and names it by its command line: hub and
leaf nats-servers, rack and top reducers, raw and summaries collectors (the
load generator, digests and short-lived helpers are left out). Printed per
daemon: resident MiB at the end of the warm-up (--warmup-s, default 360 s:
the reducers' --keep-s window of 300 s full) and at the end, the slope of
a least-squares line through the samples between them in MiB per 10
minutes, and its CPU share over that span; the load average before and
after; and the lowest resident size of each 5 minutes after the warm-up
with their slope: a store that swings by 20-30 MiB between transactions
moves the first slope with where a run happens to end, while only memory
that stays raises the floors.

With --memdump-every-s N, each side whose collector has the memory report
(transport/memdump.py) has each of its collectors (summaries and raw) write one
every N seconds (SIGUSR2; HUSHMON_TRACEMALLOC=1 in the environment adds Python's
heap): the reports' headline figures are printed per side at the end, so
that resident growth splits into glibc's heap, its free-but-kept bytes,
Arrow's pool and DuckDB's buffer manager.

With --compact-every-s N, each side's lake gets `hushmon store compact`
(nice 10) every N seconds, one at a time, as a site's hourly timer runs it
(the bench alone never compacts, so files and snapshots pile up for the
whole run); each compaction's time, peak and work are printed.

    .venv/bin/python bench/bench_daemon_memory.py [--agents 1000] [--minutes 20]
        [--baseline COMMIT] [--collectors 1] [--warmup-s 360] [--json FILE]
        [--memdump-every-s N] [--compact-every-s N]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

from baseline import baseline_tree  # noqa: E402

from hushmon.procstat import process_cpu_s, status_kib  # noqa: E402

# the memory report's lines that the summary keeps (memdump.py writes more)
MEMDUMP_HEADLINES = (
    "report ",
    "resident by mapping",
    "largest anonymous",
    "glibc heap",
    "anonymous ",
    "python object arenas",
    "arrow pool",
    "duckdb allocator",
    "duckdb buffer",
    "python heap traced",
)

# (daemon kind, words its command line holds), first match wins
KINDS = (
    ("summaries collector", ("collect", "--summaries-only")),
    ("raw collector", ("collect", "--raw-only")),
    ("top reducer", ("hushmon-reduce", "--top")),
    ("rack reducer", ("hushmon-reduce", "--rack")),
    ("hub nats-server", ("nats-server", "hub")),
    ("leaf nats-server", ("nats-server", "leaf-")),
)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def kind_of(argv: list[str]) -> str | None:
    text = " ".join(argv)
    for kind, words in KINDS:
        if all(w in text for w in words):
            return kind
    return None


def children(pid: int) -> list[int]:
    """Every process below pid (by /proc/*/stat's parent field)."""
    parent: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        parent[int(entry.name)] = int(text[text.rfind(")") + 2 :].split()[1])
    below, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        below += kids
        todo += kids
    return below


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


@dataclass
class Series:
    """One daemon's samples: (seconds since the side started, KiB, CPU s)."""

    kind: str
    pid: int
    samples: list[tuple[float, int, float]] = field(default_factory=list)
    # its anonymous resident KiB (RssAnon) at the same times: its own memory,
    # without the pages of the libraries it maps, which the page cache
    # shares and which depend on what else read those files
    anon: list[tuple[float, int, float]] = field(default_factory=list)
    # memory reports (memdump.py): when the last was asked for, the log's
    # offset read up to, and the report lines read
    dumped_at: float = 0.0
    log_offset: int = 0
    dumps: list[str] = field(default_factory=list)

    def read_dumps(self) -> None:
        """The memdump lines its stderr (a log file) gained since the last read."""
        try:
            log = os.readlink(f"/proc/{self.pid}/fd/2")
            with open(log, "rb") as f:
                f.seek(self.log_offset)
                text = f.read()
        except OSError:
            return
        end = text.rfind(b"\n") + 1
        self.log_offset += end
        for line in text[:end].decode(errors="replace").splitlines():
            if line.startswith("memdump: "):
                self.dumps.append(line[len("memdump: ") :])

    def between(self, t0: float, t1: float, anon: bool = False) -> list[tuple[float, int, float]]:
        """The samples (VmRSS, or RssAnon with ``anon``) taken from t0 to t1."""
        return [s for s in (self.anon if anon else self.samples) if t0 <= s[0] <= t1]


@dataclass
class Side:
    name: str
    proc: subprocess.Popen[bytes]
    out: Path
    t0: float
    dump_every_s: float = 0.0  # 0: no memory reports asked for
    daemons: dict[int, Series] = field(default_factory=dict)
    # `hushmon store compact` of the side's lake every compact_every_s (0:
    # none), as a site's timer runs it: the one running and those done
    compact_every_s: float = 0.0
    # none started once the load has ended: bench_transport_load compacts the
    # lake itself then, and a second compaction beside it fails
    load_s: float = float("inf")
    compacting: tuple[float, subprocess.Popen[bytes], Path] | None = None
    compactions: list[str] = field(default_factory=list)

    def compact_now(self, t: float) -> None:
        """Starts a compaction when one is due and none runs; notes one that ended."""
        if self.compacting is not None:
            began, proc, out = self.compacting
            if proc.poll() is None:
                return
            try:
                rep = json.loads(out.read_text())
                what = (
                    f"{rep['seconds']:.0f} s, peak {rep['peak_rss_mib']:,.0f} MiB, "
                    f"{rep['files_merged']:,} files merged, "
                    f"{rep['rollup_rows_added']:,} rollup rows"
                )
            except (OSError, ValueError, KeyError):
                err_file = out.with_suffix(".err")
                text = err_file.read_text(errors="replace") if err_file.exists() else ""
                last = text.strip().splitlines()[-1:]
                what = f"exit {proc.returncode}" + (f": {last[0][:200]}" if last else "")
            self.compactions.append(f"t = {began:.0f} s: {what}")
            self.compacting = None
        due = self.compact_every_s * (len(self.compactions) + 1)
        if not self.compact_every_s or t < due or t >= self.load_s:
            return
        for d in self.daemons.values():
            argv = cmdline(d.pid)
            if d.kind.endswith("collector") and "collect" in argv and "--db" in argv:
                lake = argv[argv.index("--db") + 1]
                out = self.out.with_name(f"compact-{len(self.compactions)}.json")
                cmd = ["nice", "-n", "10", *argv[: argv.index("collect")]]
                cmd += ["store", "compact", "--db", lake, "--json", str(out)]
                with out.with_suffix(".err").open("wb") as stderr:
                    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr)
                self.compacting = (t, proc, out)
                return

    def sample(self) -> None:
        t = time.monotonic() - self.t0
        for pid in children(self.proc.pid):
            d = self.daemons.get(pid)
            if d is None:
                kind = kind_of(cmdline(pid))
                if kind is None:
                    continue
                d = self.daemons[pid] = Series(kind, pid)
            st = status_kib(pid, ("VmRSS", "RssAnon"))
            if st.get("VmRSS", 0) > 0:
                d.samples.append((t, st["VmRSS"], process_cpu_s(f"/proc/{pid}/stat")))
                d.anon.append((t, st.get("RssAnon", 0), 0.0))
            if self.dump_every_s and d.kind.endswith("collector"):
                d.read_dumps()
                # the first once it has run a minute (its handler is set by then)
                first_s = d.samples[0][0] + min(60.0, self.dump_every_s)
                if t >= (d.dumped_at + self.dump_every_s if d.dumped_at else first_s):
                    d.dumped_at = t
                    os.kill(pid, signal.SIGUSR2)
        self.compact_now(t)


def start_side(name: str, a: argparse.Namespace, tmp: Path, python: Path) -> Side:
    # a tree whose collector has no SIGUSR2 handler would die of the signal
    has_memdump = (python / "hushmon" / "transport" / "memdump.py").exists()
    out = tmp / f"{name}.txt"
    argv = [
        sys.executable,
        str(ROOT / "bench" / "bench_transport_load.py"),
        "--agents", str(a.agents),
        "--minutes", str(a.minutes),
        "--collectors", str(a.collectors),
        "--engine", "c",
        "--digest-nice", "19",
        "--warmup-s", str(a.warmup_s),
        "--drain-s", "120",
    ]  # fmt: skip
    if a.stream_max_age_s:
        argv += ["--stream-max-age-s", str(a.stream_max_age_s)]
    # the C programs of this tree's build for both sides (a baseline's
    # package would look for them beside its archive)
    bin_dir = os.environ.get("HUSHMON_BIN") or str(ROOT / "build" / "bin")
    env = {**os.environ, "PYTHONPATH": str(python), "HUSHMON_BIN": bin_dir}
    with out.open("wb") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    dump_every_s = a.memdump_every_s if has_memdump else 0.0
    return Side(
        name,
        proc,
        out,
        time.monotonic(),
        dump_every_s,
        compact_every_s=a.compact_every_s,
        load_s=a.minutes * 60,
    )


def slope_mib_per_10min(samples: list[tuple[float, int, float]]) -> float:
    if len(samples) < 3:
        return float("nan")
    t = np.array([s[0] for s in samples])
    mib = np.array([s[1] for s in samples]) / 1024
    return float(np.polyfit(t, mib, 1)[0] * 600)


def window_floors_mib(samples: list[tuple[float, int, float]], window_s: float) -> list[float]:
    """The lowest resident MiB of each whole window after the first sample:
    a daemon that swings by tens of MiB between groups (a store's
    transactions, a duplicate window) leaks only if these rise."""
    if not samples:
        return []
    t0 = samples[0][0]
    floors: dict[int, float] = {}
    last = int((samples[-1][0] - t0) // window_s)
    for t, kib, _ in samples:
        w = int((t - t0) // window_s)
        if w < last:  # the last, partial window is left out
            floors[w] = min(floors.get(w, float("inf")), kib / 1024)
    return [floors[w] for w in sorted(floors)]


FLOOR_WINDOW_S = 300.0


def figures(
    side: Side, warm_s: float
) -> tuple[dict[str, dict[str, Any]], dict[str, list[list[float]]]]:
    """Per daemon (kind #n): MiB at warm-up and end, slope, CPU share; and
    its resident MiB a sample a minute (the shape, a steady climb or a saw,
    says more than the slope)."""
    out: dict[str, dict[str, Any]] = {}
    series: dict[str, list[list[float]]] = {}
    count: dict[str, int] = {}
    for d in sorted(side.daemons.values(), key=lambda d: (d.kind, d.pid)):
        if not d.samples:
            continue
        # the load's end: the last sample before the side's drain (where
        # the sampled process stopped, its own last sample)
        end_s = d.samples[-1][0]
        span = d.between(warm_s, end_s)
        if len(span) < 3:
            continue
        count[d.kind] = count.get(d.kind, 0) + 1
        name = f"{d.kind} #{count[d.kind]}"
        dt = span[-1][0] - span[0][0]
        out[name] = {
            "rss_mib_warm": span[0][1] / 1024,
            "rss_mib_end": span[-1][1] / 1024,
            "slope_mib_per_10min": slope_mib_per_10min(span),
            "cpu_share": (span[-1][2] - span[0][2]) / dt if dt > 0 else float("nan"),
            "span_s": dt,
        }
        for key, of in (("", span), ("anon_", d.between(warm_s, end_s, anon=True))):
            floors = window_floors_mib(of, FLOOR_WINDOW_S)
            out[name][f"{key}floors_mib"] = floors
            out[name][f"{key}floor_slope_mib_per_10min"] = (
                float(np.polyfit(np.arange(len(floors)), floors, 1)[0] * 600 / FLOOR_WINDOW_S)
                if len(floors) >= 3
                else float("nan")
            )
        step = max(1, round(60 / max(1e-9, d.samples[1][0] - d.samples[0][0])))
        series[name] = [[round(t), round(kib / 1024, 1)] for t, kib, _ in d.samples[::step]]
    return out, series


def memdump_lines(side: Side) -> dict[str, list[str]]:
    """Each collector's memory report lines, by "kind (pid N)"."""
    return {f"{d.kind} (pid {d.pid})": d.dumps for d in side.daemons.values() if d.dumps}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--collectors", type=int, default=1, help="raw collectors per side")
    ap.add_argument("--baseline", metavar="COMMIT", help="also run this commit's Python, at once")
    ap.add_argument("--warmup-s", type=float, default=360.0)
    ap.add_argument("--every-s", type=float, default=5.0)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument(
        "--memdump-every-s",
        type=float,
        default=0.0,
        metavar="N",
        help="a memory report from each side's collectors every N s (memdump.py)",
    )
    ap.add_argument(
        "--compact-every-s",
        type=float,
        default=0.0,
        metavar="N",
        help="'hushmon store compact' (nice 10) of each side's lake every N s, as a site's "
        "hourly timer does (default: none)",
    )
    ap.add_argument(
        "--stream-max-age-s",
        type=float,
        default=0.0,
        metavar="S",
        help="how long the hub's streams keep messages (default: the site's 6 h / 7 days); "
        "a run longer than this shows whether the hub's memory follows what they hold",
    )
    a = ap.parse_args()
    if (
        a.agents < 2
        or a.minutes * 60 <= a.warmup_s + 60
        or a.every_s <= 0
        or a.memdump_every_s < 0
        or a.compact_every_s < 0
    ):
        print(
            "bench_daemon_memory: need --agents >= 2, --minutes past --warmup-s by a minute, "
            "--every-s > 0, --memdump-every-s >= 0, --compact-every-s >= 0",
            file=sys.stderr,
        )
        return 2
    print(f"# bench_daemon_memory: {' '.join(sys.argv[1:]) or '(defaults)'}")
    print(f"# machine: {os.cpu_count()} CPUs; /proc/loadavg before: {loadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="hm-bench-mem-") as tmp_name:
        tmp = Path(tmp_name)
        sides = [start_side("this tree", a, tmp, ROOT / "python")]
        if a.baseline:
            try:
                base = baseline_tree(a.baseline, tmp) / "python"
            except subprocess.CalledProcessError:
                sides[0].proc.terminate()
                sides[0].proc.wait()
                print(f"bench_daemon_memory: cannot archive {a.baseline}", file=sys.stderr)
                return 2
            sides.append(start_side(f"baseline {a.baseline}", a, tmp, base))
        stop = threading.Event()

        def sampler() -> None:
            while not stop.wait(a.every_s):
                for s in sides:
                    if s.proc.poll() is None:
                        s.sample()

        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        rcs = [s.proc.wait() for s in sides]
        stop.set()
        thread.join()
        for s in sides:
            if s.compacting is not None:  # its lake is gone with the side's bench
                s.compacting[1].terminate()
                s.compacting[1].wait()
        both = {s.name: figures(s, a.warmup_s) for s in sides}
        results = {name: f for name, (f, _) in both.items()}
        print(f"# /proc/loadavg after: {loadavg()}")
        for s, rc in zip(sides, rcs, strict=True):
            lines = s.out.read_text(errors="replace").splitlines()
            lost = [x for x in lines if "lost" in x and "duplicated" in x][:1]
            print(f"# {s.name}: bench_transport_load exit {rc}; {' '.join(lost).strip()}")
            if rc != 0:
                # its own reasons (a daemon's exit, a digest, with every
                # digest's line to say which), else its tail
                why = [x for x in lines if x.startswith("# ") and ("exited" in x or "failed" in x)]
                if any("digests failed" in x for x in why):
                    why += [x for x in lines if x.lstrip().startswith("job ")]
                print("\n".join(f"#   {x}" for x in why or lines[-8:]))
    names = sorted({n for r in results.values() for n in r})
    print(
        f"resident MiB after the warm-up ({a.warmup_s:.0f} s) -> at the end of the load, "
        "slope in MiB per 10 min (least squares over that span), CPU share:"
    )
    print(f"{'daemon':<24}" + "".join(f"{s.name[:38]:>40}" for s in sides))
    for n in names:
        cells = []
        for s in sides:
            f = results[s.name].get(n)
            cells.append(
                f"{f['rss_mib_warm']:7.1f} -> {f['rss_mib_end']:7.1f} "
                f"{f['slope_mib_per_10min']:+6.2f}/10min {f['cpu_share'] * 100:4.0f}%"
                if f
                else "-"
            )
        print(f"{n:<24}" + "".join(f"{c:>40}" for c in cells))
    for key, what in (
        ("", "resident MiB"),
        ("anon_", "anonymous resident MiB (RssAnon: without the libraries' file pages)"),
    ):
        print(
            f"lowest {what} of each {FLOOR_WINDOW_S / 60:.0f} minutes after the warm-up "
            "(swings between groups leave these; a leak raises them) and their slope per 10 min:"
        )
        for n in names:
            for s in sides:
                f = results[s.name].get(n)
                if f and f[f"{key}floors_mib"]:
                    slope = f[f"{key}floor_slope_mib_per_10min"]
                    print(
                        f"{n:<24}{s.name[:20]:<22}"
                        + " ".join(f"{x:.0f}" for x in f[f"{key}floors_mib"])
                        + (
                            f"   {slope:+.2f}/10min"
                            if slope == slope
                            else "   (no slope under 3 windows)"
                        )
                    )
    for s in sides:
        for line in s.compactions:
            print(f"# {s.name}: store compact at {line}")
    dumps = {s.name: memdump_lines(s) for s in sides if s.dump_every_s}
    for name, by_daemon in dumps.items():
        for daemon, lines in by_daemon.items():
            print(f"# {name}: the {daemon}'s memory reports (memdump.py), headlines")
            print("\n".join(f"#   {x}" for x in lines if x.startswith(MEMDUMP_HEADLINES)))
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {
                    "args": vars(a),
                    "loadavg_end": loadavg(),
                    "sides": results,
                    "rss_mib_per_minute": {name: sr for name, (_, sr) in both.items()},
                    "memdumps": dumps,
                },
                indent=1,
            )
        )
    return 0 if all(rc == 0 for rc in rcs) else 1


if __name__ == "__main__":
    sys.exit(main())
