"""Performance Co-Pilot (Debian pcp): a private pmcd with the linux PMDA and
a pmlogger recording a few standard metrics once per period.

The study starts its own pmcd on a private port, socket, namespace and run
folder, so a system PCP (if any) is left alone. The linux PMDA is loaded as
a DSO inside pmcd: Debian's default runs it as a child process over a pipe,
which failed on this machine when pmcd was started privately (protocol
failure at the first fetch); as a DSO the same code reads the same files."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.overhead.modes.base import Processes, spawn, wait_until
from hushmon.overhead.modes.node_exporter import free_port

PCP_BIN = Path("/usr/lib/pcp/bin")
PMDAS = Path("/var/lib/pcp/pmdas")
PMNS = Path("/var/lib/pcp/pmns")
METRICS = [
    "kernel.all.cpu", "kernel.percpu.cpu", "kernel.all.load", "mem.util",
    "disk.dev", "network.interface.in", "network.interface.out",
]  # fmt: skip
PMCD_CONF = (
    f"pmcd\t2\tdso\tpmcd_init\t{PMDAS}/pmcd/pmda_pmcd.so\n"
    f"linux\t60\tdso\tlinux_init\t{PMDAS}/linux/pmda_linux.so\n"
)


def tool(name: str) -> str | None:
    for path in (PCP_BIN / name, Path("/usr/libexec/pcp/bin") / name):
        if os.access(path, os.X_OK):
            return str(path)
    return shutil.which(name)


def answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Pcp:
    name = "pcp"
    description = "PCP: pmcd (linux PMDA) + pmlogger of cpu, percpu, load, mem, disk, net"

    def missing(self) -> str | None:
        if not all(tool(t) for t in ("pmcd", "pmlogger", "pmnsmerge")):
            return "pcp not installed (scripts/install-deps.sh)"
        if not (PMDAS / "linux" / "pmda_linux.so").exists():
            return f"pcp's linux PMDA missing ({PMDAS}/linux/pmda_linux.so)"
        return None

    def start(self, work: Path, period_s: float) -> Processes:
        why = self.missing()
        if why:
            raise HushmonError(why, exit_code=1)
        pmcd, pmlogger, pmnsmerge = (str(tool(t)) for t in ("pmcd", "pmlogger", "pmnsmerge"))
        work.mkdir(parents=True, exist_ok=True)
        (work / "run").mkdir(exist_ok=True)
        # A private namespace of the two PMDAs (the system's may not be built).
        merged = subprocess.run(
            [pmnsmerge, "-f", "root_root", "root_pmcd", "root_linux", str(work / "pmns")],
            cwd=PMNS, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if merged.returncode != 0:
            raise HushmonError(f"pmnsmerge failed: {merged.stderr.strip()}", exit_code=1)
        (work / "pmcd.conf").write_text(PMCD_CONF)
        port = free_port()
        env = {"PCP_RUN_DIR": str(work / "run"), "PCP_LOG_DIR": str(work)}
        log = work / "pmcd.log"
        pmcd_proc = spawn(
            [pmcd, "-f", "-p", str(port), "-s", str(work / "pmcd.socket"),
             "-c", str(work / "pmcd.conf"), "-n", str(work / "pmns"), "-l", str(log)],
            log, env,
        )  # fmt: skip
        wait_until(lambda: answers(port), pmcd_proc, "pmcd", log)
        config = work / "pmlogger.config"
        config.write_text(
            f"log mandatory on every {round(period_s * 1000)} msec {{\n"
            + "\n".join(METRICS)
            + "\n}\n"
        )
        logger_log = work / "pmlogger.log"
        logger = spawn(
            [pmlogger, "-h", f"localhost:{port}", "-c", str(config), "-l", str(logger_log),
             str(work / "archive")],
            logger_log, env,
        )  # fmt: skip
        procs = Processes([pmcd_proc, logger])
        try:
            wait_until((work / "archive.index").exists, logger, "pmlogger", logger_log)
        except HushmonError:
            procs.stop()
            raise
        return procs


MODE = Pcp()
