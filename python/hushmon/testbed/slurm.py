"""A real Slurm on the bed: munge, slurmctld on the head, one slurmd inside
each node (its own name, spool and log), a prolog/epilog that tells each
node's agent which job runs there.

Plugin choices (docs/testbed.md): proctrack/linuxproc and task/none. Every
node of the bed is a process tree on one kernel, and the nodes' cgroups are
the bed's own (the agent's node scope reads them); proctrack/cgroup and
task/cgroup would have every slurmd manage the one cgroup hierarchy of the
machine and fight over it. linuxproc follows a job's processes through
/proc, which is all a bed needs to signal and reap them.

Ports 16817/16818 instead of Slurm's 6817/6818, so a bed never collides
with a real Slurm installed on the same machine.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.paths import REPO_ROOT, build_bin_dir
from hushmon.testbed import accounting, system
from hushmon.testbed.jobcgroups import job_script, task_prolog, write_job_scripts
from hushmon.testbed.launcher import write_script
from hushmon.testbed.spec import CORE_SWITCH, HEAD_ADDR, rack_switch
from hushmon.testbed.state import Bed

CTLD_PORT = 16817
SLURMD_PORT = 16818
START_TIMEOUT_S = 45.0
MUNGE_SOCKET = Path("/run/munge/munge.socket.2")
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
SLURM_SCRIPTS = REPO_ROOT / "c" / "agent" / "slurm"


def slurm_dir(bed: Bed) -> Path:
    return bed.root / "slurm"


def conf_path(bed: Bed) -> Path:
    return slurm_dir(bed) / "slurm.conf"


def _munge_works() -> bool:
    munge, unmunge = shutil.which("munge"), shutil.which("unmunge")
    if munge is None or unmunge is None:
        return False
    try:
        cred = subprocess.run([munge, "-n"], capture_output=True, timeout=5, check=False)
        if cred.returncode != 0:
            return False
        back = subprocess.run(
            [unmunge], input=cred.stdout, capture_output=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return back.returncode == 0


def start_munge(bed: Bed) -> None:
    """munged as its own user, as the Debian service runs it (unless one works already)."""
    if _munge_works():
        return
    munged = system.tool("munged", "munge")
    key = Path("/etc/munge/munge.key")
    if not key.is_file():
        system.run([system.tool("mungekey", "munge"), "--create"], "creating the munge key")
        shutil.chown(key, "munge", "munge")
    MUNGE_SOCKET.parent.mkdir(parents=True, exist_ok=True)
    shutil.chown(MUNGE_SOCKET.parent, "munge", "munge")
    # munged runs as its own user: its log and pid file go to a folder it owns.
    own = bed.root / "munge"
    own.mkdir(parents=True, exist_ok=True)
    shutil.chown(own, "munge", "munge")
    log = own / "munged.log"
    system.run(
        [
            "runuser",
            "-u",
            "munge",
            "--",
            munged,
            "--force",
            f"--log-file={log}",
            f"--pid-file={own / 'munged.pid'}",
        ],
        "starting munged",
    )
    deadline = time.monotonic() + 10
    while not _munge_works():
        if time.monotonic() > deadline:
            raise HushmonError(f"munged started but credentials do not work: see {log}")
        time.sleep(0.1)
    bed.daemons["munged"] = int((own / "munged.pid").read_text().split()[0])


def write_conf(bed: Bed, first_job_id: int = 1) -> Path:
    d = slurm_dir(bed)
    (d / "ctld").mkdir(parents=True, exist_ok=True)
    for node in bed.nodes():
        (d / "spool" / node.name).mkdir(parents=True, exist_ok=True)
    cpus = bed.spec.cpus_per_node or os.cpu_count() or 1
    head = socket.gethostname().split(".")[0]
    lines = [
        "# Written by 'hushmon testbed up'; removed by 'hushmon testbed down'.",
        "ClusterName=hushmon-testbed",
        f"SlurmctldHost={head}({HEAD_ADDR})",
        "SlurmUser=root",
        "AuthType=auth/munge",
        f"SlurmctldPort={CTLD_PORT}",
        f"SlurmdPort={SLURMD_PORT}",
        f"StateSaveLocation={d / 'ctld'}",
        f"SlurmdSpoolDir={d / 'spool' / '%n'}",
        f"SlurmctldPidFile={d / 'slurmctld.pid'}",
        f"SlurmdPidFile={d / 'slurmd-%n.pid'}",
        f"SlurmctldLogFile={bed.logs / 'slurmctld.log'}",
        f"SlurmdLogFile={bed.logs / 'slurmd-%n.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        # The bed's slurmdbd (accounting.py): sacct shows jobs' AdminComment.
        *(
            accounting.slurm_conf_lines()
            if bed.spec.accounting
            else ["AccountingStorageType=accounting_storage/none"]
        ),
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        # Open MPI and MPICH programs started by srun find their peers through PMIx.
        "MpiDefault=pmix",
        "ReturnToService=2",
        # The prolog runs on every node of an allocation when it is granted,
        # not only where a step starts, so every node's agent knows the job.
        "PrologFlags=Alloc",
        f"Prolog={bed.bin / 'slurm-prolog'}",
        f"Epilog={bed.bin / 'slurm-epilog'}",
        # Each task joins its job's own cgroup (testbed/jobcgroups.py).
        f"TaskProlog={task_prolog(bed)}",
        # Finished jobs stay visible an hour, so `hushmon run` can find them.
        "MinJobAge=3600",
        f"FirstJobId={first_job_id}",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "InactiveLimit=0",
        "KillWait=5",
        "SlurmctldDebug=info",
        # The racks, as a site describes its fabric to Slurm (topology.conf);
        # the digest reads the same file to tell rack-local from uplink traffic.
        "TopologyPlugin=topology/tree",
        "SlurmdDebug=info",
    ]
    for node in bed.nodes():
        lines.append(
            f"NodeName={node.name} NodeAddr={node.address} NodeHostname={node.name} "
            f"CPUs={cpus} State=UNKNOWN"
        )
    lines.append(
        "PartitionName=bed Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4"
    )
    path = conf_path(bed)
    path.write_text("\n".join(lines) + "\n")
    (path.parent / "topology.conf").write_text(topology_conf(bed))
    _write_prolog_scripts(bed)
    return path


def first_job_id(*stores: Path) -> int:
    """Where this bed's job numbers start. Slurm numbers from 1 on every new
    bed (its state is on /run); a data folder used again would then hold two
    jobs "1", their samples mixed in one digest. Numbers go on after the
    highest numeric job id the bed's stores hold (the lake a NATS bed's
    collector writes, the embedded file a spool bed's runs ingest into)."""
    return max((_after_newest_job(s) for s in stores), default=1)


def _after_newest_job(store: Path) -> int:
    from hushmon.store.lake import CATALOG_NAME, is_lake

    if not ((store / CATALOG_NAME).is_file() if is_lake(store) else store.exists()):
        return 1
    import duckdb

    from hushmon.store.schema import open_store_readonly

    try:
        con = open_store_readonly(store)
        try:
            row = con.execute("SELECT max(TRY_CAST(job AS BIGINT)) FROM job_activity").fetchone()
        finally:
            con.close()
    except (duckdb.Error, HushmonError) as exc:
        raise HushmonError(
            f"cannot read the job ids in {store} ({str(exc).splitlines()[0]}): "
            "is another program writing it? (job numbers would start at 1 again)"
        ) from exc
    newest = row[0] if row else None
    return 1 if newest is None or newest < 1 else int(newest) + 1


def topology_conf(bed: Bed) -> str:
    """Slurm's tree topology of the bed. LinkSpeed is in Mbit/s (Slurm leaves
    its unit to the site; hushmon reads it so): on a rack switch, the node
    links' rate; on the core switch, the uplinks' rate."""
    spec = bed.spec
    lines = ["# Written by 'hushmon testbed up'. LinkSpeed: Mbit/s."]
    for rack in range(1, spec.racks + 1):
        names = ",".join(n.name for n in bed.spec.rack_nodes(rack))
        lines.append(
            f"SwitchName={rack_switch(rack)} Nodes={names} "
            f"LinkSpeed={spec.link_bits_per_s // 1_000_000}"
        )
    racks = ",".join(rack_switch(r) for r in range(1, spec.racks + 1))
    lines.append(
        f"SwitchName={CORE_SWITCH} Switches={racks} LinkSpeed={spec.uplink_bits_per_s // 1_000_000}"
    )
    return "\n".join(lines) + "\n"


def _write_prolog_scripts(bed: Bed) -> None:
    """The project's prolog/epilog installed as a site installs them (the
    three scripts and hushmon-job.conf naming the agent, in a folder of
    root's), and run by wrappers that tell them where this bed's agents
    listen."""
    installed = bed.bin / "slurm"
    installed.mkdir(parents=True, exist_ok=True)
    for name in ("prolog.sh", "epilog.sh", "hushmon-job.sh"):
        write_script(installed / name, (SLURM_SCRIPTS / name).read_text())
    conf = f"# Written by 'hushmon testbed up'.\nagent={build_bin_dir() / 'hushmon-agent'}\n"
    (installed / "hushmon-job.conf").write_text(conf)
    write_job_scripts(bed)
    for name, target, event in (
        ("slurm-prolog", "prolog.sh", "begin"),
        ("slurm-epilog", "epilog.sh", "end"),
    ):
        write_script(
            bed.bin / name,
            f"""#!/bin/sh
# The test bed's {name}: each node's agent listens in the node's own folder;
# the job's own cgroup is made or removed after (testbed/jobcgroups.py).
export HUSHMON_AGENT_SOCKET="{bed.root / "nodes"}/$SLURMD_NODENAME/agent.sock"
"{installed / target}" "$@"
"{job_script(bed)}" {event}
exit 0
""",
        )


def link_system_conf(bed: Bed) -> bool:
    """/etc/slurm/slurm.conf -> the bed's, when this machine has none of its
    own, so plain `srun` and `sbatch` find the bed (else SLURM_CONF must)."""
    if SYSTEM_CONF.exists() or SYSTEM_CONF.is_symlink():
        return SYSTEM_CONF.resolve() == conf_path(bed).resolve()
    SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
    SYSTEM_CONF.symlink_to(conf_path(bed))
    return True


def unlink_system_conf(root: Path) -> bool:
    if SYSTEM_CONF.is_symlink() and str(os.readlink(SYSTEM_CONF)).startswith(str(root)):
        SYSTEM_CONF.unlink()
        return True
    return False


def env(bed: Bed) -> dict[str, str]:
    return {"SLURM_CONF": str(conf_path(bed))}


def start(bed: Bed) -> None:
    """slurmctld on the head, slurmd in every node; waits until all nodes are idle."""
    slurmctld = system.tool("slurmctld", "slurmctld (slurm-wlm)")
    slurmd = system.tool("slurmd", "slurmd (slurm-wlm)")
    conf = str(conf_path(bed))
    # -D: stay in the foreground, so the pid we hold is the daemon's;
    # -i: ignore state from an earlier bed (-c clears its jobs).
    bed.daemons["slurmctld"] = system.spawn(
        [slurmctld, "-D", "-i", "-c", "-f", conf],
        bed.logs / "slurmctld.out",
        "starting slurmctld",
        env={"SLURM_CONF": conf},
    ).pid
    for node in bed.nodes():
        bed.daemons[f"slurmd@{node.name}"] = system.spawn(
            [str(bed.node_exec()), node.name, slurmd, "-D", "-N", node.name, "-f", conf],
            bed.logs / f"slurmd-{node.name}.out",
            f"starting slurmd on {node.name}",
            env={"SLURM_CONF": conf},
        ).pid
    wait_idle(bed)


def node_states(bed: Bed) -> dict[str, str]:
    sinfo = system.tool("sinfo", "slurm-client")
    out = (
        system.run([sinfo, "-h", "-N", "-o", "%N %T"], "asking Slurm for node states", check=False)
        if conf_path(bed).exists()
        else ""
    )
    states: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


def wait_idle(bed: Bed, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    os.environ["SLURM_CONF"] = str(conf_path(bed))
    want = {n.name for n in bed.nodes()}
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        for name, pid in bed.daemons.items():
            if name.startswith("slurm") and not system.pid_alive(pid):
                raise HushmonError(f"{name} exited at start: {_log_tail(bed, name)}")
        states = node_states(bed)
        if want <= {n for n, s in states.items() if s.rstrip("*") in ("idle", "mixed")}:
            return
        time.sleep(0.3)
    late = sorted(n for n in want if states.get(n, "?").rstrip("*") not in ("idle", "mixed"))
    raise HushmonError(
        f"Slurm nodes {','.join(late)} not idle after {timeout_s:.0f} s "
        f"(states: {states or 'slurmctld does not answer'}); see {bed.logs}"
    )


def _log_tail(bed: Bed, daemon: str) -> str:
    name = daemon.replace("@", "-")
    for path in (bed.logs / f"{name}.log", bed.logs / f"{name}.out"):
        try:
            lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            continue
        if lines:
            return lines[-1].strip()
    return f"no log in {bed.logs}"


def newest_job_id(bed: Bed) -> int:
    """The highest job id Slurm knows now (0 if none)."""
    return max(job_states(bed), default=0)


def job_states(bed: Bed) -> dict[int, str]:
    scontrol = system.tool("scontrol", "slurm-client")
    out = system.run([scontrol, "-o", "show", "jobs"], "listing Slurm jobs", check=False)
    states: dict[int, str] = {}
    for line in out.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        try:
            states[int(fields["JobId"])] = fields.get("JobState", "?")
        except (KeyError, ValueError):
            continue
    return states
