"""Running ``hushmon-bench`` under mpirun and keeping everything it produced.

An output directory holds, for one run:

    results.json     the program's own --json output (the raw data)
    provenance.json  how it was run: command lines, host, times, exit code
    stdout.txt       the program's readable table
    stderr.txt       its diagnostics (and mpirun's)
    report.html      the report (written by the caller)

so a report can be rebuilt later (``hushmon bench report``) and anyone can
see exactly what produced the numbers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hushmon import __version__, jsonio
from hushmon.bench.results import PROGRAM_NAME, BenchRun, load_run
from hushmon.errors import HushmonError
from hushmon.paths import program
from hushmon.progress import bar
from hushmon.runner import check_process_count, mpirun_command

RESULTS_FILE = "results.json"
PROVENANCE_FILE = "provenance.json"
STDOUT_FILE = "stdout.txt"
STDERR_FILE = "stderr.txt"
REPORT_FILE = "report.html"

# Lines mpirun adds around a failing rank's own message; never the cause.
_LAUNCHER_NOISE = (
    "---",
    "===",
    "mpirun",
    "Primary job",
    "MPI_ABORT",
    "with errorcode",
    "NOTE: invoking MPI_ABORT",
    "You may or may not see output",
    "Proper termination",
    "process returned",
    "a non-zero exit code",
    "Process name",
    "Exit code",
    "The first process to do so",
)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def default_out_dir() -> Path:
    """<data>/reports/bench-<UTC time>, next to the other reports."""
    from hushmon.datadir import data_dir

    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return data_dir().reports(f"bench-{stamp}")


def error_line(stderr_text: str, returncode: int) -> str:
    """The program's own one-line error out of what mpirun printed around it."""
    lines = [ln.strip() for ln in stderr_text.splitlines() if ln.strip()]
    own = [ln for ln in lines if ln.startswith(f"{PROGRAM_NAME}:")]
    if own:
        return own[0]
    other = [ln for ln in lines if not any(noise in ln for noise in _LAUNCHER_NOISE)]
    if other:
        return other[-1]
    return f"{PROGRAM_NAME} exited with code {returncode} and printed no message"


def is_table_row(line: str) -> bool:
    """A row of hushmon-bench's stdout table: one finished (op, size, method).

    The header starts with "op" and the closing clock summary with "#"; a
    row is "op size procs method n_t n_c n_s mean ci95 min max global clock".
    """
    parts = line.split()
    return len(parts) >= 12 and parts[0] not in ("op", "#") and parts[1].isdigit()


def planned_results(line: str) -> int | None:
    """The total from hushmon-bench's first line ``# planned N results (...)``."""
    parts = line.split()
    if len(parts) >= 4 and parts[:2] == ["#", "planned"] and parts[3] == "results":
        try:
            return int(parts[2])
        except ValueError:
            return None
    return None


class Progress:
    """Results done / planned and the time left, on stderr.

    On a terminal a bar (tqdm shows the rate and what is left); in a log one
    line every ``every_s`` seconds, so a long run is never silent.
    """

    def __init__(self, label: str, stream: Any = None, every_s: float = 10.0) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.every_s = every_s
        self.total: int | None = None
        self.done = 0
        self.start = time.monotonic()
        self.last_line = self.start
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._bar: Any = None

    def __enter__(self) -> Progress:
        if self.tty:
            self._bar = bar(self.label, None, "result")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()

    def planned(self, total: int) -> None:
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def left_s(self) -> float | None:
        if not self.total or self.done == 0:
            return None
        elapsed = time.monotonic() - self.start
        return elapsed / self.done * max(self.total - self.done, 0)

    def text(self) -> str:
        elapsed = time.monotonic() - self.start
        total = f"/{self.total}" if self.total else ""
        left = self.left_s()
        left_text = f", about {left:.0f} s left" if left is not None else ""
        return f"{self.label}: {self.done}{total} results, {elapsed:.0f} s{left_text}"

    def advance(self) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(1)
            return
        now = time.monotonic()
        if now - self.last_line >= self.every_s or self.done == self.total:
            self.last_line = now
            print(self.text(), file=self.stream, flush=True)


def _stop_group(pid: int) -> None:
    """SIGTERM the process group this module started (mpirun and its ranks)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)


@dataclass
class BenchRunner:
    """One mpirun launch of hushmon-bench writing into ``out_dir``."""

    nprocs: int
    bench_args: Sequence[str]
    out_dir: Path
    timeout_s: float | None = None
    # Called with each stdout line; returns True when the line is one
    # finished measurement (advances the progress bar).
    is_result_line: Callable[[str], bool] = field(default=lambda line: is_table_row(line))
    expected_results: int | None = None
    hushmon_argv: Sequence[str] = field(default_factory=lambda: list(sys.argv))

    @property
    def results_path(self) -> Path:
        return self.out_dir / RESULTS_FILE

    def command(self) -> list[str]:
        exe = program(PROGRAM_NAME)
        argv = [str(exe), *self.bench_args, "--json", str(self.results_path)]
        return mpirun_command(self.nprocs, argv)

    def run(self) -> tuple[BenchRun, dict[str, Any]]:
        cmd = self.command()
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HushmonError(f"cannot create {self.out_dir}: {exc.strerror or exc}") from exc
        if self.results_path.exists():
            # A stale file would be mistaken for this run's output.
            self.results_path.unlink()
        started_at = now_iso()
        load_before = os.getloadavg()[0]
        start = time.monotonic()
        returncode, timed_out = self._launch(cmd)
        wall_time_s = time.monotonic() - start
        provenance: dict[str, Any] = {
            "command": list(self.hushmon_argv),
            "mpirun": cmd,
            "nprocs": self.nprocs,
            "host": socket.gethostname(),
            "hushmon_version": __version__,
            "started_at": started_at,
            "finished_at": now_iso(),
            "wall_time_s": round(wall_time_s, 3),
            "exit_code": returncode,
            # A busy machine changes synchronized timings; the report says so.
            "cpus": os.cpu_count(),
            "load_before": round(load_before, 2),
            "load_after": round(os.getloadavg()[0], 2),
            "timed_out": timed_out,
        }
        jsonio.write_atomic(self.out_dir / PROVENANCE_FILE, provenance)
        if timed_out:
            raise HushmonError(
                f"{PROGRAM_NAME} did not finish in {self.timeout_s:g} s and was stopped "
                f"(output so far in {self.out_dir})",
                exit_code=124,
            )
        if returncode != 0:
            stderr_text = (self.out_dir / STDERR_FILE).read_text(encoding="utf-8", errors="replace")
            exit_code = returncode if 0 < returncode < 126 else 1
            raise HushmonError(error_line(stderr_text, returncode), exit_code=exit_code)
        if not self.results_path.is_file():
            raise HushmonError(
                f"{PROGRAM_NAME} exited 0 but wrote no {RESULTS_FILE} in {self.out_dir}",
                exit_code=1,
            )
        run = load_run(self.results_path)
        # N singletons of another MPI's launcher would each have written here.
        check_process_count(PROGRAM_NAME, self.nprocs, run.meta.nprocs)
        return run, provenance

    def _launch(self, cmd: list[str]) -> tuple[int, bool]:
        """Run to the end, teeing stdout to a file and the progress bar."""
        timed_out = threading.Event()
        with (
            open(self.out_dir / STDOUT_FILE, "w", encoding="utf-8") as out_file,
            open(self.out_dir / STDERR_FILE, "w", encoding="utf-8") as err_file,
            Progress(f"{PROGRAM_NAME} ({self.nprocs} ranks)") as progress,
        ):
            if self.expected_results is not None:
                progress.planned(self.expected_results)
            try:
                # A session of its own: on timeout the whole tree (mpirun and
                # its ranks) is stopped by this one process-group id.
                proc = subprocess.Popen(
                    cmd,
                    stdout=subprocess.PIPE,
                    stderr=err_file,
                    stdin=subprocess.DEVNULL,
                    text=True,
                    bufsize=1,
                    start_new_session=True,
                )
            except OSError as exc:
                raise HushmonError(f"cannot start {cmd[0]}: {exc}") from exc

            def stop() -> None:
                timed_out.set()
                _stop_group(proc.pid)

            timer = threading.Timer(self.timeout_s, stop) if self.timeout_s else None
            if timer:
                timer.start()
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    out_file.write(line)
                    total = planned_results(line)
                    if total is not None:
                        progress.planned(total)
                    elif self.is_result_line(line):
                        progress.advance()
                returncode = proc.wait()
            except BaseException:
                # Ctrl-C or a crash here must not leave ranks running.
                _stop_group(proc.pid)
                proc.wait()
                raise
            finally:
                if timer:
                    timer.cancel()
        return returncode, timed_out.is_set()
