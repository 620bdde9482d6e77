"""Bringing a bed up and down as one operation: each step is recorded as it
is made, a failed `up` removes everything it made, and `down` finds every
piece by name even when the state file is lost (after a crash)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hushmon.agentclient import AgentError
from hushmon.datadir import DataDir
from hushmon.errors import HushmonError
from hushmon.paths import build_bin_dir
from hushmon.testbed import (
    accounting,
    agents,
    cgroups,
    ibsim,
    launcher,
    network,
    node_ns,
    rackcount,
    slurm,
    system,
    transport,
)
from hushmon.testbed.jobcgroups import enable_delay_accounting, restore_delay_accounting
from hushmon.testbed.spec import BedSpec, node_cpus
from hushmon.testbed.state import STATE_DIR, Bed, load

STOP_WAIT_S = 8.0
Say = Callable[[str], None]


def _quiet(_message: str) -> None:
    pass


def up(spec: BedSpec, data_root: Path, say: Say = _quiet, root: Path = STATE_DIR) -> Bed:
    system.require_root("hushmon testbed up")
    for name, package in (
        ("ip", "iproute2"),
        ("tc", "iproute2"),
        ("nsenter", "util-linux"),
        ("unshare", "util-linux"),
    ):
        system.tool(name, package)
    cpus = os.cpu_count() or 1
    spec.check(cpus, system.mem_available_bytes())
    existing = load(root) if (root / "state.json").exists() else None
    if existing is not None and all(system.pid_alive(p) for p in existing.daemons.values()):
        raise HushmonError(
            f"a bed of {existing.spec.nodes} nodes is already up: "
            "'hushmon testbed down' first (or 'hushmon testbed status')"
        )
    if existing is not None or network.leftovers() or cgroups.find_bases():
        say("removing what is left of an earlier bed")
        down(say=_quiet, root=root)
    if spec.link_latency_us and not network.netem_available():
        raise HushmonError(
            "--link-latency needs the kernel's sch_netem module, which this kernel lacks: "
            "leave --link-latency at 0"
        )
    if spec.slurm:
        for name in ("slurmctld", "slurmd", "sinfo", "munged"):
            system.tool(name, "slurm-wlm and munge (scripts/install-deps.sh)")
        if spec.accounting:
            accounting.check_programs()
    if spec.transport == "nats":
        transport.check_programs()
    data_root = data_root.resolve()
    for private in node_ns.PRIVATE_DIRS:
        if data_root == private or private in data_root.parents:
            raise HushmonError(
                f"--data-dir {data_root}: every node has its own {private}, so the nodes' "
                "agents could not write there; use a folder outside it (e.g. /var/tmp/...)"
            )
    closed = node_ns.closed_to_others(build_bin_dir().resolve())
    if closed is not None:
        say(
            f"note: {closed} is closed to other users, so jobs of users other than root cannot "
            f"start the programs in {build_bin_dir()}: use a checkout they can reach "
            "(e.g. under /opt or /srv) for them"
        )
    bed = Bed(spec, data_root, cgroups.detect(), root=root)
    try:
        _build(bed, say)
    except BaseException:
        say("bringing the bed up failed: removing what was made")
        try:
            down(say=_quiet, root=root)
        except HushmonError as exc:
            say(f"cleanup after the failure: {exc}")
        raise
    return bed


def _build(bed: Bed, say: Say) -> None:
    spec = bed.spec
    # The lake of a NATS bed and the embedded file of a spool bed's runs.
    stores = (bed.store, DataDir(bed.data_root).database)
    first_job_id = slurm.first_job_id(*stores) if spec.slurm else 1
    bed.root.mkdir(parents=True, exist_ok=True)
    bed.logs.mkdir(parents=True, exist_ok=True)
    bed.save()  # from here on, `down` knows what to look for
    if spec.slurm and spec.accounting:
        accounting.begin(bed)  # MariaDB comes up while the network and agents are made
        bed.save()
    say(
        f"network: {spec.nodes} nodes in {spec.racks} racks, links "
        f"{spec.link_bits_per_s / 1e6:g} Mbit/s, uplinks {spec.uplink_bits_per_s / 1e6:g} Mbit/s"
    )
    network.build(spec)
    node_ns.prepare(bed)
    for node in bed.nodes():
        node_ns.create(bed, node.name, node.netns)
    cpus = os.cpu_count() or 1
    say(f"cgroups (v{bed.cgroups.version}): one per node")
    cgroups.create(
        bed.cgroups, {n.name: node_cpus(spec, n, cpus) for n in bed.nodes()}, spec.node_memory_bytes
    )
    launcher.write_scripts(bed)
    launcher.add_hosts(bed)
    if enable_delay_accounting(bed):
        say("delay accounting on (kernel.task_delayacct = 1 until down): jobs' I/O wait")
    if spec.transport == "nats":
        say(
            f"nats: a hub of 3 servers on the core, a leaf per rack "
            f"(JetStream files in {bed.nats_store})"
        )
        network.build_transport(spec)
        transport.start_servers(bed, say)
        bed.save()
    if spec.agents:
        say("ib: InfiniBand-like counters per node, simulated from its shaped link")
        ibsim.start(bed)
        bed.save()
        say(f"agents: one per node, spool {bed.spool_root}/<node>/")
        agents.start(bed)
        bed.save()
        if spec.racks > 1:  # what crossed between racks, measured (testbed/rackcount.py)
            say(rackcount.start(bed))
            bed.save()
    if spec.transport == "nats":
        say(f"nats: 2 reducers per rack, the top reducer, hushmon collect into {bed.store}")
        transport.start_consumers(bed)
        bed.save()
    if spec.slurm:
        say("slurm: munge, slurmctld on the head, slurmd on every node")
        slurm.start_munge(bed)
        bed.slurm_conf = slurm.write_conf(bed, first_job_id)
        bed.save()
        slurm.link_system_conf(bed)
        if spec.accounting:
            say("slurm: MariaDB and slurmdbd (accounting: sacct)")
            accounting.start(bed)
        slurm.start(bed)
    bed.save()


def _bed_processes(root: Path) -> list[int]:
    """Processes started for a bed, found by the state directory in their
    command line (daemons are started with paths under it)."""
    mine = os.getpid()
    key = str(root).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == mine:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if key in cmdline:
            found.append(int(entry.name))
    return found


def _netns_processes() -> list[int]:
    pids = []
    for ns in network.bed_namespaces():
        out = system.ip("netns", "pids", ns, what=f"processes in {ns}", check=False)
        pids += [int(p) for p in out.split() if p.isdigit()]
    return pids


def down(say: Say = _quiet, root: Path = STATE_DIR) -> list[str]:
    """Removes every piece of a bed; returns what it removed."""
    system.require_root("hushmon testbed down")
    removed: list[str] = []
    try:
        bed = load(root)
    except HushmonError:
        bed = None
    daemons = list(bed.daemons.values()) if bed else []
    # Recorded daemons may have died with the session that started them.
    found = daemons + _bed_processes(root) + _netns_processes() + accounting.leftover_pids(root)
    pids = sorted(p for p in set(found) if system.pid_alive(p))
    if pids:
        system.stop_processes(pids, STOP_WAIT_S)
        removed.append(f"{len(pids)} process(es)")
    bases = set(cgroups.find_bases())
    if bed is not None:
        bases |= set(bed.cgroups.bases.values())
    for base in sorted(bases):
        removed += cgroups.destroy_base(base)
    removed += network.destroy()
    node_ns.destroy(root)
    if launcher.remove_hosts():
        removed.append("/etc/hosts lines")
    if slurm.unlink_system_conf(root):
        removed.append(str(slurm.SYSTEM_CONF))
    if restore_delay_accounting(root):
        removed.append("kernel.task_delayacct = 1 (the value before up restored)")
    if root.exists():
        _remove_tree(root)
        removed.append(str(root))
    for item in removed:
        say(f"removed {item}")
    return removed


def _remove_tree(path: Path) -> None:
    for child in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        try:
            if child.is_dir() and not child.is_symlink():
                child.rmdir()
            else:
                child.unlink()
        except OSError as exc:
            raise HushmonError(f"cannot remove {child}: {exc.strerror}") from exc
    path.rmdir()


@dataclass
class Status:
    up: bool
    bed: Bed | None
    daemons: dict[str, bool] = field(default_factory=dict)
    agents: dict[str, str] = field(default_factory=dict)
    slurm_nodes: dict[str, str] = field(default_factory=dict)
    leftovers: list[str] = field(default_factory=list)


def status(root: Path = STATE_DIR) -> Status:
    bed = load(root)
    leftovers = network.leftovers() + [f"cgroup {b}" for b in cgroups.find_bases()]
    if launcher.has_hosts():
        leftovers.append("/etc/hosts lines")
    if bed is None:
        return Status(False, None, leftovers=leftovers)
    st = Status(True, bed, leftovers=[])
    st.daemons = {name: system.pid_alive(pid) for name, pid in bed.daemons.items()}
    for node in bed.nodes():
        if bed.spec.agents:
            try:
                s = agents.client(bed, node.name).status()
                st.agents[node.name] = f"samples={s.get('samples', '?')} jobs={s.get('jobs', '-')}"
            except AgentError as exc:
                st.agents[node.name] = f"not answering ({exc})"
    if bed.spec.slurm and bed.slurm_conf:
        st.slurm_nodes = slurm.node_states(bed)
    st.up = all(st.daemons.values())
    return st
