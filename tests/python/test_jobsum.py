"""hushmon job: a job's seff-like summary from the store (digest, job
history, job_tags), the AdminComment text (bounded, one field for scontrol
-o and sacct -P, parsed back), Slurm's memory request."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hushmon.history.records import JobRecord, record_job
from hushmon.jobsum.slurm import mem_bytes, requested_mem_per_node
from hushmon.jobsum.summary import MAX_COMMENT_CHARS, JobSummary, from_comment, seff_lines
from hushmon.store.schema import open_store

DIGEST = {
    "job": "77", "nodes": ["n1", "n2"], "duration_s": 3725.0, "periods": 3725, "period_s": 1.0,
    "sensors": [
        {"name": "cpu.busy_pct", "min": 5.0, "avg": 12.5, "max": 30.0},
        {"name": "mem.used_bytes", "min": 1e9, "avg": 2e9, "max": 3 * 2**30},
    ],
    "findings": [
        {"factor": "topology", "severity": "low", "title": "Traffic", "hint": "x."},
        {"factor": "idle_cpu", "severity": "high", "title": "Idle or waiting CPUs",
         "hint": "On average 87% of the job's CPU time is idle. Run one process per core."},
    ],
}  # fmt: skip


def _hushmon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hushmon.cli", *args],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_job_from_the_store_tags_and_json(tmp_path: Path) -> None:
    store = tmp_path / "hushmon.duckdb"
    open_store(store).close()
    record_job(store, [JobRecord(job="77", owner="alice", state="COMPLETED", start_ns=1)])
    (tmp_path / "reports" / "77").mkdir(parents=True)
    (tmp_path / "reports" / "77" / "digest.json").write_text(json.dumps(DIGEST))
    tagged = _hushmon("tag", "77", "--data-dir", str(tmp_path))
    assert tagged.returncode == 0, tagged.stderr
    out = _hushmon("job", "77", "--from", "store", "--data-dir", str(tmp_path), "--json", "-")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert (s["user"], s["state"], s["nodes"]) == ("alice", "COMPLETED", 2)
    assert s["cpu_busy_pct"] == 12.5 and s["mem_peak_bytes"] == 3 * 2**30
    assert s["main_finding"] == "Idle or waiting CPUs (high)"
    assert s["hint"] == "On average 87% of the job's CPU time is idle."
    assert s["tags"] == ["lowload"]  # from job_tags, written by hushmon tag
    text = _hushmon("job", "77", "--from", "store", "--data-dir", str(tmp_path)).stdout
    assert "Job Wall-clock time: 01:02:05" in text
    assert "CPU Efficiency: 12.5% of the allocated CPUs busy" in text
    assert "Memory Utilized: 3.00 GiB peak on a node (request not known)" in text
    missing = _hushmon("job", "78", "--from", "store", "--data-dir", str(tmp_path))
    assert missing.returncode != 0 and len(missing.stderr.strip().splitlines()) == 1


def test_admin_comment_is_one_bounded_field_and_parses_back() -> None:
    s = JobSummary(job="42", state="COMPLETED", nodes=4, elapsed_s=61.0, cpu_busy_pct=42.25,
                   mem_peak_bytes=3.5 * 2**30, mem_req_bytes=4 * 2**30, gpu_busy_pct=None,
                   main_finding="Idle or waiting CPUs (high)", hint="A | B, with spaces.",
                   tags=["lowload", "short_job"], report="https://h/job/42")  # fmt: skip
    text = s.to_comment()
    assert text.startswith("hushmon1:") and " " not in text and "|" not in text
    assert "\n" not in text
    back = from_comment(text)
    assert back is not None
    assert (back.job, back.hint, back.tags, back.cpu_busy_pct) == ("42", "A | B, with spaces.",
                                                                   s.tags, 42.2)  # fmt: skip
    assert round(back.mem_share_pct or 0) == 88
    assert any("3.50 GiB peak on a node of 4.00 GiB requested per node (87.5%)" in line
               for line in seff_lines(back))  # fmt: skip
    s.hint = "very long " * 300
    long = s.to_comment()
    assert len(long) <= MAX_COMMENT_CHARS and from_comment(long) is not None
    assert from_comment("JS1:abc") is None and from_comment("hushmon1:{bad") is None


def test_slurm_memory_request() -> None:
    assert mem_bytes("4000M") == 4000 * 2**20 and mem_bytes("2G") == 2 * 2**30
    assert mem_bytes("512") == 512 * 2**20 and mem_bytes("0") is None
    assert requested_mem_per_node({"MinMemoryNode": "8G"}) == 8 * 2**30
    fields = {"ReqTRES": "cpu=4,mem=16G,node=2,billing=4", "NumNodes": "2"}
    assert requested_mem_per_node(fields) == 8 * 2**30
    assert requested_mem_per_node({"ReqTRES": "cpu=1,node=1"}) is None
