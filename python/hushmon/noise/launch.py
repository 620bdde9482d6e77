"""Launching one run: the detector under mpirun, with the injector or any
noise command beside it, each in its own process group so that every exit
path (error, timeout, Ctrl-C) can end them all and leaves nothing behind."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.errors import HushmonError
from hushmon.paths import program
from hushmon.runner import check_process_count, mpi_init_failure, mpirun_command

RUN_FILE = "run.json"
DETECT_JSON = "detect.json"
EVENTS_FILE = "events.bin"
INJECT_LOG = "inject.log"
INJECT_JSON = "inject.json"
NOISE_OUT = "noise-cmd.txt"


@dataclass(frozen=True)
class DetectorConfig:
    op: str = "barrier"
    size: str = "2K"
    count: int | None = None  # the seed's fixed loop; None: run for `seconds`
    seconds: float = 4.0
    nprocs: int = 2
    timer: str = "monotonic"
    # Scheduling priority of the detector AND the injector (the same for
    # both, so the agent meets the job as on a real node). Negative values
    # (root only) shield the experiment from unrelated load on a shared box.
    nice: int = 0


@dataclass(frozen=True)
class NoiseConfig:
    """What runs beside the detector in a noisy run."""

    level_pct: float = 0.0
    period_s: float = 1.0
    shape: str = "sum"
    cpu: int | None = 0
    noise_cmd: str | None = None  # instead of the injector
    # A noise command whose activations are known to sit at this phase of the
    # period on CLOCK_REALTIME (e.g. an agent aligned to wall-clock seconds):
    # both arms are then analysed at it instead of scanning every phase.
    noise_phase_s: float | None = None
    # Window after each activation for a noise command (its work per
    # activation is unknown); the injector's follows from its level.
    window_s: float | None = None
    # Find when a noise command ran from the scheduler (tracefs sched_switch
    # of its process tree) instead of scanning phases (schedtrace.py).
    trace: bool = False
    # Seconds a noise command gets to start before the detector does (a
    # daemon's start-up is not its steady cost).
    warmup_s: float = 0.5

    @property
    def known_phase(self) -> bool:
        return self.noise_cmd is None or self.noise_phase_s is not None

    @property
    def method(self) -> str:
        """How the agent's windows are found: the injector's schedule, a
        given phase, the scheduler trace, or a scan of every phase."""
        if self.noise_cmd is None:
            return "injector"
        if self.noise_phase_s is not None:
            return "known_phase"
        return "sched_trace" if self.trace else "scan"


@dataclass
class RunRecord:
    index: int
    arm: str  # "clean" or "noisy"
    phase_s: float  # scheduled phase of the injector (a sham one in clean runs)
    started_unix: float
    wall_s: float
    dir: str  # relative to the study directory

    def save(self, path: Path) -> None:
        jsonio.write_atomic(path / RUN_FILE, asdict(self), indent=1)

    @staticmethod
    def load(path: Path) -> RunRecord:
        try:
            data: dict[str, Any] = json.loads((path / RUN_FILE).read_text())
            return RunRecord(**data)
        except (OSError, json.JSONDecodeError, TypeError) as exc:
            raise HushmonError(f"cannot read run record in {path}: {exc}") from exc


def kill_group(proc: subprocess.Popen[Any], grace_s: float = 2.0) -> None:
    """SIGTERM the process group, SIGKILL it if it does not go in grace_s."""
    if proc.poll() is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers of an ended leader
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def set_session_nice(pid: int, nice: int) -> None:
    """Gives the session of pid the niceness `nice` under autogroup scheduling.

    With autogroups (the Linux default on most distributions) every session
    gets an equal share of a CPU whatever its processes' nice values; only
    the group's own niceness (/proc/PID/autogroup) moves it against other
    sessions. Without autogroups the `nice` wrapper of the command does it."""
    path = Path(f"/proc/{pid}/autogroup")
    if nice == 0 or not path.exists():
        return
    try:
        path.write_text(f"{nice}\n")
    except OSError as exc:
        raise HushmonError(f"cannot set niceness {nice} (needs root): {exc.strerror}") from exc


@contextlib.contextmanager
def process_group(
    argv: Sequence[str], out_path: Path, nice: int = 0, gated: bool = False
) -> Iterator[subprocess.Popen[bytes]]:
    """A child in a new session (its own process group), always ended on exit.

    gated: its stdin is a pipe (for a command started by gated_shell that
    waits for one line before it execs)."""
    with out_path.open("wb") as out:
        try:
            proc = subprocess.Popen(
                list(argv), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                stdin=subprocess.PIPE if gated else None,
            )  # fmt: skip
        except OSError as exc:
            raise HushmonError(f"cannot start {argv[0]}: {exc.strerror}") from exc
        try:
            set_session_nice(proc.pid, nice)
            yield proc
        finally:
            kill_group(proc)


def with_nice(nice: int, argv: list[str]) -> list[str]:
    return argv if nice == 0 else ["nice", "-n", str(nice), *argv]


def detector_argv(cfg: DetectorConfig, run_dir: Path) -> list[str]:
    detect = program("hushmon-detect")
    return with_nice(cfg.nice, mpirun_command(
        cfg.nprocs,
        [
            detect,
            "--op", cfg.op,
            "--size", cfg.size,
            *(["--count", str(cfg.count)] if cfg.count else ["--seconds", f"{cfg.seconds:g}"]),
            "--timer", cfg.timer,
            "--events", str(run_dir / EVENTS_FILE),
            "--json", str(run_dir / DETECT_JSON),
        ],
    ))  # fmt: skip


def injector_argv(
    noise: NoiseConfig, phase_s: float, duration_s: float, run_dir: Path, nice: int = 0
) -> list[str]:
    argv = [
        str(program("hushmon-inject")),
        "--level", f"{noise.level_pct:.6g}",
        "--period", f"{noise.period_s:.9g}",
        "--duration", f"{duration_s:.3f}",
        "--shape", noise.shape,
        "--start", "boundary",
        "--phase", f"{phase_s:.9f}",
        "--log", str(run_dir / INJECT_LOG),
        "--json", str(run_dir / INJECT_JSON),
        "--quiet",
    ]  # fmt: skip
    if noise.cpu is not None:
        argv += ["--cpu", str(noise.cpu)]
    return with_nice(nice, argv)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _last_of(text: str) -> str:
    """The last line of a program's output, its own ("hushmon-...") first."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    own = [ln for ln in lines if ln.startswith("hushmon-")]
    return (own or lines or [""])[-1].strip()


def _last_line(path: Path) -> str:
    return _last_of(_read(path))


def hung_run_detail(path: Path) -> str:
    """What the output of a run that did not finish says: the line of a rank
    that failed in MPI_Init (a launch failure, not the program's), else its
    last line; "" when there is nothing."""
    text = _read(path)
    failed = mpi_init_failure(text)
    if failed:
        return f"a rank failed in MPI_Init: {failed}"
    last = _last_of(text)
    return f"its last output: {last}" if last else ""


def gated_shell(cmd: str) -> list[str]:
    """A shell that waits for a line on stdin, then execs cmd (stdin
    /dev/null): its pid is known, and traced, before cmd forks anything."""
    return ["/bin/sh", "-c", 'read -r _ || :; exec /bin/sh -c "$1" </dev/null', "hushmon-gate", cmd]


def release(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(b"go\n")
        proc.stdin.close()


@contextlib.contextmanager
def traced_noise_cmd(
    noise: NoiseConfig, run_dir: Path, nice: int
) -> Iterator[tuple[subprocess.Popen[bytes], list[int]]]:
    """The noise command with its process tree's scheduler events recorded
    from its first instruction; the trace goes to run_dir/sched.trace when
    the block ends (before the command is ended)."""
    from hushmon.noise.schedtrace import TRACE_FILE, SchedTrace, tracefs_root

    root, why = tracefs_root()
    if root is None:
        raise HushmonError(f"scheduler trace unavailable: {why}")
    assert noise.noise_cmd is not None
    argv = with_nice(nice, gated_shell(noise.noise_cmd))
    steady: list[int] = []  # trace_agent_alone appends the end of the start-up
    with (
        SchedTrace(root) as trace,
        process_group(argv, run_dir / NOISE_OUT, nice, gated=True) as proc,
    ):
        trace.follow(proc.pid)
        release(proc)
        yield proc, steady
        trace.save(run_dir / TRACE_FILE, steady[0] if steady else None)


def _check_started(
    proc: subprocess.Popen[bytes], noise_cmd: str, run_dir: Path, warmup_s: float = 0.5
) -> None:
    time.sleep(warmup_s)  # it must survive its start-up to count as running
    if proc.poll() is not None:
        raise HushmonError(
            f"noise command {shlex.quote(noise_cmd)} exited at start "
            f"(exit {proc.returncode}): {_last_line(run_dir / NOISE_OUT)}"
        )


def trace_agent_alone(noise: NoiseConfig, out_dir: Path, seconds: float, nice: int) -> Path:
    """The agent alone under the trace for `seconds` (after its start-up,
    noise.warmup_s, as in a noisy run): the template of the clean runs' sham
    windows (same number, widths and spacing of bursts)."""
    from hushmon.noise.schedtrace import TRACE_FILE

    assert noise.noise_cmd is not None
    out_dir.mkdir(parents=True, exist_ok=True)
    with traced_noise_cmd(noise, out_dir, nice) as (proc, steady):
        _check_started(proc, noise.noise_cmd, out_dir, noise.warmup_s)
        steady.append(time.time_ns())
        time.sleep(seconds)
    return out_dir / TRACE_FILE


def run_detector(cfg: DetectorConfig, run_dir: Path, timeout_s: float) -> None:
    out = run_dir / "detect.txt"
    with process_group(detector_argv(cfg, run_dir), out, cfg.nice) as proc:
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            detail = hung_run_detail(out)
            raise HushmonError(
                f"hushmon-detect did not finish in {timeout_s:.0f} s"
                + (f" ({detail})" if detail else "")
            ) from exc
    if rc != 0:
        raise HushmonError(f"hushmon-detect failed (exit {rc}): {_last_line(out)}")
    try:
        summary = json.loads((run_dir / DETECT_JSON).read_text())
    except (OSError, ValueError):
        return  # reading the run later says what is wrong with the file
    nprocs = summary.get("nprocs") if isinstance(summary, dict) else None
    check_process_count("hushmon-detect", cfg.nprocs, nprocs if isinstance(nprocs, int) else None)


def one_run(
    index: int,
    arm: str,
    phase_s: float,
    detector: DetectorConfig,
    noise: NoiseConfig,
    expected_s: float,
    study_dir: Path,
) -> RunRecord:
    """Runs the detector once, with the noise source beside it in noisy runs.

    Files of the run go to study_dir/runs/NNNN-ARM/."""
    rel = Path("runs") / f"{index:04d}-{arm}"
    run_dir = study_dir / rel
    run_dir.mkdir(parents=True, exist_ok=True)
    timeout_s = 3 * expected_s + 60
    started = time.time()
    t0 = time.monotonic()
    with contextlib.ExitStack() as stack:
        if arm == "noisy" and noise.noise_cmd is not None:
            if noise.trace:
                proc, _ = stack.enter_context(traced_noise_cmd(noise, run_dir, detector.nice))
            else:
                argv = with_nice(detector.nice, ["/bin/sh", "-c", noise.noise_cmd])
                proc = stack.enter_context(process_group(argv, run_dir / NOISE_OUT, detector.nice))
            _check_started(proc, noise.noise_cmd, run_dir, noise.warmup_s)
        elif noise.noise_cmd is None:
            # Clean runs get a sham agent: the injector at level 0 (it never
            # wakes), started the same way, so whatever its mere presence does
            # is in both arms and only the load differs.
            sham = noise if arm == "noisy" else replace(noise, level_pct=0.0)
            duration = timeout_s + 2 * noise.period_s  # ended when the detector ends
            proc = stack.enter_context(
                process_group(
                    injector_argv(sham, phase_s, duration, run_dir, detector.nice),
                    run_dir / "inject.txt",
                    detector.nice,
                )
            )
        run_detector(detector, run_dir, timeout_s)
        if noise.noise_cmd is None:
            # End the injector now (it writes its log on SIGTERM) and check it ran.
            kill_group(proc)
            if proc.returncode not in (0, -signal.SIGTERM):
                raise HushmonError(
                    f"hushmon-inject failed (exit {proc.returncode}): "
                    f"{_last_line(run_dir / 'inject.txt')}"
                )
    record = RunRecord(index, arm, phase_s, started, time.monotonic() - t0, str(rel))
    record.save(run_dir)
    return record
