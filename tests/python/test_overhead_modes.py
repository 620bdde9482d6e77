"""Each monitoring mode of hushmon overhead really runs its agent: started
with a private config under the work folder, producing data at the period,
and gone after stop(). A mode whose package is missing here is skipped."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from waiting import wait_until

from hushmon.overhead.execute import AgentUsage
from hushmon.overhead.modes import MODES, get
from hushmon.overhead.modes.base import Processes
from hushmon.procstat import pid_cpu_s, process_cpu_s, rss_kib

PERIOD_S = 0.5


def start(name: str, work: Path) -> Processes:
    mode = get(name)
    why = mode.missing()
    if why:
        pytest.skip(why)
    procs = mode.start(work, PERIOD_S)
    assert isinstance(procs, Processes)
    return procs


def files_under(folder: Path) -> list[Path]:
    return [f for f in folder.rglob("*") if f.is_file() and f.stat().st_size > 0]


def test_every_mode_is_registered_and_described() -> None:
    for name in MODES:
        mode = get(name)
        assert mode.name == name and mode.description


def test_none_starts_nothing(tmp_path: Path) -> None:
    procs = start("none", tmp_path)
    assert procs.procs == []
    procs.stop()


@pytest.mark.parametrize("name", ["hushmon", "hushmon_pmu"])
def test_agent_writes_samples_and_stops(name: str, tmp_path: Path) -> None:
    procs = start(name, tmp_path)
    wanted = ["cpu,host="] + (["pmu,"] if name == "hushmon_pmu" else [])

    def spool() -> str:
        return "".join(f.read_text(errors="replace") for f in files_under(tmp_path / "spool"))

    try:
        # samples while it runs (the counters too, simulated where there is no
        # PMU), however long a loaded machine makes the first periods
        wait_until(lambda: all(w in spool() for w in wanted), f"{name}: {wanted} in the spool")
        assert all(p.poll() is None for p in procs.procs)
        assert procs.cpu_s() > 0  # at least its start-up and a few samples
    finally:
        procs.stop()
    assert all(p.returncode is not None for p in procs.procs)
    assert all(w in spool() for w in wanted)


def test_node_exporter_is_scraped_each_period(tmp_path: Path) -> None:
    procs = start("node_exporter", tmp_path)
    started_s = time.monotonic()
    try:
        # 3 scrapes however slow the machine; never more than one a period
        # (+2 for the edges of the window): the bug would be a scraper that
        # does not wait for its period
        wait_until(lambda: procs.counters["scrapes"]() >= 3, "3 scrapes")
        scrapes = procs.counters["scrapes"]()
        most = (time.monotonic() - started_s) / PERIOD_S + 2
        scraper_cpu_s = procs.extra_cpu_s[0]()
        assert procs.cpu_s() >= scraper_cpu_s > 0
    finally:
        procs.stop()
    assert 3 <= scrapes <= most and procs.counters["failures"]() == 0
    assert all(p.returncode is not None for p in procs.procs)


def test_collectd_writes_values(tmp_path: Path) -> None:
    procs = start("collectd", tmp_path)

    def names() -> set[str]:
        return {f.parent.name for f in files_under(tmp_path / "csv")}

    try:
        wait_until(
            lambda: any(n.startswith("cpu-") for n in names()) and "load" in names(),
            "collectd's cpu-* and load values",
        )
    finally:
        procs.stop()
    assert all(p.returncode is not None for p in procs.procs)


def test_pcp_logs_an_archive(tmp_path: Path) -> None:
    procs = start("pcp", tmp_path)

    def archive() -> list[Path]:
        return [f for f in tmp_path.glob("archive.*") if f.suffix not in (".index", ".meta")]

    try:
        wait_until(lambda: archive() and archive()[0].stat().st_size > 0, "pmlogger's archive")
    finally:
        procs.stop()
    assert archive() and archive()[0].stat().st_size > 0
    assert all(p.returncode is not None for p in procs.procs)


def test_process_cpu_s_reads_utime_and_stime_after_the_name(tmp_path: Path) -> None:
    # A command name with spaces and a ')' must not shift the fields.
    stat = tmp_path / "stat"
    fields = ["S"] + ["0"] * 10 + ["250", "50"] + ["0"] * 30
    stat.write_text("4242 (odd) name) " + " ".join(fields) + "\n")
    ticks = os.sysconf("SC_CLK_TCK")
    assert process_cpu_s(str(stat)) == pytest.approx(300 / ticks)
    assert process_cpu_s(str(tmp_path / "gone")) == 0.0


def test_pid_cpu_s_counts_this_process_in_nanoseconds() -> None:
    before = pid_cpu_s(os.getpid())
    t0 = time.thread_time()
    while time.thread_time() - t0 < 0.02:
        pass
    assert pid_cpu_s(os.getpid()) - before >= 0.015


def test_rss_kib_grows_with_touched_memory_and_is_0_once_gone() -> None:
    before = rss_kib(os.getpid())
    block = b"x" * (64 << 20)  # every page written (calloc would leave them unmapped)
    assert rss_kib(os.getpid()) - before >= 60 << 10
    del block
    child = subprocess.Popen(["true"])
    child.wait()
    assert rss_kib(child.pid) == 0


def test_a_daemon_that_exits_is_reported(tmp_path: Path) -> None:
    import subprocess

    procs = Processes([subprocess.Popen(["sh", "-c", "exit 3"])])
    procs.procs[0].wait()
    assert procs.dead() == "sh exited with code 3"
    assert procs.cpu_s() == 0.0  # a dead process is not read


def test_an_agent_up_under_5_periods_gets_a_note_not_a_figure_taken_at_face_value() -> None:
    # Two class S runs can fit inside one 1 s period: the agent may not wake
    # at all and its CPU reads 0.
    short = AgentUsage("hushmon", starts=2, up_s=1.6, cpu_s=0.0)
    note = short.too_short_note(1.0)
    assert note is not None and note.startswith("hushmon: its CPU use was measured over 1.6 s")
    assert "under 5 sampling periods of 1 s" in note
    assert AgentUsage("hushmon", starts=2, up_s=1.6, cpu_s=0.01).too_short_note(0.1) is None
