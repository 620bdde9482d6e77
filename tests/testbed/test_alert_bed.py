"""``hushmon alert`` on a live bed (2 nodes, Slurm, ``--transport nats``):
the bed's real agents, leaf, hub and reducers. A Slurm job that only sleeps
holds an idle allocation; with a site's ``idle_alloc_min_s = 3`` the
idle_allocation rule fires for that job, once, and the alert arrives on
NATS as ``hm.alert.<Slurm job id>`` naming the job's nodes
(tests/transport/test_alert.py checks the rules' timing and clearing with
published batches)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from alertsite import AlertListener, site_rules, start_alert
from bedlib import bed_unavailable, bed_up

from hushmon.paths import REPO_ROOT
from hushmon.testbed import livecheck, transport

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

HOLD_S = 3
SLEEP_S = 20
ALERT_FOR_S = 45.0


def test_an_idle_slurm_job_raises_an_alert_on_nats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = bed_unavailable()
    if reason:
        pytest.skip(reason)
    site = site_rules(tmp_path, HOLD_S)
    with bed_up("--nodes", "2", "--racks", "1", "--transport", "nats") as (info, _data):
        hub = str(info["transport"]["hub_url"])
        tls = transport.client_env()
        # the listener's connection reads the TLS files, squeue the bed's Slurm
        for key, value in {**tls, **info["env"]}.items():
            monkeypatch.setenv(key, value)
        env = {**os.environ, **info["env"], **tls}
        alert = job = None
        with AlertListener(hub) as listener:
            try:
                alert, said = start_alert("--url", hub, "--rules", str(site), "--for-s",
                                          str(ALERT_FOR_S), env=env, cwd=REPO_ROOT)  # fmt: skip
                newest = max(_slurm_jobs(), default=0)
                srun = shutil.which("srun") or "srun"
                job = subprocess.Popen(
                    [srun, "-N", "2", "sleep", str(SLEEP_S)],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                running = livecheck.running_job(newest, 60)
                assert running is not None, "the Slurm job did not start"
                job_id, nodes = running
                deadline = time.monotonic() + SLEEP_S + 15
                while time.monotonic() < deadline and not _fired(listener.got, job_id):
                    time.sleep(0.5)
                assert _fired(listener.got, job_id), (
                    f"no idle_allocation alert for job {job_id}: {listener.got}"
                )
            finally:
                if job is not None:
                    job.wait(SLEEP_S + 60)
                if alert is not None:
                    alert.terminate()
                    out, err = alert.communicate(timeout=30)
                    err = said + err
        got = listener.got
        subject, first = _fired(got, job_id)[0]
        assert subject == f"hm.alert.{job_id}"
        assert first["job"] == job_id and first["state"] == "firing"
        assert sorted(first["nodes"]) == sorted(nodes)
        assert f"on {len(nodes)} node(s)" in first["hint"]
        # once while it holds, and --json wrote what NATS carried
        assert len(_fired(got, job_id)) == 1, got
        written = [json.loads(line) for line in out.splitlines() if line.strip()]
        assert [a for a in written if a["job"] == job_id and a["state"] == "firing"
                and a["rule"] == "idle_allocation"] == [first], (written, err)  # fmt: skip


def _slurm_jobs() -> list[int]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True,
                         check=False)  # fmt: skip
    return [int(w) for w in out.stdout.split() if w.isdigit()]


def _fired(
    got: list[tuple[str, dict[str, Any], float]], job: str
) -> list[tuple[str, dict[str, Any]]]:
    return [
        (s, a)
        for s, a, _t in got
        if a.get("job") == job and a.get("rule") == "idle_allocation" and a.get("state") == "firing"
    ]
