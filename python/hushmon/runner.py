"""Launching MPI programs the way users do: ``mpirun`` (Open MPI or MPICH).

Everything that needs mpirun goes through :func:`mpirun_command`, so the
flags this machine needs (running as root, more ranks than cores) are added
in one place.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from hushmon.errors import HushmonError


def mpirun_path() -> str:
    found = shutil.which(os.environ.get("HUSHMON_MPIRUN", "mpirun"))
    if found is None:
        raise HushmonError("mpirun not found: install Open MPI (scripts/install-deps.sh)")
    return found


def is_open_mpi(mpirun: str) -> bool:
    try:
        out = subprocess.run(
            [mpirun, "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Open MPI" in out.stdout + out.stderr


def mpirun_command(
    nprocs: int,
    program: Sequence[str | Path],
    *,
    oversubscribe: bool | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The full mpirun command line for ``nprocs`` ranks of ``program``.

    Open MPI refuses to run as root and to place more ranks than cores unless
    told; both are normal on a test machine, so they are allowed here, and
    only here. ``oversubscribe`` defaults to "when nprocs exceeds the cores".
    """
    if nprocs < 1:
        raise HushmonError(f"process count must be at least 1, got {nprocs}")
    mpirun = mpirun_path()
    cmd = [mpirun]
    if is_open_mpi(mpirun):
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        if oversubscribe is None:
            oversubscribe = nprocs > (os.cpu_count() or 1)
        if oversubscribe:
            cmd.append("--oversubscribe")
    cmd += ["-np", str(nprocs), *extra]
    cmd += [str(p) for p in program]
    return cmd
