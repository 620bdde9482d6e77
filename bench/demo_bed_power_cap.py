"""The power_cap and roofline findings end to end on the test bed (root).

A 2-node bed (1 rack, 500 ms periods); ``hushmon probe`` stored without
``--hosts`` (its host list names only this machine, so the nodes get its
ceilings by their CPU model, the agent's cpu_info); a PL1 of ``--limit-w``
written into node n1's simulated package (python/hushmon/testbed/raplsim.py
clips its power at it); a wait for the agent to re-read its limits (it reads
them every 60 s); then a matmul on both nodes under ``hushmon run``. Prints
the power_cap, roofline and energy findings and the load. Not a test:
nothing is asserted; the figures go to docs/digest.md ("Power cap").

    flock /tmp/hushmon-bed.lock .venv/bin/python bench/demo_bed_power_cap.py \\
        [--limit-w 25] [--size 1536] [--repeat 4] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "testbed"))
from bedlib import LiveBed, bed_unavailable, bed_up, hushmon

from hushmon import jsonio
from hushmon.paths import build_bin_dir

ZONE = "/run/hushmon/raplsys/class/powercap/intel-rapl:0"  # in a node (raplsim)
LIMITS_EVERY_S = 60  # the agent's rapl source re-reads its limits this often


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit-w", type=float, default=25.0, help="n1's PL1 (default 25 W)")
    ap.add_argument("--size", type=int, default=1536, help="matmul --size")
    ap.add_argument("--repeat", type=int, default=4, help="matmul --repeat")
    ap.add_argument("--json", metavar="FILE", help="the findings as JSON ('-' = stdout)")
    args = ap.parse_args(argv)
    if not 1 <= args.limit_w <= 1000 or args.size < 64 or args.repeat < 1:
        print("demo_bed_power_cap: --limit-w 1..1000, --size >= 64, --repeat >= 1", file=sys.stderr)
        return 2
    human = sys.stderr if args.json == "-" else sys.stdout
    why = bed_unavailable()
    if why:
        print(f"demo_bed_power_cap: {why}", file=sys.stderr)
        return 1
    result: dict[str, Any] = {"loadavg_before": loadavg()}
    with bed_up("--nodes", "2", "--racks", "1", "--period-ms", "500") as (info, data):
        bed = LiveBed(info, data)
        probe = hushmon("probe", "--data-dir", str(data), "--seconds", "0.3", "--array-mib", "64")
        if probe.returncode != 0:
            print(f"demo_bed_power_cap: probe: {probe.stderr.strip()}", file=sys.stderr)
            return 1
        uw = int(args.limit_w * 1e6)
        wrote = bed.node_exec("n1", "sh", "-c", f"echo {uw} > {ZONE}/constraint_0_power_limit_uw")
        if wrote.returncode != 0:
            print(f"demo_bed_power_cap: the limit: {wrote.stderr.strip()}", file=sys.stderr)
            return 1
        print(f"n1's PL1 set to {args.limit_w:g} W; waiting {LIMITS_EVERY_S + 2} s", file=human)
        time.sleep(LIMITS_EVERY_S + 2)
        matmul = str(build_bin_dir() / "matmul")
        run = hushmon(
            "run", "--data-dir", str(data), "--json", "-", "--",
            "srun", "-N", "2", matmul, "--size", str(args.size), "--repeat", str(args.repeat),
            timeout=600,
        )  # fmt: skip
        if run.returncode != 0:
            print(f"demo_bed_power_cap: run: {run.stderr.strip()[-500:]}", file=sys.stderr)
            return 1
        digest = json.loads(Path(json.loads(run.stdout)["digest"]["json"]).read_text())
    result["loadavg_after"] = loadavg()
    result["findings"] = [
        f for f in digest["findings"] if f["factor"] in ("power_cap", "roofline", "energy")
    ]
    print(f"loadavg {result['loadavg_before']} (before) / {result['loadavg_after']} (after)",
          file=human)  # fmt: skip
    for f in result["findings"]:
        print(f"[{f['severity']}] {f['title']}: {f['hint']}", file=human)
    jsonio.emit(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
