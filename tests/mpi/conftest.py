"""The second pass of tests/mpi under MPICH (`make test-mpich`, which gives
``--mpi-library-checks-only``) runs the tests whose outcome can depend on
the MPI library: every test that starts an MPI program or a launcher. The
tests below start none (they check the Python CLI's argument handling, a
non-MPI program, or commands that only read stores and fixtures); the Open
MPI pass of `make test-py` runs them, and the MPICH pass leaves them out.

A test is listed by its node id; one that is renamed or added is no longer
matched and runs under both MPIs, so this list can only make the MPICH
pass longer, never drop an MPI check."""

from __future__ import annotations

import pytest

# `hushmon COMMAND --json -` cases of test_json_stdout.py that start no MPI
# program (bench, noise and overhead do, and stay in both passes). `run`
# monitors `sh -c echo`: the agent, which does not link MPI.
_JSON_STDOUT_WITHOUT_MPI = (
    "alert", "collect", "compare", "ctl app", "ctl set", "ctl status", "digest", "export",
    "ingest", "job", "metrics", "run", "serve", "serve index", "serve token", "store compact",
    "store policy", "store status", "tag", "testbed down", "testbed env", "testbed exec",
    "testbed restart", "testbed status", "testbed up", "top", "transport status",
)  # fmt: skip

MPI_LIBRARY_INDEPENDENT: tuple[str, ...] = (
    *(
        f"tests/mpi/test_json_stdout.py::test_command_json_stdout_is_one_document[{c}]"
        for c in _JSON_STDOUT_WITHOUT_MPI
    ),
    "tests/mpi/test_json_stdout.py::test_cases_name_only_commands_of_the_table",
    # the overhead CLI refuses these before it starts any kernel
    "tests/mpi/test_overhead_cli.py::test_bad_input_is_one_line_exit_2[",
    "tests/mpi/test_overhead_cli.py::test_bad_runs_value_is_a_usage_error",
    # hushmon noise refuses these in Python (noise/cli.py, procedure.py, report.py)
    "tests/mpi/test_noise_pipeline.py::test_detect_bad_input[",
    "tests/mpi/test_noise_pipeline.py::test_report_of_a_directory_without_a_study",
    # hushmon-inject does not link MPI and runs without a launcher
    "tests/mpi/test_noise_detect.py::test_inject_bad_input[",
    "tests/mpi/test_noise_detect.py::test_inject_log_and_duty_json",
)


def _independent(nodeid: str) -> bool:
    # an entry ending in '[' stands for every parameter set of that test
    return any(
        nodeid.startswith(entry) if entry.endswith("[") else nodeid == entry
        for entry in MPI_LIBRARY_INDEPENDENT
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("mpi_library_checks_only"):
        return
    keep = [item for item in items if not _independent(item.nodeid)]
    dropped = [item for item in items if _independent(item.nodeid)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
