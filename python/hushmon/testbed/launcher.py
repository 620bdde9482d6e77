"""Entering a node: the scripts that put a process into a node's network and
UTS namespaces and its cgroups, the ssh stand-in MPI launchers use, the
bed's lines in /etc/hosts, and the environment that points Open MPI and
MPICH at the nodes' own addresses.

Scripts, not Python: Open MPI and hydra start one per node per job, and a
shell starts in a millisecond where Python takes a tenth of a second.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.testbed.spec import HEAD_ADDR, SUBNET
from hushmon.testbed.state import Bed

HOSTS_FILE = Path("/etc/hosts")
HOSTS_BEGIN = "# hushmon-testbed begin (removed by 'hushmon testbed down')"
HOSTS_END = "# hushmon-testbed end"
HEAD_NAME = "head"


def write_script(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.chmod(0o755)
    os.replace(tmp, path)


def write_scripts(bed: Bed) -> None:
    for node in bed.nodes():
        joins = " ".join(
            shlex.quote(str(d / "cgroup.procs")) for d in bed.cgroups.node_dirs(node.name)
        )
        write_script(
            bed.node_dir(node.name) / "enter",
            f"""#!/bin/sh
# Runs a command on node {node.name}: its cgroups, then its network, host name, /tmp.
for f in {joins}; do
    echo $$ > "$f" || {{ echo "node {node.name}: cannot join $f" >&2; exit 126; }}
done
exec nsenter --net=/run/netns/{node.netns} --uts={shlex.quote(str(bed.uts_file(node.name)))} \\
    --mount={shlex.quote(str(bed.mnt_file(node.name)))} -- "$@"
""",
        )
    nodes_dir = shlex.quote(str(bed.root / "nodes"))
    write_script(
        bed.node_exec(),
        f"""#!/bin/sh
# node-exec NODE COMMAND [ARGS...]: run a command on a node of the test bed.
if [ $# -lt 2 ]; then echo "usage: node-exec NODE COMMAND [ARGS...]" >&2; exit 2; fi
node=$1; shift
if [ ! -x {nodes_dir}/"$node"/enter ]; then
    echo "node-exec: no node '$node' in the test bed" >&2; exit 255
fi
exec {nodes_dir}/"$node"/enter "$@"
""",
    )
    # ssh's contract, which Open MPI's rsh launcher and hydra's ssh launcher
    # rely on: options first, then the host, then words joined into one
    # command line for the remote shell.
    write_script(
        bed.rsh(),
        f"""#!/bin/sh
# rsh [SSH-OPTIONS] NODE COMMAND...: ssh for the test bed's nodes.
while [ $# -gt 0 ]; do
    case "$1" in
        -[1246AaCfGgKkMNnqsTtVvXxYy]*) shift ;;
        -*) shift; shift ;;
        *) break ;;
    esac
done
if [ $# -lt 1 ]; then echo "rsh: no node given" >&2; exit 255; fi
node=${{1#*@}}; shift
exec {shlex.quote(str(bed.node_exec()))} "$node" /bin/sh -c "$*"
""",
    )


def hosts_block(bed: Bed) -> str:
    lines = [HOSTS_BEGIN, f"{HEAD_ADDR}\t{HEAD_NAME}"]
    lines += [f"{n.address}\t{n.name}" for n in bed.nodes()]
    lines.append(HOSTS_END)
    return "\n".join(lines) + "\n"


def _strip_block(text: str) -> str:
    out, inside = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith(HOSTS_BEGIN):
            inside = True
        elif inside and line.startswith(HOSTS_END):
            inside = False
        elif not inside:
            out.append(line)
    return "".join(out)


def add_hosts(bed: Bed, path: Path = HOSTS_FILE) -> None:
    """The nodes' names, so mpirun --host n1,n2 and Slurm resolve them."""
    text = _strip_block(path.read_text())
    if text and not text.endswith("\n"):
        text += "\n"
    _replace(path, text + hosts_block(bed))


def remove_hosts(path: Path = HOSTS_FILE) -> bool:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return False
    stripped = _strip_block(text)
    if stripped == text:
        return False
    _replace(path, stripped)
    return True


def has_hosts(path: Path = HOSTS_FILE) -> bool:
    try:
        return HOSTS_BEGIN in path.read_text()
    except OSError:
        return False


def _replace(path: Path, text: str) -> None:
    # /etc/hosts is often a bind mount (containers): it cannot be replaced
    # by a rename, only rewritten in place.
    try:
        with path.open("r+") as f:
            f.seek(0)
            f.write(text)
            f.truncate()
    except OSError as exc:
        raise HushmonError(f"cannot update {path}: {exc.strerror}") from exc


def mpi_env(bed: Bed) -> dict[str, str]:
    """Environment for mpirun on the head (or inside a job): start remote
    daemons through the bed's rsh, and talk over the nodes' own network."""
    rsh = str(bed.rsh())
    return {
        # Open MPI 4/5
        "OMPI_MCA_plm_rsh_agent": rsh,
        "OMPI_MCA_oob_tcp_if_include": SUBNET,
        "OMPI_MCA_btl_tcp_if_include": SUBNET,
        "PRTE_MCA_plm_ssh_agent": rsh,
        "PRTE_MCA_oob_tcp_if_include": SUBNET,
        # MPICH's hydra
        "HYDRA_LAUNCHER": "ssh",
        "HYDRA_LAUNCHER_EXEC": rsh,
    }


def check_scripts(bed: Bed) -> None:
    for path in (bed.node_exec(), bed.rsh()):
        if not os.access(path, os.X_OK):
            raise HushmonError(f"{path} is missing: the bed is damaged, run 'hushmon testbed up'")
