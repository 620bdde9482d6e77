"""The live path of issue 12 on a NATS bed, as a user sees it: a Slurm
job's application metric (libhushmon) in `hushmon top`, in `hushmon
serve`'s event stream and in the job's digest; `hushmon ctl set ... --job
N` acknowledged by each node of the job; the sampling period in the store
before and after. Shared by tests/testbed/test_live_bed.py (checks) and
bench/demo_live_bed.py (figures); every step runs the CLI or reads what it
wrote, nothing is asked of the daemons directly."""

from __future__ import annotations

import itertools
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hushmon.paths import REPO_ROOT
from hushmon.store.schema import open_store_readonly
from hushmon.testbed import transport
from hushmon.testbed.state import Bed

HUSHMON = [sys.executable, "-m", "hushmon.cli"]


def cli(
    *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`hushmon ARGS` from the repository, output captured; env adds to this
    process's, and so do the bed's NATS TLS files while a NATS bed has them
    (its servers take TLS clients only)."""

    bed_tls = transport.client_env() if transport.tls_dir().is_dir() else {}
    return subprocess.run(
        [*HUSHMON, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO_ROOT,
        env={**os.environ, **bed_tls, **(env or {})},
    )


def running_job(newer_than: int, timeout_s: float) -> tuple[str, list[str]] | None:
    """The first running Slurm job with an id above ``newer_than``: (id, its nodes)."""
    from hushmon.transport.slurmjob import job_nodes

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["squeue", "-h", "-t", "RUNNING", "-o", "%i"],
            capture_output=True,
            text=True,
            check=False,
        )
        ids = [int(w) for w in out.stdout.split() if w.isdigit() and int(w) > newer_than]
        if ids:
            job = str(min(ids))
            nodes = job_nodes(job)
            if nodes:
                return job, nodes
        time.sleep(0.2)
    return None


def job_running(job: str) -> bool:
    """Slurm still lists ``job`` as running (not completing: its nodes'
    epilogs may have told the agents it ended)."""
    out = subprocess.run(
        ["squeue", "-h", "-j", job, "-t", "RUNNING", "-o", "%i"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() == job


@dataclass
class AppRow:
    """One application metric as a view shows it: over ranks."""

    name: str
    ranks: int
    min: float
    avg: float
    max: float


def top_app(url: str, job: str, metric: str) -> tuple[AppRow | None, str]:
    """`hushmon top --once --job JOB`: the metric's row of the frame's
    application table (None when absent), and the frame."""
    r = cli("top", "--url", url, "--once", "--job", job, timeout=30)
    frame = r.stdout if r.returncode == 0 else r.stderr
    in_app = False
    for line in frame.splitlines():
        words = line.split()
        if line.strip().startswith("application metrics"):
            in_app = True
        elif in_app and len(words) == 5 and words[0] == metric:
            try:
                return AppRow(metric, int(words[1]), *(float(w) for w in words[2:5])), frame
            except ValueError:
                return None, frame
    return None, frame


def serve_token(folder: Path) -> tuple[Path, str]:
    """A token for `hushmon serve --token-file FILE` (mode 0600): the file and the token."""
    token = secrets.token_urlsafe(32)
    path = folder / "serve.token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path, token


def _request(url: str, token: str) -> urllib.request.Request:
    return urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})


def wait_http(base_url: str, token: str, timeout_s: float) -> bool:
    """True once ``base_url``/state answers (`hushmon serve` is listening)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(_request(f"{base_url}/state", token), timeout=2):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def serve_app(
    base_url: str, token: str, job: str, metric: str, events: int, ranks: int = 1
) -> AppRow | None:
    """The metric in `hushmon serve`'s server-sent events (the page's feed):
    the first of ``events`` snapshots (one a second) whose job holds it from
    at least ``ranks`` ranks, else the last one that held it at all. (A
    metric reported once a cycle can miss a one-second snapshot on one rank.)"""
    seen: AppRow | None = None
    request = _request(f"{base_url}/events?max={events}", token)
    with urllib.request.urlopen(request, timeout=events + 10) as resp:
        for raw in resp:
            line = raw.decode(errors="replace").strip()
            if not line.startswith("data: "):
                continue
            snap = json.loads(line[len("data: ") :])
            if not isinstance(snap, dict):
                continue
            for j in snap.get("jobs", []):
                if j.get("job") != job:
                    continue
                for a in j.get("app", []):
                    if a.get("name") == metric:
                        seen = AppRow(metric, a["ranks"], a["min"], a["avg"], a["max"])
                        if seen.ranks >= ranks:
                            return seen
    return seen


def ctl_set(url: str, job: str, *settings: str, timeout_s: float = 3.0) -> dict[str, Any]:
    """`hushmon ctl set SETTINGS --job JOB --url URL --json -`: its JSON,
    with ``exit_code`` and ``sent_ns`` (wall clock when it was started)."""
    sent_ns = time.time_ns()
    r = cli("ctl", "set", *settings, "--job", job, "--url", url, "--timeout", str(timeout_s),
            "--json", "-")  # fmt: skip
    try:
        out: dict[str, Any] = json.loads(r.stdout)
    except ValueError:
        out = {"answers": [], "error": r.stderr.strip()}
    out["exit_code"] = r.returncode
    out["sent_ns"] = sent_ns
    return out


def acks(outcome: dict[str, Any]) -> dict[str, tuple[bool, str, float]]:
    """Per host: (applied, period_ms it now has, seconds to its answer)."""
    return {
        a["host"]: (bool(a["ok"]), a.get("state", {}).get("period_ms", ""), float(a["took_s"]))
        for a in outcome.get("answers", [])
    }


@dataclass
class PeriodSeen:
    """A node's sampling period as its samples in the store show it."""

    host: str
    before_ms: float  # median gap between the job's periods before the change
    after_ms: float  # ... and from ``settle`` after it
    n_before: int
    n_after: int


def periods_seen(
    bed: Bed, job: str, change_ns: int, settle_ns: int = 1_000_000_000
) -> list[PeriodSeen]:
    """From the bed's store (a lake, read while the collector writes): the gaps
    between the job's periods per node (job_activity: one row per node and
    period), before ``change_ns`` and from ``change_ns + settle_ns`` on."""
    con = open_store_readonly(bed.store)  # the lake, read while collecting
    try:
        rows = con.execute(
            "SELECT host, time_ns FROM job_activity WHERE job = ? ORDER BY host, time_ns",
            [job],
        ).fetchall()
    finally:
        con.close()
    by_host: dict[str, list[int]] = {}
    for host, t in rows:
        by_host.setdefault(str(host), []).append(int(t))
    out = []
    for host, times in sorted(by_host.items()):
        before = [b - a for a, b in itertools.pairwise(times) if b <= change_ns]
        after = [b - a for a, b in itertools.pairwise(times) if a >= change_ns + settle_ns]
        out.append(
            PeriodSeen(
                host,
                statistics.median(before) / 1e6 if before else float("nan"),
                statistics.median(after) / 1e6 if after else float("nan"),
                len(before),
                len(after),
            )
        )
    return out


def digest_app(digest_json: str, metric: str) -> dict[str, Any] | None:
    """The digest's app_timeline finding of ``metric`` (its evidence), or None."""
    with open(digest_json) as f:
        digest = json.load(f)
    for finding in digest.get("findings", []):
        if finding.get("factor") != "app_timeline":
            continue
        evidence = finding.get("evidence", {})
        if evidence.get("app_series") == f"metric {metric}":
            return dict(evidence)
    return None
