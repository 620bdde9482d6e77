"""Slurm's accounting on the bed: a MariaDB of the bed's own (a unix socket
in the state folder, no TCP port, started as root by the bed like its other
daemons) and slurmdbd on the head, so that ``sacct`` shows a job's record
(hushmon's AdminComment among it) after the controller has forgotten the
job.

Slurm 22.05 always stores AdminComment and SystemComment in the database;
``AccountingStoreFlags=job_comment`` adds the user's Comment as well.

Every bed starts from a copy of a database made once per machine and
MariaDB/slurmdbd build (dbtemplate.py: mariadb-install-db, slurmdbd's
tables, the bed's cluster registered with ``sacctmgr``): making it costs
seconds, copying it (~88 MB) 0.25 s here, done by :func:`begin` while the
network and the agents are made.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.testbed import dbdaemons, dbtemplate, system
from hushmon.testbed.spec import HEAD_ADDR
from hushmon.testbed.state import Bed


def acct_dir(root: Path) -> Path:
    """Everything of the accounting under the state folder, so that ``down``
    finds mariadbd by its command line and removes the files with the bed."""
    return root / "accounting"


def db_socket(root: Path) -> Path:
    return acct_dir(root) / "mariadb.sock"


def dbd_pid_file(root: Path) -> Path:
    return acct_dir(root) / "slurmdbd.pid"


def slurm_conf_lines() -> list[str]:
    """slurm.conf's accounting lines: slurmctld sends each job's record to
    the bed's slurmdbd (on the head's bed address, so nodes reach it too)."""
    return [
        "AccountingStorageType=accounting_storage/slurmdbd",
        f"AccountingStorageHost={HEAD_ADDR}",
        f"AccountingStoragePort={dbdaemons.DBD_PORT}",
        "AccountingStoreFlags=job_comment",
    ]


def check_programs() -> None:
    for name in ("mariadbd", "mariadb-install-db", "slurmdbd", "sacctmgr"):
        system.tool(name, dbdaemons.PACKAGES)


def begin(bed: Bed) -> None:
    """MariaDB started early in ``up`` (copy and server in one process),
    so that it comes up while the network and the agents are made; only
    where the machine has its template already (making one needs munge,
    which starts with Slurm). :func:`start` waits for it."""
    template = dbtemplate.existing()
    if template is None:
        return
    d = acct_dir(bed.root)
    d.mkdir(parents=True, exist_ok=True)
    bed.daemons["mariadbd"] = dbdaemons.spawn_mariadb(
        d / "data", db_socket(bed.root), d / "mariadb.pid", bed.logs / "mariadb.log", template
    )


def start(bed: Bed) -> None:
    """MariaDB on a copy of the machine's template database (unless
    :func:`begin` started it), then slurmdbd on it; each failure is one
    line naming the daemon and its last log line."""
    if bed.slurm_conf is None:
        raise HushmonError("the bed's slurm.conf must be written before slurmdbd starts")
    d = acct_dir(bed.root)
    sock, log = db_socket(bed.root), bed.logs / "mariadb.log"
    if "mariadbd" not in bed.daemons:
        d.mkdir(parents=True, exist_ok=True)
        template = dbtemplate.ensure(d, bed.logs / "accounting-template")
        bed.daemons["mariadbd"] = dbdaemons.spawn_mariadb(
            d / "data", sock, d / "mariadb.pid", log, template
        )
        bed.save()
    dbdaemons.wait_mariadb(bed.daemons["mariadbd"], sock, log)
    conf = dbdaemons.write_dbd_conf(bed.slurm_conf.parent, dbd_pid_file(bed.root), bed.logs)
    bed.daemons["slurmdbd"] = dbdaemons.start_slurmdbd(conf, sock, bed.logs)
    bed.save()


def leftover_pids(root: Path) -> list[int]:
    """slurmdbd's pids from their pid files (the bed's, and the template's
    while ``up`` makes one): its command line does not name the state
    folder, so ``down`` after a crash finds it here."""
    found = []
    for pid_file in (dbd_pid_file(root), dbtemplate.build_dir(acct_dir(root)) / "slurmdbd.pid"):
        try:
            pid = int(pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "slurmdbd":
                found.append(pid)
    return found
