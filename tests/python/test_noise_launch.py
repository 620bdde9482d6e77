"""What `hushmon noise detect` says about a detector run that hung: the
line of a rank that failed in MPI_Init (Open MPI's mpirun may then wait for
the other ranks until it is killed), else the run's last line."""

from __future__ import annotations

from pathlib import Path

from hushmon.noise.launch import hung_run_detail

# What a 4-rank mpirun printed before it hung for 90 s (tests, 4 workers and a
# busy loop on this 2-vCPU VM).
OMPI_INIT_FAILURE = """\
[vm:09921] OPAL ERROR: Unreachable in file ext3x_client.c at line 112
*** An error occurred in MPI_Init
*** on a NULL communicator
*** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,
***    and potentially your MPI job)
--------------------------------------------------------------------------
"""


def test_a_rank_that_failed_in_mpi_init_is_named(tmp_path: Path) -> None:
    out = tmp_path / "detect.txt"
    out.write_text(OMPI_INIT_FAILURE)
    assert hung_run_detail(out) == (
        "a rank failed in MPI_Init: "
        "[vm:09921] OPAL ERROR: Unreachable in file ext3x_client.c at line 112"
    )


def test_otherwise_the_last_line_and_the_programs_own_first(tmp_path: Path) -> None:
    out = tmp_path / "detect.txt"
    out.write_text("hushmon-detect: warning: timer tsc is not invariant\nstill waiting\n\n")
    assert (
        hung_run_detail(out)
        == "its last output: hushmon-detect: warning: timer tsc is not invariant"
    )
    out.write_text("rank 0 waiting\n")
    assert hung_run_detail(out) == "its last output: rank 0 waiting"


def test_no_output_or_no_file_says_nothing(tmp_path: Path) -> None:
    out = tmp_path / "detect.txt"
    assert hung_run_detail(out) == ""
    out.write_text("\n  \n")
    assert hung_run_detail(out) == ""
