"""Fixtures every pytest module may use: where the built programs are, and
how to launch them under mpirun on this machine."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from mpirun_types import MpiRun

from hushmon.paths import REPO_ROOT, build_bin_dir
from hushmon.runner import mpirun_command


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
        return subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, check=False, env=full_env
        )

    return run
