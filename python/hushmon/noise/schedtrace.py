"""When did the agent under test run? Its on-CPU intervals from the
scheduler's ``sched_switch`` events (tracefs), for any daemon whatever its
phase.

One private tracefs instance per run (``instances/hushmon-noise-PID``, so
that other users of tracing are not disturbed) follows the noise command's
process and every process and thread it forks (``set_event_pid`` with the
``event-fork`` option: the kernel adds each child as it is created, so a
daemon that forks plugins, threads or a daemonized copy is still followed).
The kernel records a ``sched_switch`` when either side is followed, so both
the switch-in and the switch-out of a slice are normally in the trace. Not
always: some kernels drop every event the idle task writes in process
context on a CPU (6.18.44-fc here: on CPU 1 no switch *from* idle is ever
recorded, switches *to* idle are), so a task woken onto that idle CPU has
no switch-in. ``sched_wakeup`` and ``sched_wakeup_new`` of the tree are
recorded too: a slice whose switch-in is missing starts when its task last
became runnable (its wake-up, its preemption, or the start of the trace for
a task already on a CPU then), no earlier than the CPU's previous recorded
switch; such slices are counted
(``inferred_starts``), and a switch-out with no known start at all
(``unmatched_ends``) is reported, never silently dropped. The trace clock
is ``mono`` (CLOCK_MONOTONIC); the file's first line holds the offset to
CLOCK_REALTIME, the detector's clock.

The saved text (``sched.trace`` in a run's directory) is the raw tracefs
output behind one header line, so a study can be re-analysed without
rerunning and tests can use recorded traces.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hushmon.errors import HushmonError

TRACE_FILE = "sched.trace"
TRACEFS_DIRS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
HEADER_PREFIX = "# hushmon-sched-trace"
# Per-CPU ring buffer of the instance: only the followed processes' switches
# are recorded (a few hundred per second for a busy daemon), so this holds
# minutes; a lost event is detected and reported, never silently used.
BUFFER_KB = 4096
# Slices of the agent closer than this form one burst (one activation).
MERGE_GAP_NS = 1_000_000
# Recorded for the followed tree: the switches give the slices, the forks
# the tree, the wake-ups the start of a slice whose switch-in the kernel
# did not record (see the module's docstring).
EVENTS = ("sched_switch", "sched_process_fork", "sched_wakeup", "sched_wakeup_new")

_LINE = re.compile(
    r"^\s*(?P<task>.*?)-(?P<pid>\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(?P<cpu>\d+)\]\s+"
    r"(?:\S+\s+)?(?P<sec>\d+)\.(?P<frac>\d+):\s+(?P<event>\w+):\s+(?P<body>.*)$"
)
_PREV = re.compile(r"\bprev_pid=(\d+)")
_NEXT = re.compile(r"\bnext_pid=(\d+)")
_PREV_STATE = re.compile(r"\bprev_state=(\S+)")
_CHILD = re.compile(r"\bchild_pid=(\d+)")
_PARENT = re.compile(r"(?<![\w])pid=(\d+)")  # the forking parent, or the woken task
_ENTRIES = re.compile(r"entries-in-buffer/entries-written:\s*(\d+)/(\d+)")


def tracefs_root() -> tuple[Path | None, str]:
    """The tracefs mount with sched_switch and instances, or None and why not.

    Where the mount point exists but tracefs is not mounted (a container
    or a fresh boot), root mounts it: mounting tracefs changes nothing else."""
    for d in TRACEFS_DIRS:
        if (d / "events/sched/sched_switch").is_dir() and (d / "instances").is_dir():
            return d, f"tracefs at {d}"
    first = TRACEFS_DIRS[0]
    if first.is_dir() and os.geteuid() == 0 and not any(first.iterdir()):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                ["mount", "-t", "tracefs", "nodev", str(first)],
                check=True, capture_output=True, timeout=10,
            )  # fmt: skip
        if (first / "events/sched/sched_switch").is_dir():
            return first, f"tracefs at {first} (mounted now)"
    if os.geteuid() != 0:
        return None, "tracing needs root (tracefs instances)"
    return None, "no tracefs with sched:sched_switch (kernel without tracing, or not mounted)"


def realtime_minus_mono_ns() -> int:
    """CLOCK_REALTIME - CLOCK_MONOTONIC from the tightest of 16 reading pairs."""
    best: tuple[int, int] | None = None
    for _ in range(16):
        a = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        r = time.clock_gettime_ns(time.CLOCK_REALTIME)
        b = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if best is None or b - a < best[0]:
            best = (b - a, r - (a + b) // 2)
    assert best is not None
    return best[1]


class SchedTrace:
    """A private tracefs instance recording the scheduler events of one
    process tree. Use as a context manager; :meth:`follow` starts it."""

    def __init__(self, root: Path, buffer_kb: int = BUFFER_KB) -> None:
        self.dir = root / "instances" / f"hushmon-noise-{os.getpid()}-{time.monotonic_ns()}"
        self.buffer_kb = buffer_kb
        self.root_pid: int | None = None
        self.offset_ns = 0
        self.started_mono_ns = 0

    def _write(self, rel: str, text: str) -> None:
        try:
            (self.dir / rel).write_text(text)
        except OSError as exc:
            raise HushmonError(f"tracing: cannot write {self.dir / rel}: {exc.strerror}") from exc

    def __enter__(self) -> SchedTrace:
        try:
            self.dir.mkdir()
        except OSError as exc:
            raise HushmonError(f"tracing: cannot create {self.dir}: {exc.strerror}") from exc
        try:
            # a new instance records at once: nothing before follow() belongs
            # to the tree, and every process's switches would fill the trace
            self._write("tracing_on", "0")
            self._write("trace_clock", "mono")
            self._write("buffer_size_kb", str(self.buffer_kb))
            self._write("options/event-fork", "1")
            for event in EVENTS:
                self._write(f"events/sched/{event}/enable", "1")
        except HushmonError:
            self.close()
            raise
        return self

    def follow(self, pid: int) -> None:
        """Starts recording pid and everything it will fork."""
        self.root_pid = pid
        self._write("set_event_pid", str(pid))
        self.offset_ns = realtime_minus_mono_ns()
        # a task already on a CPU now has no switch-in in the trace: its
        # slice starts here (the trace clock is CLOCK_MONOTONIC)
        self.started_mono_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        self._write("tracing_on", "1")

    def save(self, path: Path, steady_from_ns: int | None = None) -> Path:
        """Stops recording and writes the header line and the trace text.

        steady_from_ns: CLOCK_REALTIME instant the command's start-up is
        over (a template keeps only what follows)."""
        self._write("tracing_on", "0")
        try:
            text = (self.dir / "trace").read_text(errors="replace")
        except OSError as exc:
            raise HushmonError(f"tracing: cannot read {self.dir}/trace: {exc.strerror}") from exc
        head = (
            f"{HEADER_PREFIX} root_pid={self.root_pid} "
            f"realtime_minus_mono_ns={self.offset_ns} clock=mono "
            f"started_mono_ns={self.started_mono_ns}"
            + (f" steady_from_realtime_ns={steady_from_ns}" if steady_from_ns else "")
            + "\n"
        )
        path.write_text(head + text)
        return path

    def close(self) -> None:
        with contextlib.suppress(OSError):
            (self.dir / "tracing_on").write_text("0")
        # the kernel refuses rmdir for a moment while readers hold the buffer
        for _ in range(50):
            try:
                self.dir.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)

    def __exit__(self, *_exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class AgentTrace:
    """The agent's on-CPU slices on CLOCK_REALTIME (ns), from one trace."""

    slices: np.ndarray  # shape (n, 2): start_ns, end_ns, sorted by start
    pids: frozenset[int]
    lost_events: int  # events the ring buffer dropped (0 for a usable trace)
    span_ns: tuple[int, int]  # first and last event of the trace
    steady_from_ns: int = 0  # realtime end of the start-up (0: not marked)
    # slices whose switch-in the kernel did not record, started at the
    # task's wake-up or preemption instead (an upper bound, see the module)
    inferred_starts: int = 0
    # switch-outs of the tree with neither a switch-in nor a wake-up before
    # them: slices left out (0 for a complete trace)
    unmatched_ends: int = 0

    def on_cpu_ns(self, lo: int, hi: int) -> int:
        s = np.clip(self.slices, lo, hi)
        return int((s[:, 1] - s[:, 0]).sum()) if s.size else 0

    def bursts(self, merge_gap_ns: int = MERGE_GAP_NS) -> np.ndarray:
        """Slices closer than merge_gap_ns joined (across CPUs): (n, 2)."""
        if self.slices.size == 0:
            return np.empty((0, 2), dtype=np.int64)
        out = [list(self.slices[0])]
        for a, b in self.slices[1:]:
            if a - out[-1][1] < merge_gap_ns:
                out[-1][1] = max(out[-1][1], b)
            else:
                out.append([a, b])
        return np.asarray(out, dtype=np.int64)


def _ns(sec: str, frac: str) -> int:
    return int(sec) * 1_000_000_000 + int(frac[:9].ljust(9, "0"))


def parse_trace(text: str, source: str = "trace") -> AgentTrace:
    """The followed tree's on-CPU slices from a saved trace (header + text)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith(HEADER_PREFIX):
        raise HushmonError(f"{source} is not a hushmon scheduler trace")
    fields = dict(kv.split("=", 1) for kv in lines[0].split()[2:] if "=" in kv)
    try:
        root = int(fields["root_pid"])
        offset = int(fields["realtime_minus_mono_ns"])
    except (KeyError, ValueError) as exc:
        raise HushmonError(f"{source}: bad header line '{lines[0]}'") from exc
    try:
        started = int(fields.get("started_mono_ns", "0"))  # 0: older traces
    except ValueError as exc:
        raise HushmonError(f"{source}: bad header line '{lines[0]}'") from exc
    pids = {root}
    seen: set[int] = set()  # followed pids with an event in the trace
    running: dict[int, tuple[int, int]] = {}  # cpu -> followed pid, start of its slice
    runnable: dict[int, int] = {}  # followed pid -> since when it waits for a CPU
    cpu_switched: dict[int, int] = {}  # cpu -> its last recorded switch
    slices: list[tuple[int, int]] = []
    lost = inferred = unmatched = 0
    first = last = None
    for line in lines[1:]:
        if line.startswith("#"):
            m = _ENTRIES.search(line)
            if m:
                lost = max(0, int(m.group(2)) - int(m.group(1)))
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        ts = _ns(m["sec"], m["frac"])
        first = ts if first is None else first
        last = ts
        body = m["body"]
        event = m["event"]
        if event == "sched_process_fork":
            parent, child = _PARENT.search(body), _CHILD.search(body)
            if parent and child and int(parent.group(1)) in pids:
                pids.add(int(child.group(1)))
                seen.add(int(child.group(1)))
            continue
        if event in ("sched_wakeup", "sched_wakeup_new"):
            woken = _PARENT.search(body)
            if woken and int(woken.group(1)) in pids:
                runnable[int(woken.group(1))] = ts
                seen.add(int(woken.group(1)))
            continue
        if event != "sched_switch":
            continue
        prev_m, next_m = _PREV.search(body), _NEXT.search(body)
        if prev_m is None or next_m is None:
            continue
        prev, nxt, cpu = int(prev_m.group(1)), int(next_m.group(1)), int(m["cpu"])
        cur = running.pop(cpu, None)
        if prev in pids:
            if cur is not None and cur[0] == prev:
                slices.append((cur[1], ts))
            elif prev in runnable or (prev not in seen and started):
                # switch-in not recorded: it ran from when it could (woken,
                # preempted, or already running when the trace started),
                # once the CPU's previous recorded occupant had left
                could = runnable.get(prev, started)
                slices.append((max(could, cpu_switched.get(cpu, 0)), ts))
                inferred += 1
            else:
                unmatched += 1
            seen.add(prev)
            state = _PREV_STATE.search(body)
            if state and state.group(1).startswith("R"):
                runnable[prev] = ts  # preempted: still runnable
            else:
                runnable.pop(prev, None)
        cpu_switched[cpu] = ts
        if nxt in pids:
            running[cpu] = (nxt, ts)
            runnable.pop(nxt, None)
            seen.add(nxt)
    if last is not None:
        slices.extend((start, last) for _, start in running.values())
    arr = np.asarray(sorted(slices), dtype=np.int64).reshape(-1, 2) + offset
    if first is not None and started:
        first = min(first, started)  # the trace covers from its start on
    span = (first + offset, last + offset) if first is not None and last is not None else (0, 0)
    steady = int(fields.get("steady_from_realtime_ns", "0") or 0)
    return AgentTrace(arr, frozenset(pids), lost, span, steady, inferred, unmatched)


def read_trace(path: Path) -> AgentTrace:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise HushmonError(f"cannot read scheduler trace {path}: {exc.strerror}") from exc
    return parse_trace(text, str(path))


def sham_bursts(template: AgentTrace, lo: int, shift_ns: int) -> np.ndarray:
    """The bursts of a template trace (the agent alone, traced before the
    study; its start-up left out) laid onto a clean run from lo on,
    cyclically shifted by shift_ns: the same number, widths and spacing of
    windows as the agent makes, at instants unrelated to the detector (the
    clean arm's sham windows)."""
    t0, t1 = max(template.span_ns[0], template.steady_from_ns), template.span_ns[1]
    bursts = template.bursts()
    kept = bursts[bursts[:, 0] >= t0] if bursts.size else bursts.reshape(0, 2)
    if kept.size == 0 or t1 <= t0:
        return kept.reshape(0, 2)
    length = max(t1 - t0, 1)
    off = (kept[:, 0] - t0 + shift_ns) % length
    out = np.stack([lo + off, lo + off + (kept[:, 1] - kept[:, 0])], axis=1)
    return out[np.argsort(out[:, 0])]
