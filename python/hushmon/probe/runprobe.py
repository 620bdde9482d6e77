"""Running ``hushmon-probe`` (here, or on another node type through a launcher
such as ``srun -N1 -p gpu``) and turning its JSON into a record."""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.paths import program
from hushmon.probe.ceilings import Ceilings


def probe_command(
    launch: str | None, seconds: float, array_mib: int | None, threads: int | None
) -> list[str]:
    cmd = shlex.split(launch) if launch else []
    cmd += [str(program("hushmon-probe")), "--json", "-", "--seconds", f"{seconds:g}"]
    if array_mib is not None:
        cmd += ["--array-mib", str(array_mib)]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    return cmd


def load_avg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def run_probe(cmd: list[str], timeout_s: float) -> Ceilings:
    """Runs the probe; its one-line error becomes ours, its JSON a record."""
    load_before = load_avg()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError as exc:
        raise HushmonError(f"cannot run {cmd[0]}: not found", exit_code=1) from exc
    except subprocess.TimeoutExpired as exc:
        raise HushmonError(f"{shlex.join(cmd)}: no result after {timeout_s:.0f} s", 1) from exc
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise HushmonError(f"the probe failed: {why}", exit_code=1)
    try:
        out = json.loads(done.stdout)
        return Ceilings(
            cpu_model=str(out["cpu_model"]),
            online_cpus=int(out["online_cpus"]),
            gb_per_s=float(out["triad"]["gb_per_s"]),
            gflop_per_s=float(out["fma"]["gflop_per_s"]),
            isa=str(out["fma"]["isa"]),
            threads=int(out["threads"]),
            beyond_llc=bool(out["triad"]["beyond_llc"]),
            array_bytes=int(out["triad"]["array_bytes"]),
            probed_host=str(out["host"]),
            measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            load_avg=f"{load_before} before, {load_avg()} after",
            hosts=[str(out["host"])],
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise HushmonError(f"the probe's output is not its JSON ({exc})", exit_code=1) from exc
