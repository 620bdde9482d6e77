"""The bed's accounting database, made once per machine and copied by every
bed: mariadb-install-db, slurmdbd's first start (its tables), the bed's
cluster registered with ``sacctmgr -i add cluster``, both daemons stopped
cleanly. Making it costs seconds of DDL (4-10 s at load 5-11 on this
2-vCPU VM, measured 2026-11-27); a copy is ~22 MB of files.

The copy kept in ``$HUSHMON_TESTBED_CACHE`` (default
/var/cache/hushmon-testbed) is named after the MariaDB and slurmdbd
programs (size and mtime) and the options below, so an upgrade or a change
of options makes a new one. It is built inside the bed's state folder, so
a ``down`` after a failed ``up`` stops its daemons like the bed's own.
Making a new one removes the others (``_prune_others``)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.testbed import dbdaemons, system

CACHE_DIR = Path(os.environ.get("HUSHMON_TESTBED_CACHE", "/var/cache/hushmon-testbed"))
# Bumped when what a template holds changes in a way the key cannot see.
TEMPLATE_FORMAT = 1
CLUSTER = "hushmon-testbed"  # slurm.conf's ClusterName on the bed
INSTALL_TIMEOUT_S = 120.0
STOP_WAIT_S = 20.0
STAGING_STALE_S = 3600.0


def template_key() -> str:
    parts = [str(TEMPLATE_FORMAT), *dbdaemons.MARIADB_OPTIONS, CLUSTER, dbdaemons.DATABASE]
    for name in ("mariadbd", "slurmdbd"):
        st = Path(system.tool(name, dbdaemons.PACKAGES)).stat()
        parts += [name, str(st.st_size), str(st.st_mtime_ns)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def existing() -> Path | None:
    """The template's data folder for the installed programs, if made."""
    target = CACHE_DIR / f"accounting-{template_key()}"
    return target if (target / "mysql").is_dir() else None


def build_dir(build_root: Path) -> Path:
    return build_root / "template"


def ensure(build_root: Path, logs: Path) -> Path:
    """The template's data folder, made first (in ``build_root``, its
    daemons' logs in ``logs``) if this machine has none for the installed
    programs."""
    found = existing()
    if found is not None:
        return found
    target = CACHE_DIR / f"accounting-{template_key()}"
    built = _build(build_dir(build_root), logs)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    staging = CACHE_DIR / f".building-{uuid.uuid4().hex[:8]}"
    shutil.copytree(built, staging, symlinks=True)
    try:
        staging.rename(target)
    except OSError:
        # another bed's up made it meanwhile: theirs is as good
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / "mysql").is_dir():
            raise HushmonError(f"cannot keep the accounting template in {target}") from None
    shutil.rmtree(build_dir(build_root), ignore_errors=True)
    _prune_others(target)
    return target


def _prune_others(kept: Path) -> None:
    """Removes the templates of programs or options no longer installed
    (~22 MB each, one per upgrade; no bed of this machine copies from one)
    and copies a crashed ``up`` left (an hour old: not one being made)."""
    for old in CACHE_DIR.glob("accounting-*"):
        if old != kept:
            shutil.rmtree(old, ignore_errors=True)
    for staging in CACHE_DIR.glob(".building-*"):
        if time.time() - staging.stat().st_mtime > STAGING_STALE_S:
            shutil.rmtree(staging, ignore_errors=True)


def _build(folder: Path, logs: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    logs.mkdir(parents=True, exist_ok=True)
    data = folder / "data"
    _install_db(data, logs / "mariadb-install.out")
    sock = folder / "mariadb.sock"
    pids: list[int] = []
    try:
        pids.append(
            dbdaemons.start_mariadb(data, sock, folder / "mariadb.pid", logs / "mariadb.log")
        )
        slurm_conf = folder / "slurm.conf"
        slurm_conf.write_text(
            "\n".join(
                [
                    "# The accounting template's: slurmdbd and sacctmgr read it.",
                    f"ClusterName={CLUSTER}",
                    "SlurmctldHost=localhost",
                    "AuthType=auth/munge",
                    "AccountingStorageType=accounting_storage/slurmdbd",
                    "AccountingStorageHost=127.0.0.1",
                    f"AccountingStoragePort={dbdaemons.DBD_PORT}",
                ]
            )
            + "\n"
        )
        conf = dbdaemons.write_dbd_conf(folder, folder / "slurmdbd.pid", logs)
        pids.insert(0, dbdaemons.start_slurmdbd(conf, sock, logs))
        _register_cluster(slurm_conf)
    except BaseException:
        system.stop_processes(pids, STOP_WAIT_S)
        raise
    # slurmdbd first, then MariaDB: a clean shutdown leaves files to copy
    for pid in pids:
        if system.stop_processes([pid], STOP_WAIT_S):
            raise HushmonError(f"the accounting template's daemon {pid} did not stop in time")
    return data


def _install_db(data: Path, log: Path) -> None:
    argv = [
        system.tool("mariadb-install-db", dbdaemons.PACKAGES),
        "--no-defaults",
        "--user=root",
        f"--datadir={data}",
        "--auth-root-authentication-method=socket",
        "--skip-test-db",
        *dbdaemons.MARIADB_OPTIONS,
    ]
    try:
        with log.open("wb") as out:
            rc = subprocess.run(argv, stdout=out, stderr=out, timeout=INSTALL_TIMEOUT_S).returncode
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HushmonError(f"MariaDB cannot start: mariadb-install-db: {exc}") from exc
    if rc != 0:
        raise HushmonError(
            f"MariaDB cannot start: mariadb-install-db exited {rc}: {dbdaemons.last_line(log)}"
        )


def _register_cluster(slurm_conf: Path) -> None:
    sacctmgr = system.tool("sacctmgr", dbdaemons.PACKAGES)
    try:
        out = subprocess.run(
            [sacctmgr, "-i", "add", "cluster", CLUSTER],
            capture_output=True,
            text=True,
            timeout=system.TOOL_TIMEOUT_S,
            check=False,
            env={**os.environ, "SLURM_CONF": str(slurm_conf)},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HushmonError(f"registering the bed's cluster in slurmdbd: {exc}") from exc
    text = (out.stdout + out.stderr).strip()
    if out.returncode != 0 and "already exists" not in text:
        last = text.splitlines()[-1] if text else f"exit {out.returncode}"
        raise HushmonError(f"registering the bed's cluster in slurmdbd: {last}")
