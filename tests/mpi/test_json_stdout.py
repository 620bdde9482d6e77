"""``--json -`` leaves stdout to JSON alone: every ``hushmon`` command and
every C program that takes ``--json`` writes exactly one JSON document on
stdout, and its lines for people (verdicts, tables, paths, the monitored
job's own output) on stderr, so ``| jq`` and ``json.loads`` work.

Both tests are driven by what exists, not by a list kept by hand: the
commands come from the command table (``hushmon.commands.COMMANDS`` and the
subcommands under each), the programs from the build's bin folder. A command
or program without a case below fails, so a new one cannot be forgotten.
Settings are the smallest that still run the real thing (2 ranks). The
commands run in this process (their heavy imports paid once) with file
descriptors 1 and 2 captured, so what their child processes write counts
as it would in a pipe."""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from mpirun_types import MpiRun

from hushmon import cli
from hushmon.commands import COMMANDS
from hushmon.paths import build_bin_dir

pytestmark = pytest.mark.mpi

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SPOOL = FIXTURES / "spool" / "butterfly-1node"  # job bf1
BED_SPOOL = FIXTURES / "spool" / "testbed-4n2r"  # Slurm jobs 6, 7: matmul on 1 and 2 nodes
JSON = ["--json", "-"]
# hushmon-bench: small stages and caps (as in test_bench.py)
BENCH_FAST = [
    "--stage-launches", "4", "--warmup-launches", "2", "--min-valid", "3",
    "--max-valid", "6", "--max-total", "12", "--loop-iters", "4", "--bcast-probes", "3",
    "--sync-rounds", "20",
]  # fmt: skip
# hushmon noise: short runs, nice 0 (a test must not push other work aside)
NOISE_FAST = ["--run-seconds", "0.2", "--seed", "1", "--nice", "0", "--no-report"]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


# Commands with subcommands that also do their own work when given none
# (`hushmon serve` serves; `serve token` and `serve index` are its tools).
RUN_WITHOUT_SUBCOMMAND = {"serve"}


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command a user can run, from the table: 'noise detect', 'digest', ..."""
    top = _subcommands(cli.build_parser())
    out: dict[str, argparse.ArgumentParser] = {}
    for name, _module in COMMANDS:
        subs = _subcommands(top[name])
        out.update({f"{name} {s}": p for s, p in subs.items()})
        if not subs or name in RUN_WITHOUT_SUBCOMMAND:
            out[name] = top[name]
    return out


def takes_json(parser: argparse.ArgumentParser) -> bool:
    return any("--json" in action.option_strings for action in parser._actions)


class Work:
    """The temporary folder the cases share, and the inputs some of them
    build on: each made once, on first use, whatever order the cases run in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.capfd: pytest.CaptureFixture[str] | None = None  # the running test's
        self._store: Path | None = None
        self._runs: dict[tuple[str, ...], subprocess.CompletedProcess[str]] = {}

    def path(self, name: str) -> Path:
        return self.root / name

    def hushmon(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """``hushmon ARGV`` with what reached file descriptors 1 and 2 (ours
        and our children's); the same ARGV runs once."""
        key = tuple(argv)
        if key not in self._runs:
            assert self.capfd is not None
            self.capfd.readouterr()
            sigterm = signal.getsignal(signal.SIGTERM)  # 'hushmon noise' takes it over
            try:
                code = cli.main(argv)
            except SystemExit as exc:  # argparse: bad usage
                code = exc.code if isinstance(exc.code, int) else 2
            finally:
                if sigterm is not None:
                    signal.signal(signal.SIGTERM, sigterm)
            out, err = self.capfd.readouterr()
            self._runs[key] = subprocess.CompletedProcess(argv, code, out, err)
        return self._runs[key]

    def spool_copy(self, name: str, spool: Path = SPOOL) -> Path:
        """A data folder whose spool holds a fixture's jobs (bf1), not ingested."""
        data = self.root / name
        shutil.copytree(spool, data / "spool")
        return data

    def bed_store(self) -> Path:
        """A data folder with the test bed's jobs in its store (for compare)."""
        from hushmon.store.ingest import ingest_spool

        data = self.root / "bed-store"
        if not data.exists():
            self.spool_copy("bed-store", BED_SPOOL)
            ingest_spool(data / "hushmon.duckdb", data / "spool")
        return data

    def store(self) -> Path:
        """A data folder with job bf1 in its store."""
        if self._store is None:
            from hushmon.store.ingest import ingest_spool

            data = self.spool_copy("store")
            ingest_spool(data / "hushmon.duckdb", data / "spool")
            self._store = data
        return self._store

    def lake(self) -> Path:
        """A data folder with an empty lake (the collectors' store)."""
        data = self.root / "lake"
        if not data.exists():
            from hushmon.store.schema import open_store

            open_store(data / "hushmon.lake").close()
        return data

    def noise_study(self) -> Path:
        """The results folder of the 'noise detect' case (for 'noise report')."""
        r = self.hushmon(noise_detect(self))
        assert r.returncode == 0, r.stderr
        return self.path("detect")


@dataclass(frozen=True)
class Call:
    """One run of a command with ``--json -``."""

    argv: Callable[[Work], list[str]]
    human: str  # what a person is told: expected on stderr
    exit_codes: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class NoJson:
    """A command without --json, and why (its stdout is its product)."""

    why: str


@dataclass(frozen=True)
class NotRunHere:
    """A command with --json that this test must not run, and why."""

    why: str


def bench_run(w: Work) -> list[str]:
    return ["bench", "--np", "2", "--op", "barrier", "--size", "8", "--method", "sync",
            "--out", str(w.path("bench")), *JSON, "--", *BENCH_FAST]  # fmt: skip


def bench_report(w: Work) -> list[str]:
    fixture = FIXTURES / "bench" / "minimal.json"
    return ["bench", "report", str(fixture), "--html", str(w.path("bench.html")), *JSON]


def noise_calibrate(w: Work) -> list[str]:
    return ["noise", "calibrate", "--ops", "barrier", "--sizes", "2K", "--runs", "2",
            "--run-seconds", "0.2", "--nice", "0", "--no-report",
            "--out", str(w.path("calibrate")), *JSON]  # fmt: skip


def noise_detect(w: Work) -> list[str]:
    return ["noise", "detect", "--level", "1", "--budget", "1",
            "--out", str(w.path("detect")), *NOISE_FAST, *JSON]  # fmt: skip


def noise_sweep(w: Work) -> list[str]:
    return ["noise", "sweep", "--levels", "1", "--budget", "1", "--aa-replays", "10",
            "--out", str(w.path("sweep")), *NOISE_FAST, *JSON]  # fmt: skip


def noise_report(w: Work) -> list[str]:
    return ["noise", "report", str(w.noise_study()), *JSON]


def ingest(w: Work) -> list[str]:
    return ["ingest", "--data-dir", str(w.spool_copy("ingest")), *JSON]


def ingest_list(w: Work) -> list[str]:
    return ["ingest", "--data-dir", str(w.path("ingest")), "--list", *JSON]


def ingest_export(w: Work) -> list[str]:
    return ["ingest", "--data-dir", str(w.path("ingest")), "--export", "bf1",
            "--format", "csv", *JSON]  # fmt: skip


def run(w: Work) -> list[str]:
    return ["run", "--data-dir", str(w.path("run")), "--period", "100", "--no-digest",
            *JSON, "--", "sh", "-c", "echo the job speaks"]  # fmt: skip


def digest(w: Work) -> list[str]:
    return ["digest", "bf1", "--data-dir", str(w.store()), *JSON]


def tag(w: Work) -> list[str]:
    return ["tag", "bf1", "--data-dir", str(w.store()), *JSON]


def job(w: Work) -> list[str]:
    data = w.store()
    if not (data / "reports" / "bf1" / "digest.json").exists():
        from hushmon.digest.build import build_digest

        build_digest(data / "hushmon.duckdb", "bf1", data / "reports" / "bf1")
    return ["job", "bf1", "--from", "store", "--data-dir", str(data), *JSON]


def export_cc(w: Work) -> list[str]:
    return ["export", "6", "--cc-archive", str(w.path("cc-archive")),
            "--data-dir", str(w.bed_store()), *JSON]  # fmt: skip


def compare(w: Work) -> list[str]:
    return ["compare", "6@1", "7@2", "--data-dir", str(w.bed_store()), *JSON]


def overhead(w: Work) -> list[str]:
    return ["overhead", "--kernels", "ep", "--runs", "1", "--modes", "none,hushmon",
            "--settle-s", "0.2", "--out", str(w.path("overhead")), *JSON]  # fmt: skip


def probe(w: Work) -> list[str]:
    # small arrays and short kernels: the JSON's shape is checked, not the figures
    return ["probe", "--seconds", "0.1", "--array-mib", "8",
            "--data-dir", str(w.path("probe-data")), *JSON]  # fmt: skip


def store_status(w: Work) -> list[str]:
    return ["store", "status", "--data-dir", str(w.store()), *JSON]


def store_status_lake(w: Work) -> list[str]:
    return ["store", "status", "--data-dir", str(w.lake()), *JSON]


def store_policy(w: Work) -> list[str]:
    return ["store", "policy", "--data-dir", str(w.lake()), "--raw-days", "7", *JSON]


def store_compact(w: Work) -> list[str]:
    return ["store", "compact", "--data-dir", str(w.lake()), *JSON]


def bed_status(_w: Work) -> list[str]:
    return ["testbed", "status", *JSON]


# Every command of the table; several calls where a command has several modes.
CASES: dict[str, list[Call] | NoJson | NotRunHere] = {
    "bench": [Call(bench_run, "report: "), Call(bench_report, "report: ")],
    "noise calibrate": [Call(noise_calibrate, "best: barrier 2K")],
    "noise detect": [Call(noise_detect, "noise level 1 %: ")],
    "noise sweep": [Call(noise_sweep, "A/A false-positive rate")],
    "noise report": [Call(noise_report, "report: ")],
    # in order: load, then list and export what was loaded
    "ingest": [
        Call(ingest, "ingested"),
        Call(ingest_list, "bf1\t"),
        Call(ingest_export, "exported "),
    ],
    "run": [Call(run, "the job speaks")],  # the job's own stdout is for people too
    "digest": [Call(digest, "job bf1: ")],
    "compare": [Call(compare, "compared 2 runs")],
    "tag": [Call(tag, "jobs tagged")],
    "export": [Call(export_cc, "exported 1 job(s)")],
    "job": [Call(job, "Job ID: bf1")],
    "alert": NotRunHere("needs a NATS server and the reducers: tests/transport/test_alert.py"),
    "overhead": [Call(overhead, "report: ")],
    "probe": [Call(probe, "stored in ")],
    "store status": [Call(store_status, "(embedded)"), Call(store_status_lake, "(lake)")],
    "store policy": [Call(store_policy, "policy set: raw 7 days")],
    "store compact": [Call(store_compact, "compacted ")],
    # read-only; exit 1 when a bed on this machine is damaged or left over
    "testbed status": [Call(bed_status, "test bed", exit_codes=(0, 1))],
    "testbed up": NotRunHere(
        "builds namespaces, cgroups and Slurm as root and replaces any bed that is up"
    ),
    "testbed restart": NoJson("restarts one daemon of the bed; says so on stderr"),
    "testbed down": NoJson("removes the bed; says so on stderr"),
    # Both need a NATS server with the streams: tests/transport runs them
    # with --json - against a real one (test_collect, test_transport_status).
    "collect": NotRunHere("needs a NATS server with the streams: tests/transport/test_collect.py"),
    "transport status": NotRunHere(
        "needs a NATS server and a collected store: tests/transport/test_transport_status.py"
    ),
    # Need a running agent (and NATS for many): tests/transport/test_ctl.py
    # runs both with --json - against a real agent and server.
    "ctl set": NotRunHere("needs a running agent: tests/transport/test_ctl.py"),
    "ctl status": NotRunHere("needs a running agent: tests/transport/test_ctl.py"),
    "ctl app": NotRunHere("needs an agent and programs: tests/python/test_libhushmon_control.py"),
    "testbed exec": NoJson("stdout is the command's on the node"),
    "testbed env": NoJson("stdout is shell exports to eval"),
    # live views of NATS (tests/transport/test_live_top.py, test_live_serve.py)
    "top": NoJson("stdout is the terminal view (--once: one frame of text)"),
    "serve": NoJson("serves a web page; says where on stderr"),
    "serve token": NoJson("stdout is the new token, printed once for the user"),
    "serve index": NoJson("a timer's job: says on stderr what it recorded"),
    # its answer is Prometheus' text format (--once prints one on stdout);
    # tests/transport/test_metrics_prometheus.py runs it against real servers
    "metrics": NoJson("stdout is the Prometheus / OpenMetrics text format"),
}


def assert_one_json_document(
    r: subprocess.CompletedProcess[str], human: str, exit_codes: tuple[int, ...] = (0,)
) -> None:
    assert r.returncode in exit_codes, r.stderr
    try:
        doc = json.loads(r.stdout)  # exactly one document: anything more is "Extra data"
    except json.JSONDecodeError as exc:
        pytest.fail(f"stdout is not one JSON document ({exc}):\n{r.stdout[:2000]}")
    assert isinstance(doc, dict) and doc
    assert human in r.stderr, f"'{human}' not on stderr:\n{r.stderr}"
    assert "Traceback" not in r.stderr


@pytest.fixture(scope="module")
def module_work(tmp_path_factory: pytest.TempPathFactory) -> Work:
    return Work(tmp_path_factory.mktemp("json-stdout"))


@pytest.fixture
def work(
    module_work: Work, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Work:
    monkeypatch.setenv("HUSHMON_DATA", str(module_work.path("default-data")))
    module_work.capfd = capfd
    return module_work


@pytest.mark.parametrize("command", sorted(command_parsers()))
def test_command_json_stdout_is_one_document(command: str, work: Work) -> None:
    assert command in CASES, f"'hushmon {command}' has no case in {__name__}.CASES"
    case = CASES[command]
    parser = command_parsers()[command]
    if isinstance(case, NoJson):
        assert not takes_json(parser), f"'hushmon {command}' takes --json now: give it a case"
        return
    assert takes_json(parser), f"'hushmon {command}' has no --json"
    if isinstance(case, NotRunHere):
        pytest.skip(case.why)
    for call in case:
        argv = call.argv(work)
        at = argv.index("--json")
        assert argv[at + 1] == "-"
        assert_one_json_document(work.hushmon(argv), call.human, call.exit_codes)


def test_cases_name_only_commands_of_the_table() -> None:
    assert set(CASES) == set(command_parsers())


# Every program in the bin folder: how to run it with --json - (ranks, or
# None without mpirun; arguments; what it tells people), or why it has no --json.
PROGRAM_CASES: dict[str, tuple[int | None, list[str], str]] = {
    "hushmon-bench": (2, ["--op", "barrier", "--sizes", "8", *BENCH_FAST], "# timer "),
    "hushmon-detect": (
        2,
        ["--op", "barrier", "--count", "2000", "--warmup", "100", "--block", "100"],
        "hushmon-detect: barrier",
    ),
    "hushmon-inject": (
        None,
        ["--level", "1", "--period", "0.1", "--duration", "0.3", "--start", "now"],
        "hushmon-inject: ",
    ),
    **{
        app: (
            2,
            ["--length", "1K", "--cycles", "1", "--rounds", "10", "--compute-ms", "0"],
            f"{app}: 2 ranks",
        )
        for app in ("butterfly", "snake", "master")
    },
    "matmul": (2, ["--size", "64", "--repeat", "1"], "matmul: 2 ranks"),
    **{
        kernel: (2, ["--class", "S"], f"{kernel}: 2 ranks")
        for kernel in ("ep", "is", "cg", "mg", "ft", "lu")
    },
    "hushmon-probe": (
        None,
        ["--seconds", "0.1", "--array-mib", "8"],
        "triad: ",
    ),
    "phases": (
        2,
        [
            "--phase-s",
            "0.1",
            "--solve-n",
            "64",
            "--transpose-bytes",
            "4K",
            "--table-bytes",
            "1M",
            "--updates",
            "1K",
        ],
        "phases: 2 ranks",
    ),
    "outofcore": (
        2,
        ["--data", "1M", "--memory", "256K", "--passes", "1", "--no-fsync", "--dir", "{tmp}"],
        "outofcore: 2 ranks",
    ),
}
NO_JSON = {
    "hushmon-agent": "line protocol to its sinks (--once --sink stdout for a look)",
    "hushmon-reduce": "a daemon: summaries go to NATS, its counters to stderr",
    "hushmon-loadgen": "bench/bench_reduce.py's load generator; the script prints the figures",
    "nats_publish_cost": "bench/bench_nats_publish.py's micro benchmark; the script prints them",
    "nvml_call_cost": "a micro benchmark of NVML calls on a GPU node; a table for docs/agent.md",
}


def programs() -> list[str]:
    folder = build_bin_dir()
    names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    return names or ["(bin folder missing or empty: build first)"]


@pytest.mark.parametrize("name", programs())
def test_program_json_stdout_is_one_document(
    name: str, bin_dir: Path, mpirun: MpiRun, tmp_path: Path
) -> None:
    exe = bin_dir / name
    assert exe.is_file(), name
    usage = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    if name in NO_JSON:
        assert "--json" not in usage.stdout, f"{name} takes --json now: give it a case"
        return
    assert "--json" in usage.stdout, f"{name} --help does not offer --json"
    assert name in PROGRAM_CASES, f"{name} has no case in {__name__}.PROGRAM_CASES"
    nprocs, args, human = PROGRAM_CASES[name]
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args] + JSON
    if nprocs is None:
        r = subprocess.run(
            [str(exe), *argv], capture_output=True, text=True, timeout=120, check=False
        )
    else:
        r = mpirun(nprocs, name, *argv)
    assert_one_json_document(r, human)
