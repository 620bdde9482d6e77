"""What makes a node a machine of its own besides its network: a host name
(UTS namespace), private /tmp and /dev/shm, and a /sys that shows the
node's own network interfaces (mount namespace).

Private /tmp matters: Slurm's PMIx plugin, Open MPI and MPICH create
per-job folders and shared-memory files under fixed names there, and on a
shared /tmp the nodes' copies of one job would collide ("File exists").

The node's agent sockets appear at /run/hushmon (the node's folder is
bound there), where a cluster node's agent has them: libhushmon's default
/run/hushmon/app.sock and `hushmon ctl`'s /run/hushmon/agent.sock reach the
node's own agent from any program started on it (srun, mpirun), with no
per-node environment.

A checkout under /tmp (or /dev/shm) would vanish behind the node's own
copy, and with it the programs, scripts and Python the node runs ("exited
with code 127"): such a checkout, the built programs and the Python
environment are bound into the node's /tmp at their own paths
(:func:`carried_paths`), as a cluster's shared file system shows them on
every node.

sysfs shows the interfaces of the network namespace that mounted it, so
each node mounts its own (from inside its network namespace), and the
cgroup mounts below /sys are carried over to it.

Namespaces are kept alive by bind-mounting them onto files, as `ip netns`
does. The folder holding those files is itself a private mount, so a new
mount namespace does not carry a copy of its own bind (the kernel refuses
such loops).
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import sys
from pathlib import Path

from hushmon.paths import REPO_ROOT, build_bin_dir
from hushmon.testbed import system
from hushmon.testbed.state import Bed

# Where a node's programs find its agent (libhushmon's and hushmon ctl's default).
AGENT_RUN_DIR = Path("/run/hushmon")
# Folders each node has a private copy of, and that copy's name in the node's folder.
PRIVATE_DIRS = {Path("/tmp"): "tmp", Path("/dev/shm"): "shm"}


def closed_to_others(path: Path) -> Path | None:
    """The first folder on the way to ``path`` that other uids may not
    pass (no x for others: a 0700 home), or None. Jobs run by root on
    the bed do not care; a user's job (srun as that user) cannot start
    programs behind it."""
    for folder in [*reversed(path.parents), path]:
        try:
            if not folder.stat().st_mode & 0o001:
                return folder
        except OSError:
            return folder
    return None


def carried_paths() -> list[Path]:
    """What every node must see at the machine's own path but lives below a
    folder each node has its own copy of: the checkout (scripts, the
    Python package), the built programs, the Python environment."""
    wanted = {REPO_ROOT.resolve(), build_bin_dir().resolve(), Path(sys.prefix).resolve()}
    hidden = {p for p in wanted if any(d in p.parents for d in PRIVATE_DIRS)}
    return sorted(p for p in hidden if not any(q in p.parents for q in hidden))


def _mounted(path: Path) -> bool:
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return False
    target = str(path)
    return any(line.split()[4] == target for line in text.splitlines() if len(line.split()) > 4)


def prepare(bed: Bed) -> None:
    nodes = bed.root / "nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    if not _mounted(nodes):
        system.run(["mount", "--bind", str(nodes), str(nodes)], "private mount for namespaces")
        system.run(["mount", "--make-private", str(nodes)], "private mount for namespaces")


def create(bed: Bed, node: str, netns: str) -> None:
    d = bed.node_dir(node)
    for sub in PRIVATE_DIRS.values():
        (d / sub).mkdir(parents=True, exist_ok=True)
        (d / sub).chmod(0o1777)
    carried = carried_paths()
    holds = [d / f"carry-{i}" for i in range(len(carried))]
    for hold_dir in holds:
        hold_dir.mkdir(exist_ok=True)
    # The mount point: on the machine itself an empty folder (removed by destroy).
    AGENT_RUN_DIR.mkdir(parents=True, exist_ok=True)
    hold = d / "cgroup-hold"
    hold.mkdir(exist_ok=True)
    for f in (bed.uts_file(node), bed.mnt_file(node)):
        f.touch()
    # Held before /tmp is covered, bound again at their own paths after.
    q = shlex.quote
    pairs = [(q(str(p)), q(str(h))) for p, h in zip(carried, holds, strict=True)]
    carry_in = [f"mount --bind {p} {h}" for p, h in pairs]
    carry_out = [f"mkdir -p {p} && mount --bind {h} {p} && umount -l {h}" for p, h in pairs]
    script = " && ".join(
        [
            f"hostname {node}",
            *carry_in,
            *(f"mount --bind {d / sub} {private}" for private, sub in PRIVATE_DIRS.items()),
            *carry_out,
            f"mount --bind {d} {AGENT_RUN_DIR}",
            f"mount --rbind /sys/fs/cgroup {hold}",
            "mount -t sysfs sysfs /sys",
            f"mount --rbind {hold} /sys/fs/cgroup",
            f"umount -l {hold}",
        ]
    )
    system.run(
        [
            system.tool("nsenter", "util-linux"),
            f"--net=/run/netns/{netns}",
            system.tool("unshare", "util-linux"),
            f"--uts={bed.uts_file(node)}",
            f"--mount={bed.mnt_file(node)}",
            "--propagation=private",
            "sh",
            "-c",
            script,
        ],
        f"namespaces of {node}",
    )


def destroy(root: Path) -> None:
    nodes = root / "nodes"
    if not nodes.is_dir():
        return
    for f in [*nodes.glob("*/uts"), *nodes.glob("*/mnt")]:
        subprocess.run(["umount", str(f)], capture_output=True, check=False)
    if _mounted(nodes):
        subprocess.run(["umount", str(nodes)], capture_output=True, check=False)
    with contextlib.suppress(OSError):  # only the empty mount point; an agent's folder stays
        AGENT_RUN_DIR.rmdir()
