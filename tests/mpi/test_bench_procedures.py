"""hushmon-bench's OSU and IMB procedures (--method osu, imb) and passes
(--passes, shuffled order, budget) on 2 ranks: the fields the tools print,
their counts, and the per-point summary. No timing is asserted."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from mpirun_types import MpiRun

pytestmark = pytest.mark.mpi

PROGRAM = "hushmon-bench"
YIELD = {"OMPI_MCA_mpi_yield_when_idle": "1"}
FAST = [
    "--stage-launches", "4", "--warmup-launches", "2", "--min-valid", "3",
    "--max-valid", "6", "--max-total", "12", "--bcast-probes", "3", "--sync-rounds", "20",
]  # fmt: skip


def bench(mpirun: MpiRun, *args: str, timeout: float = 120) -> dict[str, Any]:
    out = mpirun(2, PROGRAM, *args, "--json", "-", timeout=timeout, env=YIELD)
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def test_osu_procedure_fields_and_counts(mpirun: MpiRun) -> None:
    doc = bench(mpirun, "--op", "bcast,allreduce,barrier", "--sizes", "8,8192,8193", "--method",
                "osu")  # fmt: skip
    by_key = {(r["op"], r["size"]): r for r in doc["results"]}
    assert set(by_key) == {(op, s) for op in ("bcast", "allreduce") for s in (8, 8192, 8193)} | {
        ("barrier", 0)
    }
    for (_op, size), r in by_key.items():
        osu = r["osu"]
        # OSU's columns: Size, Avg / Min / Max Latency(us), Iterations.
        assert osu.keys() == {
            "size", "avg_latency_us", "min_latency_us", "max_latency_us", "iterations", "skip",
        }  # fmt: skip
        assert osu["size"] == size
        large = size > 8192
        assert (osu["iterations"], osu["skip"]) == ((100, 10) if large else (1000, 100))
        # One sample per rank (its own mean): avg is their mean, min/max over ranks.
        assert r["n_total"] == r["n_valid"] == r["n_used"] == 2
        assert osu["min_latency_us"] <= osu["avg_latency_us"] <= osu["max_latency_us"]
        assert math.isclose(osu["avg_latency_us"], r["mean"] * 1e6, rel_tol=1e-9)
        assert math.isclose(osu["max_latency_us"], r["max"] * 1e6, rel_tol=1e-9)
        assert r["buffers"] == "reuse"  # OSU reuses its buffer unless told otherwise
        assert r["global_mean"] is None and r["clock_valid"] is None
        assert "imb" not in r


def test_imb_procedure_fields_counts_and_off_cache(mpirun: MpiRun) -> None:
    doc = bench(mpirun, "--op", "allreduce,bcast", "--sizes", "0,64K", "--method", "imb")
    for r in doc["results"]:
        imb = r["imb"]
        assert imb.keys() >= {"bytes", "repetitions", "t_min_usec", "t_max_usec", "t_avg_usec"}
        assert imb["t_min_usec"] <= imb["t_avg_usec"] <= imb["t_max_usec"]
        assert math.isclose(imb["t_avg_usec"], r["mean"] * 1e6, rel_tol=1e-9)
        # 1000 at size 0; at 64 KiB at most 40 MiB / 64 KiB = 640, fewer only
        # if a call took more than 10 ms / 640 (dynamic policy).
        if imb["bytes"] == 0:
            assert 1 <= imb["repetitions"] <= 1000
        else:
            assert 1 <= imb["repetitions"] <= 640
        assert imb["off_cache"] is False and r["buffers"] == "reuse"
    rotated = bench(mpirun, "--op", "allreduce", "--sizes", "1K", "--method", "imb", "--buffers",
                    "rotate")  # fmt: skip
    assert rotated["results"][0]["imb"]["off_cache"] is True


def test_passes_shuffle_and_points(mpirun: MpiRun) -> None:
    args = ["--op", "bcast,allreduce", "--sizes", "8,1K", "--method", "sync,osu", "--passes",
            "3", "--budget-ms", "2", *FAST]  # fmt: skip
    doc = bench(mpirun, *args)
    results = doc["results"]
    assert len(results) == 2 * 2 * 2 * 3
    assert sorted({r["pass"] for r in results}) == [0, 1, 2]
    keys = [(r["op"], r["size"], r["method"]) for r in results]
    passes = [keys[i * 8 : (i + 1) * 8] for i in range(3)]
    # Every pass covers every point, in its own order (fixed seed: same on
    # every rank, different between passes).
    assert all(sorted(p) == sorted(passes[0]) for p in passes)
    assert len({tuple(p) for p in passes}) > 1
    assert doc["meta"]["params"]["passes"] == 3
    points = doc["points"]
    assert [(p["op"], p["size"], p["method"]) for p in points] == [
        (op, s, m) for op in ("bcast", "allreduce") for s in (8, 1024) for m in ("sync", "osu")
    ]
    for p in points:
        values = [v for v in p["pass_values"] if v is not None]
        assert len(p["pass_values"]) == 3 and p["passes"] == len(values)
        if values:
            assert p["ci_low"] <= p["median"] <= p["ci_high"]
            assert min(values) <= p["median"] <= max(values)
            # [min, max] of n values: coverage 1 - 2^(1-n) (3 passes: 0.75); a
            # pass without a valid launch on a busy machine leaves fewer.
            n = len(values)
            assert p["ci_level"] == pytest.approx(1 - 2 ** (1 - n) if n > 1 else 0.0)
            assert isinstance(p["disagree"], bool)
        causes = p["invalid_causes"]
        assert sum(causes.values()) == p["n_total"] - p["n_valid"]
        assert p["invalid_rate"] == pytest.approx((p["n_total"] - p["n_valid"]) / p["n_total"])
    # With a budget the synchronized points run past the count caps of FAST.
    sync = [r for r in results if r["method"] == "sync"]
    assert max(r["n_total"] for r in sync) > 12
    again = bench(mpirun, *args)
    order = [[(r["op"], r["size"], r["method"]) for r in again["results"]][i * 8 : (i + 1) * 8]
             for i in range(3)]  # fmt: skip
    assert order == passes  # the seed fixes the order
