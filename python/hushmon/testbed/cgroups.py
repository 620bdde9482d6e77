"""A cgroup per node, so each node's CPU and memory are its own to limit and
to measure (the agent's node scope reads them).

Two layouts, found from what is mounted:
- cgroup v2 (clusters today): one directory under the unified root,
  ``/sys/fs/cgroup/hushmon-testbed/<node>``, with cpu, cpuset and memory
  enabled for its children. The bed sits at the root because v2 does not
  let a cgroup that holds processes hand controllers to children.
- cgroup v1 (this development machine: v1 controllers and an empty v2
  mount): one directory per controller (cpuset, cpuacct, memory), each
  created below the cgroup the caller itself is in, so a bed built inside
  a container stays inside the container's limits; and, where the v2
  hierarchy is mounted beside them (``/sys/fs/cgroup/unified``, no
  controllers), one there too, under the key "unified".

The "unified" directory of a node is where its Slurm jobs get cgroups of
their own (python/hushmon/testbed/jobcgroups.py): a v2 cgroup always has
cgroup.procs and cpu.stat, which is what the agent's per-job sources read,
and the job's memory stays bounded by its node's limit above it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.testbed import system
from hushmon.testbed.spec import CGROUP_NAME

V1_CONTROLLERS = ("cpuset", "cpuacct", "memory")
UNIFIED = "unified"  # the bases' key of the v2 hierarchy (v2 beds, and v1 beds beside it)
V2_CONTROLLERS = ("cpu", "cpuset", "memory")
KILL_WAIT_S = 5.0


@dataclass(frozen=True)
class Layout:
    version: int  # 1 or 2
    mount: Path  # /sys/fs/cgroup
    bases: dict[str, Path]  # controller (v1) or "unified" (v2) -> the bed's directory

    def node_dirs(self, node: str) -> list[Path]:
        return [base / node for base in self.bases.values()]

    def to_json(self) -> dict[str, object]:
        return {
            "version": self.version,
            "mount": str(self.mount),
            "bases": {k: str(v) for k, v in self.bases.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Layout:
        bases = data.get("bases")
        if not isinstance(bases, dict):
            raise HushmonError("the bed's state file has no cgroup layout")
        return cls(
            int(str(data["version"])),
            Path(str(data["mount"])),
            {str(k): Path(str(v)) for k, v in bases.items()},
        )


def _own_cgroups(proc_self_cgroup: str) -> dict[str, str]:
    """Controller -> path of the calling process ('' key: the v2 path)."""
    out: dict[str, str] = {}
    for line in proc_self_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for ctrl in parts[1].split(",") if parts[1] else [""]:
            out[ctrl] = parts[2]
    return out


def detect(mount: Path = Path("/sys/fs/cgroup"), proc_self_cgroup: str | None = None) -> Layout:
    """Where the bed's cgroups go on this machine."""
    if (mount / "cgroup.controllers").is_file():
        return Layout(2, mount, {"unified": mount / CGROUP_NAME})
    if proc_self_cgroup is None:
        proc_self_cgroup = Path("/proc/self/cgroup").read_text()
    own = _own_cgroups(proc_self_cgroup)
    bases: dict[str, Path] = {}
    for ctrl in V1_CONTROLLERS:
        root = _v1_mount(mount, ctrl)
        if root is None:
            raise HushmonError(
                f"no cgroup v1 '{ctrl}' controller under {mount} and no cgroup v2 mount: "
                "the bed cannot give nodes their own CPU and memory"
            )
        # cpuset's parent must have CPUs; starting at its root keeps that simple.
        parent = "/" if ctrl == "cpuset" else own.get(ctrl, "/")
        bases[ctrl] = root / parent.lstrip("/") / CGROUP_NAME
    unified = mount / UNIFIED
    if (unified / "cgroup.controllers").is_file():
        bases[UNIFIED] = unified / own.get("", "/").lstrip("/") / CGROUP_NAME
    return Layout(1, mount, bases)


def jobs_parent(layout: Layout, node: str) -> Path | None:
    """Where the node's jobs get cgroups: its directory in the v2 hierarchy
    (None where this machine mounts none)."""
    base = layout.bases.get(UNIFIED)
    return None if base is None else base / node


def _v1_mount(mount: Path, ctrl: str) -> Path | None:
    for candidate in (mount / ctrl, mount / f"cpu,{ctrl}", mount / f"{ctrl},cpu"):
        if (candidate / "cgroup.procs").is_file():
            return candidate
    return None


def _write(path: Path, value: str, what: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise HushmonError(f"{what}: writing '{value}' to {path}: {exc.strerror}") from exc


def _mkdir(path: Path, what: str) -> None:
    try:
        path.mkdir(exist_ok=True)
    except OSError as exc:
        raise HushmonError(f"{what}: cannot create {path}: {exc.strerror}") from exc


def memory_limit_file(layout: Layout, node: str) -> Path | None:
    """The file of a node's memory limit (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``); None where the bed has no memory controller."""
    if layout.version == 2:
        base = layout.bases.get(UNIFIED)
        return None if base is None else base / node / "memory.max"
    base = layout.bases.get("memory")
    return None if base is None else base / node / "memory.limit_in_bytes"


def create(layout: Layout, nodes: dict[str, list[int]], memory_bytes: int) -> None:
    """A cgroup per node: ``nodes`` maps a node to the CPUs it may use."""
    if layout.version == 2:
        base = layout.bases["unified"]
        want = " ".join(f"+{c}" for c in V2_CONTROLLERS)
        _write(layout.mount / "cgroup.subtree_control", want, "enabling cgroup controllers")
        _mkdir(base, "the bed's cgroup")
        _write(base / "cgroup.subtree_control", want, "enabling cgroup controllers")
        for node, cpus in nodes.items():
            d = base / node
            _mkdir(d, f"cgroup of {node}")
            _write(d / "cpuset.cpus", _cpulist(cpus), f"CPUs of {node}")
            limit = memory_limit_file(layout, node)
            if memory_bytes and limit is not None:
                _write(limit, str(memory_bytes), f"memory limit of {node}")
        return
    for ctrl, base in layout.bases.items():
        _mkdir(base, f"the bed's {ctrl} cgroup")
        if ctrl == "cpuset":
            parent = base.parent
            _write(base / "cpuset.cpus", (parent / "cpuset.cpus").read_text().strip(), "cpuset")
            _write(base / "cpuset.mems", (parent / "cpuset.mems").read_text().strip(), "cpuset")
        for node, cpus in nodes.items():
            d = base / node
            _mkdir(d, f"{ctrl} cgroup of {node}")
            if ctrl == "cpuset":
                _write(d / "cpuset.cpus", _cpulist(cpus), f"CPUs of {node}")
                _write(d / "cpuset.mems", (base / "cpuset.mems").read_text().strip(), "cpuset")
            limit = memory_limit_file(layout, node)
            if ctrl == "memory" and memory_bytes and limit is not None:
                _write(limit, str(memory_bytes), f"memory limit of {node}")


def _cpulist(cpus: list[int]) -> str:
    return ",".join(str(c) for c in cpus)


def procs(directory: Path) -> list[int]:
    try:
        text = (directory / "cgroup.procs").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _tree(base: Path) -> list[Path]:
    """A directory and its sub-cgroups, deepest first (the order rmdir needs)."""
    if not base.is_dir():
        return []
    found = [Path(root) for root, _dirs, _files in os.walk(base)]
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def destroy_base(base: Path) -> list[str]:
    """Kills what still runs in a bed's cgroups, then removes them."""
    tree = _tree(base)
    if not tree:
        return []
    for _attempt in range(3):
        pids = [pid for d in tree for pid in procs(d)]
        if not pids:
            break
        system.stop_processes(pids, KILL_WAIT_S)
    else:
        raise HushmonError(f"processes {pids[:5]} in {base} do not die")
    for d in tree:
        try:
            d.rmdir()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise HushmonError(f"cannot remove cgroup {d}: {exc.strerror}") from exc
    return [f"cgroup {base}"]


def find_bases(mount: Path = Path("/sys/fs/cgroup"), depth: int = 4) -> list[Path]:
    """Every bed cgroup directory under the cgroup mounts (also after a crash,
    when the state file that named them is gone)."""
    found: list[Path] = []
    if not mount.is_dir():
        return found
    base_depth = len(mount.parts)
    for root, dirs, _files in os.walk(mount):
        here = Path(root)
        if here.name == CGROUP_NAME:
            found.append(here)
            dirs[:] = []
            continue
        if len(here.parts) - base_depth >= depth:
            dirs[:] = []
    return found
