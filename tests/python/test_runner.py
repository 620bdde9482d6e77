"""hushmon.runner: which launcher $HUSHMON_MPIRUN (or mpirun) is, the command
line each kind gets, and the process-count check. Stand-in launchers print
the real launchers' --version texts; the real ones run in
tests/mpi/test_launchers.py."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hushmon.errors import HushmonError
from hushmon.runner import check_process_count, classify, launcher, mpirun_command

OPEN_MPI_4 = "mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
OPEN_MPI_5 = "mpirun (Open MPI) 5.0.3\n\nReport bugs to https://www.open-mpi.org/community/help/\n"
MPICH = (
    "HYDRA build details:\n"
    "    Version:                                 4.0.2\n"
    "    Release Date:                            Thu Apr  7 12:34:45 CDT 2022\n"
)
INTEL = "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\n"
PALS = "mpiexec version 1.2.12\n"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (OPEN_MPI_4, "openmpi"),
        (OPEN_MPI_5, "openmpi"),
        (MPICH, "hydra"),
        (INTEL, "hydra"),
        (PALS, "other"),
        ("", "other"),
    ],
)
def test_classify(text: str, kind: str) -> None:
    assert classify(text) == kind


def fake_launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version_text: str) -> str:
    """A launcher named by $HUSHMON_MPIRUN that prints ``version_text``."""
    path = tmp_path / f"mpirun-{len(list(tmp_path.iterdir()))}"
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{version_text}EOF\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("HUSHMON_MPIRUN", str(path))
    return str(path)


def test_hydra_gets_no_open_mpi_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = fake_launcher(tmp_path, monkeypatch, MPICH)
    run = launcher()
    assert (run.path, run.kind, run.version) == (path, "hydra", "hydra 4.0.2")
    many = (os.cpu_count() or 1) * 4  # hydra oversubscribes, and runs as root, unasked
    assert mpirun_command(many, ["prog", "--x"]) == [path, "-np", str(many), "prog", "--x"]
    assert mpirun_command(
        2, [Path("/b/prog")], env={"A": "1 2"}, hosts=["n1", "n2:4"], tcp=True, extra=["-v"]
    ) == [
        path,
        "-genv", "MPIR_CVAR_NOLOCAL", "1",
        "-genv", "UCX_TLS", "tcp,self",
        "-genv", "A", "1 2",
        "-hosts", "n1,n2:4",
        "-np", "2", "-v", "/b/prog",
    ]  # fmt: skip


def test_open_mpi_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = fake_launcher(tmp_path, monkeypatch, OPEN_MPI_5)
    assert launcher().version == "mpirun (Open MPI) 5.0.3"
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    many = (os.cpu_count() or 1) + 1
    assert mpirun_command(many, ["prog"]) == [
        path, *root, "--oversubscribe", "-np", str(many), "prog"
    ]  # fmt: skip
    assert mpirun_command(
        1, ["prog"], env={"A": "1"}, hosts=["n1", "n2"], tcp=True, oversubscribe=False
    ) == [
        path, *root, "--mca", "btl", "tcp,self", "-x", "A=1", "--host", "n1,n2",
        "-np", "1", "prog",
    ]  # fmt: skip
    # Ranks of one node talk over loopback only: an interface that comes and
    # goes during the run (a test bed's veth) cannot break them.
    one_node = ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"]
    assert mpirun_command(2, ["prog"], tcp=True) == [path, *root, *one_node, "-np", "2", "prog"]
    assert mpirun_command(2, ["prog"], hosts=["localhost:2"], tcp=True) == [
        path, *root, *one_node, "--host", "localhost:2", "-np", "2", "prog"
    ]  # fmt: skip


def test_unknown_launcher_gets_plain_np_and_no_guesses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = fake_launcher(tmp_path, monkeypatch, PALS)
    assert mpirun_command(3, ["prog"], tcp=True) == [path, "-np", "3", "prog"]
    with pytest.raises(HushmonError, match="cannot pass it environment or hosts"):
        mpirun_command(3, ["prog"], env={"A": "1"})


def test_missing_launcher_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUSHMON_MPIRUN", str(tmp_path / "mpiexec.none"))
    with pytest.raises(HushmonError, match=r"mpiexec\.none set by \$HUSHMON_MPIRUN not found"):
        mpirun_command(2, ["prog"])


def test_process_count_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = fake_launcher(tmp_path, monkeypatch, MPICH)
    monkeypatch.setenv("HUSHMON_BIN", "/opt/ompi-build/bin")
    check_process_count("hushmon-bench", 2, 2)
    check_process_count("hushmon-bench", 2, None)  # the program did not say
    with pytest.raises(HushmonError) as singletons:
        check_process_count("hushmon-bench", 4, 1)
    assert str(singletons.value) == (
        f"hushmon-bench reports 1 process(es) but {path} was asked for 4: the programs in "
        "/opt/ompi-build/bin are built against another MPI than hydra 4.0.2; set HUSHMON_BIN "
        "and HUSHMON_MPIRUN to a matching pair (e.g. build-mpich/bin and mpiexec.mpich)"
    )
    with pytest.raises(HushmonError, match=r"reports 3 process\(es\) but .* asked for 2$"):
        check_process_count("hushmon-detect", 2, 3)
