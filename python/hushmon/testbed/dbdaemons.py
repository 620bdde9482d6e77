"""The accounting daemons of the bed and of its template database: MariaDB
on a unix socket only, slurmdbd on it, their configuration, and waiting
until each answers (one line naming the daemon and its last log line when
it does not)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.testbed import system

# Next to the bed's slurmctld/slurmd ports (16817/16818), never Slurm's 6819.
DBD_PORT = 16819
DATABASE = "hushmon_bed_acct"
START_TIMEOUT_S = 30.0
PACKAGES = "slurmdbd and mariadb-server (scripts/install-deps.sh)"
# Small files and pool: a bed's accounting holds a few hundred jobs (slurmdbd
# logs that these are below its recommendations). No fsync: the database
# lives as long as the bed, and DDL with fsyncs made slurmdbd's first start
# and the cluster's registration take seconds here.
MARIADB_OPTIONS = (
    "--innodb-log-file-size=4M",
    "--innodb-buffer-pool-size=16M",
    "--innodb-lock-wait-timeout=900",
    "--innodb-flush-log-at-trx-commit=0",
    "--innodb-doublewrite=0",
    "--innodb-flush-method=nosync",
    "--sync-frm=0",
    "--skip-name-resolve",
)


def start_mariadb(datadir: Path, sock: Path, pid_file: Path, log: Path) -> int:
    """mariadbd on ``datadir``, listening on ``sock`` only; returns its pid
    once it takes connections."""
    pid = spawn_mariadb(datadir, sock, pid_file, log)
    wait_mariadb(pid, sock, log)
    return pid


def spawn_mariadb(
    datadir: Path, sock: Path, pid_file: Path, log: Path, copy_from: Path | None = None
) -> int:
    """Starts mariadbd without waiting; with ``copy_from``, after copying
    that data folder to ``datadir`` in the same process (a shell that
    becomes mariadbd: the pid is the server's, and both command lines name
    ``datadir``, so a bed's ``down`` finds either)."""
    argv = [
        system.tool("mariadbd", PACKAGES),
        "--no-defaults",
        "--user=root",
        f"--datadir={datadir}",
        "--skip-networking",
        f"--socket={sock}",
        f"--pid-file={pid_file}",
        f"--log-error={log}",
        *MARIADB_OPTIONS,
    ]
    if copy_from is not None:
        script = 'cp -a "$1" "$2" && shift 2 && exec "$@"'
        argv = ["/bin/sh", "-c", script, "sh", str(copy_from), str(datadir), *argv]
    return system.spawn(argv, log.with_suffix(".out"), "starting MariaDB").pid


def wait_mariadb(pid: int, sock: Path, log: Path) -> None:
    wait_ready(lambda: _unix_listening(sock), pid, "MariaDB", log)


def start_slurmdbd(conf: Path, sock: Path, logs: Path) -> int:
    """slurmdbd with ``conf``; returns its pid once it listens."""
    pid = system.spawn(
        [system.tool("slurmdbd", PACKAGES), "-D"],
        logs / "slurmdbd.out",
        "starting slurmdbd",
        # slurmdbd reads slurmdbd.conf beside $SLURM_CONF; libmariadb takes
        # the socket of a "localhost" server from MYSQL_UNIX_PORT.
        env={"SLURM_CONF": str(conf.parent / "slurm.conf"), "MYSQL_UNIX_PORT": str(sock)},
    ).pid
    # The port must be slurmdbd's own: a stranger listening there would
    # answer a plain connect while slurmdbd dies of "Address already in use".
    wait_ready(lambda: listens_on(pid, DBD_PORT), pid, "slurmdbd", logs / "slurmdbd.log")
    return pid


def write_dbd_conf(folder: Path, pid_file: Path, logs: Path) -> Path:
    """slurmdbd.conf in ``folder`` (beside the slurm.conf slurmdbd is told),
    root's and mode 600 as slurmdbd demands (it holds the storage login)."""
    path = folder / "slurmdbd.conf"
    lines = [
        "# Written by 'hushmon testbed up'; removed by 'hushmon testbed down'.",
        "AuthType=auth/munge",
        "DbdHost=localhost",
        f"DbdPort={DBD_PORT}",
        "SlurmUser=root",
        f"PidFile={pid_file}",
        f"LogFile={logs / 'slurmdbd.log'}",
        "DebugLevel=info",
        "StorageType=accounting_storage/mysql",
        "StorageHost=localhost",
        "StorageUser=root",
        f"StorageLoc={DATABASE}",
    ]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    return path


def wait_ready(ready: Callable[[], bool], pid: int, name: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if not system.running(pid):
            raise HushmonError(f"{name} exited at start: {last_line(log)}")
        if time.monotonic() > deadline:
            late = f"{name} did not answer in {START_TIMEOUT_S:.0f} s"
            raise HushmonError(f"{late}: {last_line(log)}")
        time.sleep(0.02)


def _unix_listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a TCP socket listening on ``port``."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            # local address "ADDR:PORT" in hex; state 0A = LISTEN
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    if not inodes:
        return False
    fd_dir = Path(f"/proc/{pid}/fd")
    held = set()
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in fds:
        try:
            link = os.readlink(fd_dir / fd)
        except OSError:  # closed meanwhile (the listing's own descriptor too)
            continue
        if link.startswith("socket:["):
            held.add(link.removeprefix("socket:[").rstrip("]"))
    return not inodes.isdisjoint(held)


def last_line(log: Path) -> str:
    """A daemon's last words: its fatal line, else its last error, else its last line."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        # a daemon that died before opening its log: its output file (spawn's)
        out = log.with_suffix(".out")
        return f"no log at {log}" if log == out or not out.exists() else last_line(out)
    fatal = [ln for ln in lines if "fatal" in ln.lower()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (fatal or errors or lines or [f"{log} is empty"])[-1]
