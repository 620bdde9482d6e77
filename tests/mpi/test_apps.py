"""The shipped test programs under mpirun: tiny runs with 2 and 3-4 ranks
verify their own results and report what they moved; damaged data is caught;
bad arguments fail on every rank with one line and exit code 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mpirun_types import MpiRun

pytestmark = pytest.mark.mpi

TINY_EXCHANGE = ["--length", "4099", "--cycles", "3", "--rounds", "5", "--compute-ms", "5"]


def run_json(mpirun: MpiRun, nprocs: int, program: str, *args: str) -> dict[str, Any]:
    out = mpirun(nprocs, program, *args, "--json", "-", timeout=90)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["program"] == program
    assert summary["ranks"] == nprocs
    assert summary["verified"] is True and summary["failures"] == 0
    assert summary["time_s"] > 0
    return summary


def messages_per_round(program: str, n: int) -> int:
    """How many messages one round sends, from the pattern's definition."""
    return {"master": n - 1, "snake": n, "butterfly": n - n % 2}[program]


@pytest.mark.parametrize("nprocs", [2, 3, 4])
@pytest.mark.parametrize("program", ["master", "snake", "butterfly"])
def test_message_patterns_verify_and_count(mpirun: MpiRun, program: str, nprocs: int) -> None:
    summary = run_json(mpirun, nprocs, program, *TINY_EXCHANGE)
    messages = messages_per_round(program, nprocs) * 3 * 5
    assert summary["metrics"]["messages"] == messages
    assert summary["bytes_moved"] == messages * 4099
    assert summary["parameters"]["length"] == 4099
    assert summary["metrics"]["compute_flops"] > 0
    assert summary["rate_bytes_per_s"] > 0


@pytest.mark.parametrize("program", ["master", "snake", "butterfly"])
def test_time_bounded_message_phases(mpirun: MpiRun, program: str) -> None:
    # The default mode: rounds go on for --comm-ms by rank 0's clock, and
    # every rank runs the same rounds (or the counts would not add up).
    summary = run_json(
        mpirun, 3, program, "--length", "64K", "--cycles", "2", "--comm-ms", "100",
        "--compute-ms", "50",
    )  # fmt: skip
    rounds = summary["metrics"]["rounds"]
    assert rounds >= 2
    assert summary["metrics"]["messages"] == messages_per_round(program, 3) * rounds
    assert summary["busy_s"] >= 2 * 0.1


@pytest.mark.parametrize("length", ["1", "15", "16"])
def test_short_messages_still_verified(mpirun: MpiRun, length: str) -> None:
    # The seed's smallest message is 1 byte; the stamp must fit any length.
    summary = run_json(
        mpirun,
        3,
        "snake",
        "--length",
        length,
        "--cycles",
        "2",
        "--rounds",
        "3",
        "--compute-ms",
        "0",
    )
    assert summary["bytes_moved"] == 3 * 2 * 3 * int(length)


@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_matmul_verifies_and_reports_flops(mpirun: MpiRun, nprocs: int) -> None:
    size, repeat = 67, 2  # not a multiple of the ranks or of the block
    summary = run_json(
        mpirun, nprocs, "matmul", "--size", str(size), "--block", "8", "--repeat", str(repeat)
    )
    assert summary["metrics"]["flops"] == 2 * size**3 * repeat
    # Every band of B goes around the ring once per product: n-1 sends.
    assert summary["bytes_moved"] == (nprocs - 1) * size * size * 8 * repeat
    assert summary["metrics"]["gflops_per_s"] > 0


@pytest.mark.parametrize("nprocs", [2, 3])
@pytest.mark.parametrize("io_flags", [[], ["--direct"], ["--no-fsync"]])
def test_outofcore_streams_through_disk(
    mpirun: MpiRun, tmp_path, nprocs: int, io_flags: list[str]
) -> None:
    data, memory, passes = 1 << 20, 256 << 10, 2
    summary = run_json(
        mpirun,
        nprocs,
        "outofcore",
        "--data",
        "1M",
        "--memory",
        "256K",
        "--passes",
        str(passes),
        "--dir",
        str(tmp_path),
        *io_flags,
    )
    assert summary["metrics"]["chunks_per_rank"] == data // memory
    assert summary["metrics"]["written_bytes"] == nprocs * data * (1 + passes)
    assert summary["metrics"]["read_bytes"] == nprocs * data * (passes + 1)
    assert list(tmp_path.iterdir()) == [], "scratch files must not outlive the run"


@pytest.mark.parametrize(
    ("program", "args"),
    [
        ("butterfly", TINY_EXCHANGE),
        ("master", TINY_EXCHANGE),
        ("matmul", ["--size", "40", "--block", "8"]),
        ("outofcore", ["--data", "1M", "--memory", "256K", "--passes", "1"]),
    ],
)
def test_damaged_data_is_caught(mpirun: MpiRun, tmp_path, program: str, args: list[str]) -> None:
    extra = ["--dir", str(tmp_path)] if program == "outofcore" else []
    out = mpirun(3, program, *args, *extra, "--corrupt", timeout=90)
    assert out.returncode == 1
    assert "verification failed" in out.stderr


def one_error_line(out: subprocess.CompletedProcess[str], program: str) -> str:
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith(f"{program}:")]
    assert len(lines) == 1, out.stderr  # printed once, not once per rank
    return lines[0]


BAD_ARGS = [
    ("butterfly", ["--length", "0"], "outside"),
    ("butterfly", ["--length", "12x"], "not a whole number"),
    ("snake", ["--cycles"], "needs a value"),
    ("snake", ["--colour", "red"], "unknown option"),
    ("master", ["stray"], "unexpected argument"),
    ("master", ["--compute-ms", "nan"], "out of range"),
    ("master", ["--compute-ms", "fast"], "not a number"),
    ("snake", ["--rounds", "0", "--comm-ms", "0"], "needs --comm-ms above 0"),
    ("snake", ["--rounds", "-1"], "outside"),
    ("butterfly", ["--imbalance", "1", "--compute-ms", "0"], "needs a compute phase"),
    ("master", ["--imbalance", "-0.5"], "outside"),
    ("matmul", ["--size", "2"], "smaller than the number of ranks"),
    ("matmul", ["--size", "16", "--block", "32"], "larger than --size"),
    ("outofcore", ["--data", "1M", "--memory", "1M"], "must exceed --memory"),
    ("outofcore", ["--data", "1000000", "--memory", "4K"], "multiples of 4096"),
    ("outofcore", ["--fsync=yes"], "takes no value"),
]


# Each rank reports its own exit status; mpirun is told not to kill the
# others when one fails, so a rank that hung instead of failing would show
# up as a timeout rather than be hidden by mpirun's clean-up.
PER_RANK_EXIT = '"$0" "$@"; rc=$?; echo "rank-exit=$rc" >&2; exit $rc'
KEEP_RANKS = {"OMPI_MCA_orte_abort_on_non_zero_status": "0"}


def run_every_rank(
    mpirun: MpiRun, bin_dir: Path, nprocs: int, program: str, *args: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    out = mpirun(
        nprocs,
        "/bin/sh",
        "-c",
        PER_RANK_EXIT,
        str(bin_dir / program),
        *args,
        timeout=60,
        env=KEEP_RANKS,
    )
    exits = [ln.split("=", 1)[1] for ln in out.stderr.splitlines() if ln.startswith("rank-exit=")]
    return out, exits


@pytest.mark.parametrize(("program", "args", "message"), BAD_ARGS)
def test_bad_arguments_fail_on_every_rank(
    mpirun: MpiRun, bin_dir: Path, program: str, args: list[str], message: str
) -> None:
    out, exits = run_every_rank(mpirun, bin_dir, 3, program, *args)
    assert exits == ["2", "2", "2"], out.stderr
    assert message in one_error_line(out, program)
    assert "Traceback" not in out.stderr and "Segmentation" not in out.stderr


@pytest.mark.parametrize("program", ["snake", "butterfly"])
def test_imbalance_loads_later_ranks_more(mpirun: MpiRun, program: str) -> None:
    # --imbalance 2 on 3 ranks: rank 0 computes 1x, rank 1 2x, rank 2 3x --compute-ms
    summary = run_json(
        mpirun, 3, program, "--length", "4K", "--cycles", "2", "--rounds", "2",
        "--compute-ms", "60", "--imbalance", "2",
    )  # fmt: skip
    assert summary["parameters"]["imbalance"] == 2
    m = summary["metrics"]
    assert m["compute_s_min"] == pytest.approx(2 * 0.060, rel=0.5)
    assert m["compute_s_max"] / m["compute_s_min"] == pytest.approx(3.0, rel=0.25)
    balanced = run_json(
        mpirun, 3, program, "--length", "4K", "--cycles", "2", "--rounds", "2",
        "--compute-ms", "60",
    )["metrics"]  # fmt: skip
    # equal work: each rank computes to the same deadline, a loaded machine
    # adding only its late wake-ups (0.1-0.2 s on 0.24 s); 2 stays below the
    # 3x that --imbalance 2 gives
    assert balanced["compute_s_max"] / balanced["compute_s_min"] < 2.0


@pytest.mark.parametrize("program", ["master", "snake", "butterfly"])
def test_message_patterns_need_two_ranks(mpirun: MpiRun, program: str) -> None:
    out = mpirun(1, program, timeout=60)
    assert out.returncode == 2
    assert "needs at least 2 ranks" in one_error_line(out, program)


def test_unusable_directory_fails_every_rank(mpirun: MpiRun, bin_dir: Path, tmp_path) -> None:
    missing = tmp_path / "missing"
    out, exits = run_every_rank(
        mpirun, bin_dir, 2, "outofcore", "--data", "1M", "--memory", "256K", "--dir", str(missing)
    )
    assert exits == ["1", "1"], out.stderr
    assert str(missing) in one_error_line(out, "outofcore")


@pytest.mark.parametrize("program", ["master", "snake", "butterfly", "matmul", "outofcore"])
def test_help_lists_options_with_defaults(mpirun: MpiRun, program: str) -> None:
    out = mpirun(2, program, "--help", timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: mpirun -np N {program}")
    assert out.stdout.count("usage:") == 1  # rank 0 only
    assert "--json FILE|-" in out.stdout
    assert "[" in out.stdout  # defaults shown


def test_json_to_file(mpirun: MpiRun, tmp_path) -> None:
    target = tmp_path / "summary.json"
    out = mpirun(2, "butterfly", *TINY_EXCHANGE, "--json", str(target), timeout=60)
    assert out.returncode == 0, out.stderr
    assert "butterfly: 2 ranks" in out.stdout  # the text summary still goes to stdout
    assert json.loads(target.read_text())["bytes_moved"] == 2 * 15 * 4099
