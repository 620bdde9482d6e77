"""Issue 10's must-show, measured: on a 4-node bed in 2 racks with the NATS
transport, ``hushmon run -- srun -N 4 build/bin/butterfly`` builds its
digest from the collector's store (data that went agent -> rack leaf ->
hub -> collector, summaries through the rack and top reducers); the same
job on the same bed shape with the spool path (``--transport none``).
Prints per path: wall time of the run, of the command, the findings
(factor and severity); the NATS store's summaries of the job (rack
partials, job-wide merges); and the digest of the same batches taken
from HM_RAW's bytes through the embedded ingest (the spool path's code on
the transport's data), which must equal the collector's.

    sudo .venv/bin/python bench/bench_transport_run.py [--command "srun -N 4 build/bin/butterfly"]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hushmon.paths import REPO_ROOT
from hushmon.store.schema import open_store_readonly

HUSHMON = [sys.executable, "-m", "hushmon.cli"]


def hushmon(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HUSHMON, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT
    )


def findings(digest_json: Path) -> list[tuple[str, str]]:
    data = json.loads(digest_json.read_text())
    return sorted((f["factor"], f["severity"]) for f in data["findings"])


def one_path(transport: str, command: list[str], data: Path) -> dict[str, Any]:
    up_started = time.monotonic()
    up = hushmon(
        "testbed", "up", "--nodes", "4", "--racks", "2", "--transport", transport,
        "--data-dir", str(data),
    )  # fmt: skip
    if up.returncode != 0:
        raise SystemExit(f"testbed up --transport {transport}: {up.stderr.strip()}")
    out: dict[str, Any] = {"transport": transport, "up_s": time.monotonic() - up_started}
    try:
        started = time.monotonic()
        run = hushmon("run", "--data-dir", str(data), "--json", "-", "--", *command)
        out["run_s"] = time.monotonic() - started
        if run.returncode != 0:
            raise SystemExit(f"hushmon run ({transport}): {run.stderr.strip()[-500:]}")
        outcome = json.loads(run.stdout)
        out["job"] = outcome["job"]
        out["command_s"] = outcome["duration_s"]
        out["warnings"] = outcome.get("warnings", [])
        out["findings"] = findings(Path(outcome["digest"]["json"]))
        out["collected_store"] = outcome.get("collected_store")
        if transport == "nats":
            out.update(_nats_side(data, out["job"]))
    finally:
        hushmon("testbed", "down")
    return out


def _nats_side(data: Path, job: str) -> dict[str, Any]:
    """The job's summaries in the collector's store, and the digest of
    HM_RAW's bytes through the embedded ingest (while the bed is up)."""
    from hushmon.digest.build import build_digest
    from hushmon.store.ingest import ingest_spool
    from hushmon.testbed import faults
    from hushmon.testbed.state import load

    bed = load()
    assert bed is not None
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="hm-must-", dir="/var/tmp") as tmp:
        copy = Path(tmp) / "spool"
        asyncio.run(faults._stream_to_spool(copy))
        ingest_spool(Path(tmp) / "s.duckdb", copy)
        d = build_digest(Path(tmp) / "s.duckdb", job, Path(tmp) / "reports")
        out["stream_findings"] = sorted((f.factor, f.severity) for f in d.findings)
        con = open_store_readonly(bed.store)  # the lake, read while collecting
        try:
            out["summaries"] = dict(
                con.execute(
                    "SELECT level, count(*) FROM summary_messages WHERE job = ? GROUP BY level",
                    [job],
                ).fetchall()
            )
            out["batches"] = con.execute("SELECT count(*) FROM transport_batches").fetchall()[0][0]
        finally:
            con.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--command", default="srun -N 4 build/bin/butterfly")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_transport_run: the test bed needs root", file=sys.stderr)
        return 2
    command = shlex.split(args.command)
    results = []
    for transport in ("nats", "none"):
        data = Path(f"/var/tmp/hushmon-must-{transport}-{os.getpid()}")
        try:
            results.append(one_path(transport, command, data))
        finally:
            shutil.rmtree(data, ignore_errors=True)
    for r in results:
        print(
            f"{r['transport']:5s}: up {r['up_s']:.1f} s, run {r['run_s']:.1f} s "
            f"(command {r['command_s']:.1f} s), job {r['job']}, findings {r['findings']}"
        )
        for w in r["warnings"]:
            print(f"       warning: {w}")
        if r["transport"] == "nats":
            print(f"       store: {r['batches']} batches; job summaries {r['summaries']}")
            print(f"       HM_RAW through the embedded ingest: findings {r['stream_findings']}")
    nats, spool = results
    same_data = nats["findings"] == nats["stream_findings"]
    same_job = nats["findings"] == spool["findings"]
    print(f"collector's store == HM_RAW's bytes ingested: {same_data}")
    print(f"NATS path == spool path (two runs of the job): {same_job}")
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0 if same_data and same_job else 1


if __name__ == "__main__":
    sys.exit(main())
