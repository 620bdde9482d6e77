"""The NPB-like kernels (c/apps/ep.c, is.c, cg.c, mg.c, ft.c, lu.c) under mpirun: class S
on 2 ranks verifies its own result, damaged data fails with exit 1, a bad
class fails on every rank with one line and exit 2."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mpirun_types import MpiRun

pytestmark = pytest.mark.mpi

KERNELS = ["ep", "is", "cg", "mg", "ft", "lu"]


def run_json(mpirun: MpiRun, nprocs: int, kernel: str, *args: str) -> dict[str, Any]:
    out = mpirun(nprocs, kernel, *args, "--json", "-", timeout=120)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["program"] == kernel and summary["ranks"] == nprocs
    assert summary["verified"] is True and summary["failures"] == 0
    assert summary["parameters"]["class"] == "S"
    assert summary["time_s"] > 0
    return summary


@pytest.mark.parametrize("kernel", KERNELS)
def test_class_s_verifies_on_two_ranks(mpirun: MpiRun, kernel: str) -> None:
    run_json(mpirun, 2, kernel, "--class", "S")


@pytest.mark.parametrize("kernel", KERNELS)
def test_corrupt_result_fails_the_check(mpirun: MpiRun, kernel: str) -> None:
    out = mpirun(2, kernel, "--class", "S", "--corrupt", timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "VERIFICATION FAILED" in out.stdout + out.stderr


@pytest.mark.parametrize("kernel", KERNELS)
def test_bad_class_is_one_line_exit_2(mpirun: MpiRun, kernel: str) -> None:
    out = mpirun(2, kernel, "--class", "Z", timeout=60)
    assert out.returncode == 2
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith(f"{kernel}:")]
    assert len(lines) == 1 and "expected S, W or A" in lines[0], out.stderr


def test_ep_matches_npb_sums_on_any_rank_count(mpirun: MpiRun) -> None:
    # The stream is split by skipping ahead, so 1 and 3 ranks draw the same
    # numbers; NPB class W's published sums are the reference.
    for nprocs in (1, 3):
        m = run_json(mpirun, nprocs, "ep", "--class", "S")["metrics"]
        assert m["sum_x"] == pytest.approx(-2.863319731645753e3, rel=1e-8)
        assert m["sum_y"] == pytest.approx(-6.320053679109499e3, rel=1e-8)
        assert m["pairs"] == 2**25


def test_is_and_cg_on_three_ranks(mpirun: MpiRun) -> None:
    # An odd rank count: uneven key ranges and row blocks still verify.
    keys = run_json(mpirun, 3, "is", "--class", "S")["metrics"]
    assert keys["keys"] == 2**22
    rows = run_json(mpirun, 3, "cg", "--class", "S")["metrics"]
    assert rows["rows"] == 2**17 and rows["residual"] < 1e-8


def test_ft_and_lu_give_the_same_result_on_any_rank_count(mpirun: MpiRun) -> None:
    # FT's field is split by skipping ahead in the generator, LU's updates
    # run in the same order whatever the split: 1 and 2 ranks agree.
    for kernel in ("ft", "lu"):
        one = run_json(mpirun, 1, kernel, "--class", "S")["metrics"]["checksum"]
        two = run_json(mpirun, 2, kernel, "--class", "S")["metrics"]["checksum"]
        assert two == pytest.approx(one, rel=1e-10), kernel


def test_mg_and_ft_refuse_rank_counts_they_cannot_split(mpirun: MpiRun) -> None:
    for kernel, message in (("mg", "power-of-two"), ("ft", "dividing")):
        out = mpirun(3, kernel, "--class", "S", timeout=60)
        assert out.returncode == 2
        assert message in out.stderr, out.stderr
