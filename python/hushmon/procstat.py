"""CPU time and resident size of processes from /proc, for the benchmarks
and the overhead study that measure what a daemon costs."""

from __future__ import annotations

import os
from pathlib import Path


def process_cpu_s(stat_path: str) -> float:
    """utime + stime from a /proc/.../stat file, in seconds (0 if gone).
    Clock ticks (10 ms): a fallback where schedstat is missing."""
    try:
        with open(stat_path) as f:
            text = f.read()
    except OSError:
        return 0.0
    # The command name may hold spaces: fields are counted after its ')'.
    fields = text[text.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def task_cpu_s(task_dir: str) -> float:
    """On-CPU time of one thread (/proc/PID/task/TID) in seconds: schedstat's
    nanoseconds, since an agent uses far less than a clock tick per sample."""
    try:
        with open(f"{task_dir}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return process_cpu_s(f"{task_dir}/stat")


def pid_cpu_s(pid: int) -> float:
    """On-CPU seconds of every live thread of a process (0 if gone)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    return sum(task_cpu_s(f"/proc/{pid}/task/{tid}") for tid in tids)


def status_kib(pid: int | str, fields: tuple[str, ...]) -> dict[str, int]:
    """The named KiB fields of /proc/PID/status (``pid`` may be "self"); those
    missing, or all once the process is gone, are left out."""
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in fields:
                out[name] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


def rss_kib(pid: int) -> int:
    """Resident size (VmRSS) of a live process in KiB; 0 once it is gone."""
    return status_kib(pid, ("VmRSS",)).get("VmRSS", 0)
