"""Launching MPI programs the way users do: the ``mpirun`` of Open MPI, or
MPICH's ``mpiexec`` (hydra, also Intel MPI's launcher).

Everything that starts MPI programs goes through :func:`mpirun_command`, so
what each launcher needs is decided in one place:

==============  =====================  ======================================
need            Open MPI ``mpirun``    hydra (``mpiexec.mpich``, Intel MPI)
==============  =====================  ======================================
run as root     --allow-run-as-root    (allowed anyway)
ranks > cores   --oversubscribe        (allowed anyway)
environment     -x NAME=VALUE          -genv NAME VALUE
hosts           --host a,b             -hosts a,b
TCP transport   --mca btl tcp,self     MPIR_CVAR_NOLOCAL=1, UCX_TLS=tcp,self
 (one node)     btl_tcp_if_include lo
==============  =====================  ======================================

The launcher is ``$HUSHMON_MPIRUN`` (a name on PATH or a path), else the
``mpirun`` on PATH; the programs it starts must be built against the same
MPI (``$HUSHMON_BIN``, e.g. ``build-mpich/bin`` for MPICH). Each C program
stops with one line when another MPI's launcher runs it, and
:func:`check_process_count` says so from a program's JSON.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hushmon.errors import HushmonError
from hushmon.paths import build_bin_dir

LauncherKind = Literal["openmpi", "hydra", "other"]

# Environment that makes MPICH (ch4 with UCX, Debian's build) move messages
# between ranks of one node over TCP, as Open MPI's --mca btl tcp,self does.
_HYDRA_TCP_ENV = {"MPIR_CVAR_NOLOCAL": "1", "UCX_TLS": "tcp,self"}


@dataclass(frozen=True)
class Launcher:
    path: str
    kind: LauncherKind
    version: str  # first line of its --version, for messages

    def describe(self) -> str:
        return f"{self.path} ({self.version})" if self.version else self.path


def mpirun_path() -> str:
    name = os.environ.get("HUSHMON_MPIRUN") or "mpirun"
    found = shutil.which(name)
    if found is None:
        how = "set by $HUSHMON_MPIRUN " if os.environ.get("HUSHMON_MPIRUN") else ""
        raise HushmonError(
            f"{name} {how}not found: install Open MPI or MPICH (scripts/install-deps.sh)"
        )
    return found


def classify(version_text: str) -> LauncherKind:
    """Which launcher printed this ``--version`` text."""
    if "Open MPI" in version_text or "OpenRTE" in version_text:
        return "openmpi"
    if "HYDRA" in version_text or "Intel(R) MPI" in version_text:
        return "hydra"
    return "other"


@functools.cache
def _probe(path: str) -> tuple[LauncherKind, str]:
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "other", ""
    text = out.stdout + out.stderr
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    kind = classify(text)
    if kind == "hydra" and lines and lines[0].startswith("HYDRA"):
        # MPICH's hydra: "HYDRA build details:", then "Version: 4.0.2" among others.
        numbers = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Version:")]
        return kind, " ".join(["hydra", *numbers[:1]])
    return kind, lines[0] if lines else ""


def launcher(path: str | None = None) -> Launcher:
    """The launcher at ``path`` (default: :func:`mpirun_path`), probed once."""
    found = path or mpirun_path()
    kind, version = _probe(found)
    return Launcher(found, kind, version)


def mpirun_command(
    nprocs: int,
    program: Sequence[str | Path],
    *,
    oversubscribe: bool | None = None,
    env: Mapping[str, str] | None = None,
    hosts: Sequence[str] = (),
    tcp: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """The full launcher command line for ``nprocs`` ranks of ``program``.

    Open MPI refuses to run as root and to place more ranks than cores unless
    told; both are normal on a test machine, so they are allowed here, and
    only here (``oversubscribe`` defaults to "when nprocs exceeds the cores";
    hydra does both by default). ``env`` is set in every rank, on every host;
    ``hosts`` restricts the ranks to those hosts; ``tcp`` sends messages
    between ranks of one node over TCP (loopback), where a network sensor
    sees them, instead of shared memory. ``extra`` goes before the program
    as given (launcher-specific).
    """
    if nprocs < 1:
        raise HushmonError(f"process count must be at least 1, got {nprocs}")
    run = launcher()
    cmd = [run.path]
    env = dict(env or {})
    if run.kind == "openmpi":
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        if oversubscribe is None:
            oversubscribe = nprocs > (os.cpu_count() or 1)
        if oversubscribe:
            cmd.append("--oversubscribe")
        if tcp:
            cmd += ["--mca", "btl", "tcp,self"]
            if _one_node(hosts):
                # Left to itself Open MPI's TCP transport offers every
                # interface up at start (a container bridge, a test bed's
                # veth) and dies with "bind ... failed" when one goes away
                # mid-run; between ranks of one node loopback is the path.
                cmd += ["--mca", "btl_tcp_if_include", "lo"]
        for name, value in env.items():
            cmd += ["-x", f"{name}={value}"]
        if hosts:
            cmd += ["--host", ",".join(hosts)]
    elif run.kind == "hydra":
        if tcp:
            env = {**_HYDRA_TCP_ENV, **env}
        for name, value in env.items():
            cmd += ["-genv", name, value]
        if hosts:
            cmd += ["-hosts", ",".join(hosts)]
    elif env or hosts:
        raise HushmonError(
            f"{run.describe()}: not Open MPI's mpirun nor MPICH's mpiexec, so hushmon cannot "
            "pass it environment or hosts; set HUSHMON_MPIRUN to one of those"
        )
    cmd += ["-np", str(nprocs), *extra]
    cmd += [str(p) for p in program]
    return cmd


def _one_node(hosts: Sequence[str]) -> bool:
    """Whether ``hosts`` (``name[:slots]``) names only this machine."""
    here = {"localhost", "127.0.0.1", socket.gethostname()}
    return all(host.split(":", 1)[0] in here for host in hosts)


def check_process_count(program: str, asked: int, got: int | None) -> None:
    """Raises when a program's own report counts other than ``asked`` processes.

    ``got`` 1 for ``asked`` > 1 is the mark of a launcher of one MPI starting
    a program built against another: each process runs alone as rank 0 of 1.
    """
    if got is None or got == asked:
        return
    run = launcher()
    said = f"{program} reports {got} process(es) but {run.path} was asked for {asked}"
    if got != 1:
        raise HushmonError(said)
    raise HushmonError(
        f"{said}: the programs in {build_bin_dir()} are built against another MPI than "
        f"{run.version or 'this launcher'}; set HUSHMON_BIN and HUSHMON_MPIRUN to a matching "
        "pair (e.g. build-mpich/bin and mpiexec.mpich)"
    )


# Open MPI 4 on a loaded machine: a rank's PMIx client now and then fails to
# reach its mpirun ("OPAL ERROR: Unreachable" in MPI_Init), and mpirun may then
# wait for the other ranks until it is killed. The launch failed, not the program.
MPI_INIT_FAILED_MARKS = ("OPAL ERROR", "error occurred in MPI_Init")


def mpi_init_failure(output: str) -> str | None:
    """The first line of a launch's output that says a rank failed in
    MPI_Init, or None."""
    for line in output.splitlines():
        if any(mark in line for mark in MPI_INIT_FAILED_MARKS):
            return line.strip()
    return None
