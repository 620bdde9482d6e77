"""The collector's fuzz run: mutated raw batches and summaries (headers above
int64, digits of other scripts, broken subjects, flipped bytes and extreme
numbers in bodies, summaries with values of the wrong type, NaN, deep
nesting) mixed with valid ones, stored by the collector's own write calls
(hushmon.transport.fuzz). Printed: messages tried, how each kind was
refused, exceptions that escaped (the goal: 0), valid batches stored
whole (the goal: all), and the rate, with the load average.

    .venv/bin/python bench/bench_collect_fuzz.py [--messages 100000 --seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from hushmon.progress import bar
from hushmon.transport.fuzz import fuzz_collector


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--valid-share", type=float, default=0.1)
    ap.add_argument("--json", metavar="FILE", help="the figures as JSON ('-' for stdout)")
    args = ap.parse_args()
    if args.messages < 1 or not 0.0 <= args.valid_share <= 1.0:
        print("bench_collect_fuzz: --messages >= 1 and --valid-share in [0, 1]", file=sys.stderr)
        return 2
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp, bar("fuzz", args.messages, "msg") as pb:
        done = 0

        def advance(n: int) -> None:
            nonlocal done
            pb.update(n - done)
            done = n

        r = fuzz_collector(
            Path(tmp) / "fuzz.duckdb",
            args.messages,
            seed=args.seed,
            valid_share=args.valid_share,
            progress=advance,
        )
    out = sys.stderr if args.json == "-" else sys.stdout
    print(
        f"collector fuzz run, seed {args.seed}: {r.messages:,} messages "
        f"({r.mutated_batches:,} mutated batches, {r.mutated_summaries:,} mutated summaries, "
        f"{r.valid_batches:,} valid batches, {r.valid_summaries:,} valid summaries) "
        f"in {r.seconds:.1f} s ({r.messages / r.seconds:,.0f} messages/s; "
        f"load {load_before:.1f} -> {os.getloadavg()[0]:.1f})",
        file=out,
    )
    print(
        f"refused: {r.rejected_batches:,} batches, {r.malformed_lines:,} malformed lines, "
        f"{r.rejected_summaries:,} summaries",
        file=out,
    )
    print(
        f"exceptions escaped: {len(r.escaped)}; valid batches stored: "
        f"{r.valid_batches_stored:,} of {r.valid_batches:,} "
        f"({r.valid_lines_stored:,} of {r.valid_lines_expected:,} lines) -> "
        f"{'OK' if r.ok else 'FAILED'}",
        file=out,
    )
    for e in r.escaped[:5]:
        print(e, file=sys.stderr)
    if args.json:
        text = json.dumps({**r.to_json(), "escaped": r.escaped[:20], "seed": args.seed})
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    return 0 if r.ok else 1


if __name__ == "__main__":
    sys.exit(main())
