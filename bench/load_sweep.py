"""The largest agent count this machine holds: bench_transport_load.py at
rising counts, short runs, until one does not hold (the collectors' lag p99
over 5 s, the summaries' backlog growing, a batch lost or duplicated, a
daemon or a digest failing). Prints
per count the lag, the drain, and each kind's CPU per 1000 agents; the last
count that held is the one to run for 10 minutes.

    .venv/bin/python bench/load_sweep.py --agents 1000,2000,3000 [--minutes 1]
        [--collectors 2] [--engine E] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAG_GOAL_S = 5.0


def run_one(count: int, a: argparse.Namespace, out: Path) -> dict[str, object] | None:
    argv = [sys.executable, str(HERE / "bench_transport_load.py"), "--agents", str(count)]
    argv += ["--minutes", str(a.minutes), "--collectors", str(a.collectors)]
    argv += ["--racks", str(a.racks), "--drain-s", "120", "--json", str(out)]
    if a.engine:
        argv += ["--engine", a.engine]
    print(f"## {count} agents: {' '.join(argv[1:])}", flush=True)
    r = subprocess.run(argv, check=False, text=True, capture_output=True)
    for line in r.stdout.splitlines():
        if line.startswith(("# /proc", "3.", "   collectors' lag", "5.", "   the site", "   this")):
            print(line)
    if not out.exists():
        print(f"   no figures: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
        return None
    doc: dict[str, object] = json.loads(out.read_text())
    doc["rc"] = r.returncode
    return doc


def summaries_behind_s(doc: dict[str, object]) -> float:
    """collect-sum's unstored messages (p99) in seconds of summaries."""
    per_s = float(str(doc.get("summary_messages", 0))) / float(str(doc.get("periods", 1)))
    behind = float(str(doc.get("summaries_unstored_p99", "nan")))
    return behind / per_s if per_s > 0 else float("nan")


def summaries_bounded(doc: dict[str, object]) -> bool:
    """collect-sum's backlog did not grow: its mean over the last third of
    the load is at most twice the first third's plus 5 s of summaries."""
    thirds = doc.get("summaries_unstored_thirds")
    if not isinstance(thirds, list) or len(thirds) != 2:
        return False
    per_s = float(str(doc.get("summary_messages", 0))) / float(str(doc.get("periods", 1)))
    return float(thirds[1]) <= 2 * float(thirds[0]) + LAG_GOAL_S * per_s


def held(doc: dict[str, object]) -> bool:
    """Raw lag p99 within the goal, the summaries' backlog bounded, nothing
    lost or duplicated, every daemon and digest fine."""
    lag = doc.get("collector_lag_p99_s")
    return (
        doc.get("rc") == 0
        and isinstance(lag, float)
        and lag <= LAG_GOAL_S
        and summaries_bounded(doc)
        and doc.get("lost") == 0
        and doc.get("duplicated") == 0
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", required=True, help="comma list of counts, rising")
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--collectors", type=int, default=2)
    ap.add_argument("--racks", type=int, default=2)
    ap.add_argument("--engine")
    ap.add_argument("--json", metavar="FILE", help="every run's figures, as a list")
    a = ap.parse_args()
    try:
        counts = [int(c) for c in a.agents.split(",")]
    except ValueError:
        print("load_sweep: --agents is a comma list of counts", file=sys.stderr)
        return 2
    if min(counts) < a.racks or counts != sorted(counts) or a.minutes < 0.34:
        print("load_sweep: counts rising, each >= --racks; --minutes >= 0.34", file=sys.stderr)
        return 2
    runs = []
    best = 0
    with tempfile.TemporaryDirectory(prefix="hm-sweep-") as tmp:
        for count in counts:
            doc = run_one(count, a, Path(tmp) / f"{count}.json")
            if doc is None:
                break
            runs.append(doc)
            ok = held(doc)
            print(
                f"   {count} agents: {'held' if ok else 'did NOT hold'} (lag p99 "
                f"{doc.get('collector_lag_p99_s', float('nan')):.2f} s, summaries "
                f"{summaries_behind_s(doc):.1f} s behind (p99, "
                f"{'bounded' if summaries_bounded(doc) else 'GROWING'}), lost {doc.get('lost')}, "
                f"duplicated {doc.get('duplicated')}, exit {doc.get('rc')})",
                flush=True,
            )
            if not ok:
                break
            best = count
    print(f"largest count that held: {best or 'none'}")
    if a.json:
        Path(a.json).write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
