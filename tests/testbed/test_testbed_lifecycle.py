"""Up and down as a whole: `down` leaves nothing behind (also after a crash
lost the state file), a bed whose Slurm, slurmdbd or MariaDB cannot start
is refused in one line with nothing half-built left, and bad requests fail
before anything is made."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from bedlib import DATA_PARENT, bed_lock, bed_unavailable, hushmon

from hushmon.testbed import cgroups, dbtemplate, launcher, network, node_ns
from hushmon.testbed.dbdaemons import DBD_PORT
from hushmon.testbed.slurm import CTLD_PORT, SYSTEM_CONF
from hushmon.testbed.state import STATE_DIR

pytestmark = [pytest.mark.testbed, pytest.mark.slow]


@pytest.fixture
def data() -> Iterator[Path]:
    reason = bed_unavailable()
    if reason:
        pytest.skip(reason)
    path = DATA_PARENT / f"hushmon-test-bed-{uuid.uuid4().hex[:8]}"
    with bed_lock():  # each test brings a bed up and down
        yield path
        hushmon("testbed", "down")
        shutil.rmtree(path, ignore_errors=True)


def leftovers() -> list[str]:
    """Everything a bed makes, looked up on the machine itself."""
    found = network.leftovers() + [f"cgroup {b}" for b in cgroups.find_bases()]
    qdiscs = subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True).stdout
    found += [f"qdisc {line}" for line in qdiscs.splitlines() if "hmbed" in line]
    if launcher.has_hosts():
        found.append("/etc/hosts block")
    if SYSTEM_CONF.is_symlink() and str(os.readlink(SYSTEM_CONF)).startswith(str(STATE_DIR)):
        found.append(str(SYSTEM_CONF))
    if STATE_DIR.exists():
        found.append(str(STATE_DIR))
    # the nodes' mount point for their agent's folder (an agent's own folder is not empty)
    if node_ns.AGENT_RUN_DIR.is_dir() and not any(node_ns.AGENT_RUN_DIR.iterdir()):
        found.append(str(node_ns.AGENT_RUN_DIR))
    key = str(STATE_DIR).encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if key in (entry / "cmdline").read_bytes():
                    found.append(f"process {entry.name}")
                # slurmdbd's command line names nothing of the bed; its SLURM_CONF does
                elif (entry / "comm").read_text().strip() == "slurmdbd" and key in (
                    entry / "environ"
                ).read_bytes():
                    found.append(f"slurmdbd {entry.name}")
            except OSError:
                continue
    return found


def test_down_leaves_nothing_behind(data: Path) -> None:
    up = hushmon("testbed", "up", "--nodes", "2", "--racks", "2", "--data-dir", str(data))
    assert up.returncode == 0, up.stderr
    assert leftovers(), "the bed should be visible while it is up"
    down = hushmon("testbed", "down")
    assert down.returncode == 0, down.stderr
    assert leftovers() == []
    # The data the agents gathered is the user's: it stays.
    assert any((data / "spool").rglob("*.lp*"))


def test_down_after_a_crash_lost_the_state_file(data: Path) -> None:
    up = hushmon("testbed", "up", "--nodes", "2", "--racks", "1", "--data-dir", str(data))
    assert up.returncode == 0, up.stderr
    (STATE_DIR / "state.json").unlink()
    st = hushmon("testbed", "status")
    assert st.returncode == 1 and "left over" in st.stdout
    assert hushmon("testbed", "down").returncode == 0
    assert leftovers() == []


def test_a_second_up_on_a_stale_bed_cleans_it_first(data: Path) -> None:
    up = hushmon(
        "testbed", "up", "--nodes", "2", "--racks", "1", "--no-slurm", "--data-dir", str(data)
    )
    assert up.returncode == 0, up.stderr
    (STATE_DIR / "state.json").unlink()  # crashed: daemons and namespaces remain
    again = hushmon(
        "testbed", "up", "--nodes", "3", "--racks", "1", "--no-slurm", "--data-dir", str(data)
    )
    assert again.returncode == 0, again.stderr
    assert "removing what is left" in again.stderr
    assert sorted(n for n in network.bed_namespaces() if n != "hm-fabric") == [
        "hm-n1",
        "hm-n2",
        "hm-n3",
    ]


def test_slurm_that_cannot_start_is_one_line_and_nothing_is_left(data: Path) -> None:
    # Something else holds the controller's port: slurmctld cannot start.
    with socket.socket() as blocker:
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        blocker.bind(("0.0.0.0", CTLD_PORT))
        blocker.listen(1)
        up = hushmon(
            "testbed", "up", "--nodes", "2", "--racks", "1", "--data-dir", str(data), timeout=120
        )
    assert up.returncode == 2
    message = up.stderr.strip().splitlines()[-1]
    assert message.startswith("hushmon: ") and "slurmctld" in message
    assert leftovers() == []


def test_slurmdbd_that_cannot_start_is_one_line_and_nothing_is_left(data: Path) -> None:
    # Something else holds slurmdbd's port: MariaDB starts, slurmdbd cannot.
    with socket.socket() as blocker:
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        blocker.bind(("0.0.0.0", DBD_PORT))
        blocker.listen(1)
        up = hushmon(
            "testbed", "up", "--nodes", "1", "--racks", "1", "--no-agents", "--data-dir",
            str(data), timeout=120,
        )  # fmt: skip
    assert up.returncode == 2
    message = up.stderr.strip().splitlines()[-1]
    assert message.startswith("hushmon: slurmdbd exited at start:"), message
    assert "Address already in use" in message or "bind" in message.lower(), message
    assert leftovers() == []


def test_mariadb_that_cannot_start_is_one_line_and_nothing_is_left(
    data: Path, tmp_path: Path
) -> None:
    # A damaged database template (its InnoDB system file is garbage): mariadbd exits.
    cache = tmp_path / "cache"
    damaged = cache / f"accounting-{dbtemplate.template_key()}"
    (damaged / "mysql").mkdir(parents=True)
    (damaged / "ibdata1").write_bytes(b"not a tablespace" * 4096)
    env = {**os.environ, "HUSHMON_TESTBED_CACHE": str(cache)}
    up = hushmon(
        "testbed", "up", "--nodes", "1", "--racks", "1", "--no-agents", "--data-dir",
        str(data), timeout=120, env=env,
    )  # fmt: skip
    assert up.returncode == 2
    message = up.stderr.strip().splitlines()[-1]
    assert message.startswith("hushmon: MariaDB exited at start:"), message
    assert leftovers() == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--nodes", "500"], "at most 64"),
        (["--nodes", "2", "--racks", "3"], "one per node"),
        (["--link-rate", "fast"], "not valid"),
        (["--data-dir", "/tmp/hushmon-bed"], "outside"),
    ],
)
def test_bad_requests_fail_in_one_line_before_anything_is_made(
    data: Path, args: list[str], needle: str
) -> None:
    full = ["testbed", "up", *args]
    if "--data-dir" not in args:
        full += ["--data-dir", str(data)]
    out = hushmon(*full)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and needle in out.stderr, out.stderr
    assert leftovers() == []
