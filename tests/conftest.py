"""Fixtures every pytest module may use: where the built programs are, and
how to launch them under mpirun on this machine; and the scheduler that
keeps the tests that must not overlap on one pytest-xdist worker."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from mpirun_types import MpiRun

from hushmon.paths import REPO_ROOT, build_bin_dir
from hushmon.runner import mpi_init_failure, mpirun_command
from hushmon.transport.natsserver import (
    LocalNatsServer,
    NatsServerConfig,
    ensure_streams,
    site_consumers,
)

# A suite started in the background by a non-interactive shell (`make test &`,
# `nohup ... &`) inherits SIGINT ignored, and so would every program it starts:
# the tests that stop `hushmon run` or `hushmon serve` with SIGINT would wait for
# them in vain. A handler here is reset to the default in each child at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def bin_dir() -> Path:
    path = build_bin_dir()
    if not path.is_dir():
        pytest.fail(f"{path} missing: run 'make' before the tests")
    return path


@pytest.fixture(scope="session")
def mpirun(bin_dir: Path) -> MpiRun:
    """mpirun(nprocs, program, *args, timeout=120) -> CompletedProcess.

    ``program`` is a name in build/bin or a path. A hang fails the test at
    ``timeout`` instead of blocking the suite.
    """

    def run(
        nprocs: int, program: str, *args: str, timeout: float = 120, env: dict | None = None
    ) -> subprocess.CompletedProcess[str]:
        exe = program if os.sep in program else str(bin_dir / program)
        cmd: Sequence[str] = mpirun_command(nprocs, [exe, *args])
        full_env = {**os.environ, **(env or {})}

        def launch() -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, check=False, env=full_env
            )

        # A rank that failed in MPI_Init under load (runner.mpi_init_failure;
        # mpirun may then hang until the timeout) is the launch's failure, not
        # the program's: one more launch.
        try:
            done = launch()
        except subprocess.TimeoutExpired as exc:
            err = exc.stderr or b""
            if not mpi_init_failure(
                err.decode(errors="replace") if isinstance(err, bytes) else err
            ):
                raise
            return launch()
        if done.returncode != 0 and mpi_init_failure(done.stderr):
            return launch()
        return done

    return run


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--mpi-library-checks-only",
        action="store_true",
        help="leave out the tests/mpi tests that start no MPI program (make test-mpich: "
        "the Open MPI pass runs them; tests/mpi/conftest.py lists them)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # `make test-py` spreads the tests over pytest-xdist workers, keeping the
    # bed's and the MPI tests each on one worker (xdist_groups.py); without
    # pytest-xdist (or with -p no:xdist) the suite runs in one process.
    if config.pluginmanager.hasplugin("xdist"):
        from xdist_groups import GroupScheduler

        config.pluginmanager.register(GroupScheduler(), "hushmon-xdist-groups")


# The racks whose reducer consumers the nats_server fixture declares.
TEST_RACKS = ("r1", "r2")


@pytest.fixture()
def nats_server(tmp_path: Path) -> Iterator[LocalNatsServer]:
    """A JetStream nats-server on a free loopback port with HM_RAW and HM_SUM
    and the durable consumers of racks r1 and r2 declared (the admin's step:
    reducers and the collector only bind); stopped after the test."""
    server = LocalNatsServer(NatsServerConfig(name="test-hub", store_dir=tmp_path / "js"), tmp_path)
    server.start()
    try:
        ensure_streams(server.url, consumers=site_consumers(TEST_RACKS))
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def no_live_bed_topology(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A digest in this process reads Slurm's topology.conf from /etc/slurm,
    which points into a test bed while one is up: on parallel workers a
    synthetic job's digest would take another test's bed for its fabric.
    Only the bed's own tests (tests/testbed) see the machine's Slurm."""
    if "testbed" in Path(str(request.node.path)).parts:
        return
    from hushmon.digest import fabric

    monkeypatch.setattr(fabric, "DEFAULT_SLURM_DIR", tmp_path_factory.getbasetemp() / "no-slurm")
    monkeypatch.delenv("SLURM_CONF", raising=False)
