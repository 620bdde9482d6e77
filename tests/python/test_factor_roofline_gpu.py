"""roofline's GPU verdict on synthetic GPU jobs whose answer is known: GPM
percentages per GPU and period as the agent's gpu_nvidia source writes them
(docs/formats.md), in phases; GPUs without GPM named as such."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpujob import START_NS
from hushmon.digest.build import build_digest
from hushmon.digest.factors import parameters, roofline
from hushmon.digest.factors.base import AnalyzerSkip, Finding, SkipReason
from hushmon.digest.jobdata import load_job
from hushmon.store.ingest import ingest_spool

# (seconds, dram %, fp64 %, fp32 %, fp16 %, tensor %, occupancy %)
Phase = tuple[int, float, float, float, float, float, float]


def gpm_store(tmp: Path, phases: list[Phase], gpm_nodes: tuple[int, ...] = (0, 1)) -> Path:
    """Two nodes of two GPUs; GPM fields on the nodes of ``gpm_nodes`` only."""
    rows = [p[1:] for p in phases for _ in range(p[0])]
    spool = tmp / "spool"
    spool.mkdir(parents=True)
    for node in range(2):
        host = f"node{node:03d}"
        lines = []
        for t, (dram, fp64, fp32, fp16, tensor, occ) in enumerate(rows):
            ts = START_NS + t * 1_000_000_000
            lines.append(f"cpu,host={host},cpu=total user_pct=20,system_pct=2,idle_pct=78 {ts}\n")
            for gpu in range(2):
                gpm = (
                    f",dram_bw_util_pct={dram},fp64_util_pct={fp64},fp32_util_pct={fp32},"
                    f"fp16_util_pct={fp16},tensor_util_pct={tensor},sm_occupancy_pct={occ}"
                    if node in gpm_nodes
                    else ""
                )
                lines.append(f"gpu,host={host},gpu={gpu} sm_pct=90,mem_util_pct=40{gpm} {ts}\n")
            lines.append(f"job,host={host},job=g1 active=1i {ts}\n")
        (spool / f"{host}-{START_NS}-0.lp").write_text("".join(lines), encoding="ascii")
    db = tmp / "hushmon.duckdb"
    report = ingest_spool(db, spool)
    assert not report.rejected_lines, report.rejected[:3]
    return db


def analyze(db: Path) -> list[Finding]:
    job = load_job(db, "g1")
    roofline.attach_ceilings(job, db)
    return roofline.FACTOR.analyze(job, parameters()["roofline"])


def test_memory_bound_gpus(tmp_path: Path) -> None:
    # DRAM at 80 % of its maximum, the busiest pipe (fp32) at 10 %
    [f] = analyze(gpm_store(tmp_path, [(60, 80, 2, 10, 0, 0, 40)]))
    ev = f.evidence
    assert f.title == "Roofline (GPU): memory-bound"
    assert ev["verdict"] == "GPU memory-bound" and ev["share_memory_bound"] == 1.0
    assert ev["gpu_periods"] == 4 * 60 and ev["periods"] == "0-60 s"
    assert ev["gpus"] == "node000/gpu0, node001/gpu0, node000/gpu1, node001/gpu1"
    assert ev["median_dram_bw_util_pct"] == 80 and ev["median_fp32_util_pct"] == 10
    assert [r["verdict"] for r in ev["per_gpu"]] == ["memory-bound"] * 4
    assert "gpus_without_gpm" not in ev
    # gap to the DRAM roof 1 - 0.8; at 80 % attainable the roof is reached
    assert f.loss is not None
    assert f.loss.high_share == pytest.approx(0.2) and f.loss.low_share == pytest.approx(0.0)
    assert "arithmetic intensity" in f.hint and "fp32 at 10.0%" in f.hint


def test_compute_then_neither_known_shares_and_loss(tmp_path: Path) -> None:
    # 40 s with the tensor pipe at 70 % (DRAM 30), then 20 s below both roofs
    # (DRAM 20 %, pipes 10 %), then 10 s idle (left out)
    db = gpm_store(
        tmp_path,
        [(40, 30, 0, 5, 0, 70, 60), (20, 20, 0, 10, 10, 0, 8), (10, 0, 0, 0, 0, 0, 0)],
    )
    [f] = analyze(db)
    ev = f.evidence
    assert ev["verdict"] == "GPU compute-bound"
    assert ev["gpu_periods"] == 4 * 60  # the idle 10 s are not counted
    assert ev["share_compute_bound"] == pytest.approx(2 / 3, abs=1e-3)
    assert ev["share_neither"] == pytest.approx(1 / 3, abs=1e-3)
    assert ev["share_memory_bound"] == 0
    assert ev["periods"] == "0-40 s" and f.span_s == (0.0, 40.0)
    assert "tensor pipe is the roof" in f.hint
    # gaps: 0.3 for 40 s and 0.8 for 20 s; at 80 % attainable 0.125 and 0.75
    assert f.loss is not None
    assert f.loss.high_share == pytest.approx((40 * 0.3 + 20 * 0.8) / 60, abs=1e-3)
    assert f.loss.low_share == pytest.approx((40 * 0.125 + 20 * 0.75) / 60, abs=1e-3)


def test_neither_between_the_thresholds(tmp_path: Path) -> None:
    # DRAM high but a pipe at 40 %: not memory-bound (pipes not low), not compute-bound
    [f] = analyze(gpm_store(tmp_path, [(30, 70, 40, 0, 0, 0, 30)]))
    assert f.evidence["verdict"] == "GPU neither (latency, transfers or waiting)"
    assert "latency" in f.hint


def test_gpus_without_gpm_say_so(tmp_path: Path) -> None:
    [f] = analyze(gpm_store(tmp_path, [(30, 80, 2, 10, 0, 0, 40)], gpm_nodes=()))
    assert f.title == "Roofline (GPU): GPM not available on these GPUs"
    assert f.severity == "info" and f.loss is None
    assert f.evidence["gpus_without_gpm"] == (
        "node000/gpu0, node001/gpu0, node000/gpu1, node001/gpu1"
    )
    assert "GPM not available on these GPUs" in f.hint and "Hopper" in f.hint


def test_some_gpus_without_gpm_are_named(tmp_path: Path) -> None:
    [f] = analyze(gpm_store(tmp_path, [(30, 80, 2, 10, 0, 0, 40)], gpm_nodes=(0,)))
    assert f.evidence["verdict"] == "GPU memory-bound"
    assert f.evidence["gpus"] == "node000/gpu0, node000/gpu1"
    assert f.evidence["gpus_without_gpm"] == "node001/gpu0, node001/gpu1"


def test_too_few_working_periods_skips(tmp_path: Path) -> None:
    with pytest.raises(AnalyzerSkip) as skip:
        analyze(gpm_store(tmp_path, [(30, 0, 0, 0, 0, 0, 0)]))
    assert skip.value.reason == SkipReason.MISSING_SENSOR  # the CPU's reason first
    assert "GPU: 0 GPU-periods" in skip.value.detail


def test_digest_has_the_gpu_finding_with_severity_from_loss(tmp_path: Path) -> None:
    db = gpm_store(tmp_path, [(40, 30, 0, 5, 0, 70, 60), (20, 20, 0, 10, 10, 0, 8)])
    d = build_digest(db, "g1", tmp_path / "report")
    [f] = [f for f in d.findings if f.factor == "roofline"]
    assert f.title == "Roofline (GPU): compute-bound"
    assert f.severity == "high" and f.severity_rule.startswith("from the estimated")
