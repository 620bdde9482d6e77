"""Issue 12's "what it must show" on a live bed (2 nodes in 2 racks,
Slurm, ``--transport nats``): an MPI program calling libhushmon every
cycle (butterfly's ``cycle_time_s``, c/apps/app_exchange.c) runs as a
Slurm job; while it runs its metric is in ``hushmon top --once`` and in
``hushmon serve``'s event stream (the page's feed), ``hushmon ctl set
period=100ms --job N`` is acknowledged by every node of the job within
2 s, and afterwards the job's digest has the metric (app_timeline) and the
store shows the period change in the job's samples. Real parts throughout:
the agents' app channel and nats sink, leaves, hub, reducers, collector.

One job is run once for the module (the fixture records what each view
showed); each test checks one part, so a failure names the broken part.
The figures as a demo: bench/demo_live_bed.py."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from bedlib import HUSHMON, bed_unavailable, bed_up

from hushmon.paths import REPO_ROOT, build_bin_dir
from hushmon.testbed import livecheck, transport
from hushmon.testbed.state import load
from hushmon.transport.natsserver import free_port

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

METRIC = "cycle_time_s"
RANKS = 2
ACK_LIMIT_S = 2.0
# 16 cycles of 1 s: the metric reaches the views (a cycle, the reducers'
# graces) and the new period is seen for several seconds before the end.
APP = ["--cycles", "16", "--comm-ms", "300", "--compute-ms", "700", "--length", "64K"]


@dataclass
class Observed:
    job: str = ""
    nodes: list[str] = field(default_factory=list)
    top: livecheck.AppRow | None = None
    top_frame: str = ""
    serve: livecheck.AppRow | None = None
    ctl: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    run_stderr: str = ""
    periods: list[livecheck.PeriodSeen] = field(default_factory=list)


def _unavailable() -> str | None:
    reason = bed_unavailable()
    if reason:
        return reason
    if shutil.which("nats-server") is None:
        return "nats-server is not installed (scripts/install-deps.sh)"
    if not (build_bin_dir() / "butterfly").exists():
        return f"{build_bin_dir() / 'butterfly'} is not built"
    return None


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    options = ("--nodes", "2", "--racks", "2", "--transport", "nats")
    with bed_up(*options) as (info, data):
        bed = load()
        assert bed is not None
        hub = str(info["transport"]["hub_url"])
        port = free_port()
        serve_log = tmp_path_factory.mktemp("serve") / "serve.log"
        token_file, token = livecheck.serve_token(serve_log.parent)
        with serve_log.open("w") as log:
            serve = subprocess.Popen(
                [*HUSHMON, "serve", "--url", hub, "--port", str(port), "--history-s", "0",
                 "--token-file", str(token_file)],
                cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, **transport.client_env()},  # the bed's NATS is TLS
            )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        run = subprocess.Popen(
            [*HUSHMON, "run", "--data-dir", str(data), "--json", "-", "--",
             "srun", "-N", "2", str(build_bin_dir() / "butterfly"), *APP],
            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        seen = Observed()
        try:
            found = livecheck.running_job(0, 60)
            assert found is not None, "the Slurm job did not start within 60 s"
            seen.job, seen.nodes = found
            # A cycle is 1 s, the agents' period 1 s: a frame can hold one
            # rank's value only, so wait for one that holds both.
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                row, frame = livecheck.top_app(hub, seen.job, METRIC)
                if row is not None or seen.top is None:
                    seen.top, seen.top_frame = row, frame
                if seen.top is not None and seen.top.ranks == RANKS:
                    break
            seen.ctl = livecheck.ctl_set(hub, seen.job, "period=100ms")
            assert livecheck.wait_http(base, token, 10), f"hushmon serve: {serve_log.read_text()}"
            seen.serve = livecheck.serve_app(base, token, seen.job, METRIC, 8, RANKS)
            out, seen.run_stderr = run.communicate(timeout=240)
            seen.run = json.loads(out) if run.returncode == 0 else {}
            seen.periods = livecheck.periods_seen(bed, seen.job, seen.ctl["sent_ns"])
            yield seen
        finally:
            for proc in (run, serve):
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(timeout=10)


def test_the_metric_is_in_top(observed: Observed) -> None:
    assert observed.top is not None, f"no {METRIC} in top's frame:\n{observed.top_frame}"
    # both ranks report it; a cycle is 0.3 s of messages + 0.7 s of compute
    assert observed.top.ranks == RANKS
    assert 0.9 <= observed.top.min <= observed.top.max < 5.0


def test_the_metric_is_in_the_live_page_feed(observed: Observed) -> None:
    assert observed.serve is not None, f"no {METRIC} of job {observed.job} in 8 events"
    assert observed.serve.ranks == RANKS and 0.9 <= observed.serve.avg < 5.0


def test_ctl_set_period_is_acknowledged_by_every_node_of_the_job(observed: Observed) -> None:
    ctl = observed.ctl
    assert observed.nodes == ["n1", "n2"]
    assert ctl["exit_code"] == 0 and not ctl["broadcast"], ctl
    acks = livecheck.acks(ctl)
    assert sorted(acks) == observed.nodes, ctl
    for host, (ok, period_ms, took_s) in acks.items():
        assert ok and period_ms == "100", (host, ctl)
        assert took_s < ACK_LIMIT_S, f"{host} acknowledged after {took_s:.2f} s"


def test_the_new_period_is_in_the_data(observed: Observed) -> None:
    """The job's samples per node: 1 s apart before the command, 100 ms
    apart from a second after it (the agents' own timestamps, as stored)."""
    seen = {p.host: p for p in observed.periods}
    assert sorted(seen) == observed.nodes, observed.periods
    for p in seen.values():
        assert p.n_before >= 2 and p.n_after >= 10, p
        assert math.isclose(p.before_ms, 1000, rel_tol=0.05), p
        assert math.isclose(p.after_ms, 100, rel_tol=0.05), p


def test_the_metric_is_in_the_digest(observed: Observed) -> None:
    assert observed.run, f"hushmon run failed: {observed.run_stderr[-2000:]}"
    assert observed.run["job"] == observed.job
    evidence = livecheck.digest_app(observed.run["digest"]["json"], METRIC)
    assert evidence is not None, "no app_timeline finding for " + METRIC
    assert evidence["periods"] >= 8 and 0.9 <= evidence["median"] < 5.0
    report = Path(observed.run["digest"]["report"]).read_text()
    assert "Application timeline (libhushmon)" in report and METRIC in report
