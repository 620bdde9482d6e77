"""The NATS transport on a live bed (2 nodes in 2 racks, ``--transport nats``,
no Slurm), shortened fault by fault; the full versions (a 60 s uplink cut,
4 nodes) run from bench/bench_transport_faults.py.

Real parts throughout: the agents' nats sink (c/agent/sinks/nats.c), the
rack and top reducers (hushmon-reduce), the collector (hushmon collect),
nats-server hub (3, JetStream R3) and leaves. After each fault every batch
the agents numbered is in the store exactly once (lost = 0, duplicated =
0; hushmon.testbed.faults says how it is counted) and the tree repaired
itself: agents connected to their leaf, reducers caught up, with no
operator step (the faults' own restarts are the fault: a killed process
started again, as systemd would)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from bedlib import DATA_PARENT, bed_lock, bed_unavailable, bed_up, hushmon
from waiting import wait_until

from hushmon.digest.build import build_digest
from hushmon.paths import build_bin_dir
from hushmon.store.ingest import ingest_spool
from hushmon.store.schema import open_store_readonly
from hushmon.testbed import faults, network, transport
from hushmon.testbed.spec import HUB_NETNS, leaf_netns
from hushmon.testbed.state import STATE_DIR, Bed, load

pytestmark = [pytest.mark.testbed, pytest.mark.slow]


def _unavailable() -> str | None:
    reason = bed_unavailable()
    if reason:
        return reason
    if shutil.which("nats-server") is None:
        return "nats-server is not installed (scripts/install-deps.sh)"
    return None


@pytest.fixture(scope="module")
def nats_bed() -> Iterator[Bed]:
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    options = ("--nodes", "2", "--racks", "2", "--no-slurm", "--transport", "nats")
    with bed_up(*options) as (info, data):
        assert info["transport"]["store"] == str(data / "hushmon.lake")
        bed = load()
        assert bed is not None
        yield bed


def _exactly_once(bed: Bed, fault: str) -> None:
    check = faults.check_exactly_once(bed, fault, timeout_s=90)
    detail = "; ".join(check.details())
    assert not check.not_collected, detail
    assert check.lost == 0 and check.duplicated == 0, detail
    assert check.batches > 0 and check.values > 0
    repaired = faults.tree_repaired(bed)
    assert not repaired, repaired


def test_the_tree_is_up_and_data_flows(nats_bed: Bed) -> None:
    st = hushmon("testbed", "status", "--json", "-")
    assert st.returncode == 0, st.stderr
    daemons = json.loads(st.stdout)["daemons"]
    want = set(transport.daemons(nats_bed)) | {"agent@n1", "agent@n2"}
    assert want <= {k for k, alive in daemons.items() if alive}
    # Each rack's leaf is on the rack's switch: the node reaches it inside the rack.
    route = subprocess.run(
        [str(nats_bed.node_exec()), "n1", "ip", "route", "get", "10.77.1.250"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "dev eth0" in route.stdout
    _exactly_once(nats_bed, "no fault")


def _summaries(bed: Bed, job: str) -> dict[str, int]:
    con = open_store_readonly(bed.store)  # the lake, read while collecting
    try:
        rows = con.execute(
            "SELECT level, count(*) FROM summary_messages WHERE job = ? GROUP BY level", [job]
        ).fetchall()
    finally:
        con.close()
    return {str(k): int(v) for k, v in rows}


def test_run_digests_from_the_collectors_store(nats_bed: Bed, tmp_path: Path) -> None:
    """hushmon run on the bed: the digest comes from the collector's store
    (agent -> leaf -> hub -> collector), and equals the digest of the same
    batches (HM_RAW's bytes) through the embedded ingest; the job's
    summaries came through the rack and top reducers."""
    run = hushmon(
        "run",
        "--data-dir",
        str(nats_bed.data_root),
        "--json",
        "-",
        "--",
        "mpirun",
        "--allow-run-as-root",
        "--host",
        "n1,n2",
        "-np",
        "2",
        str(build_bin_dir() / "butterfly"),
        "--cycles",
        "2",
        "--comm-ms",
        "1500",
        "--compute-ms",
        "1000",
        "--length",
        "1M",
        timeout=240,
    )
    assert run.returncode == 0, run.stderr
    outcome = json.loads(run.stdout)
    assert outcome["collected_store"] == str(nats_bed.store)
    assert outcome["ingest"] is None  # no spool was ingested
    assert not [w for w in outcome["warnings"] if "collector" in w], outcome["warnings"]
    job = outcome["job"]
    digest = json.loads(Path(outcome["digest"]["json"]).read_text())
    assert sorted(digest["nodes"]) == ["n1", "n2"]
    copy = tmp_path / "spool"
    asyncio.run(faults._stream_to_spool(copy))
    ingest_spool(tmp_path / "s.duckdb", copy)
    same = build_digest(tmp_path / "s.duckdb", job, tmp_path / "reports")
    assert sorted((f.factor, f.severity) for f in same.findings) == sorted(
        (f["factor"], f["severity"]) for f in digest["findings"]
    )
    assert same.nodes == sorted(digest["nodes"]) and same.sensors == len(digest["sensors"])

    # rack reducers close a period 2 periods late, the top 2 s later: about
    # 6 s alone, longer on a loaded machine
    def both_levels() -> dict[str, int]:
        got = _summaries(nats_bed, job)
        return got if got.get("rack", 0) > 0 and got.get("job", 0) > 0 else {}

    wait_until(both_levels, "the job's rack and job summaries stored", timeout_s=60, step_s=1.0)
    _a_second_run_digests_while_collecting(nats_bed, job)


def _stored_batches(bed: Bed) -> int:
    con = open_store_readonly(bed.store)
    try:
        return int(con.execute("SELECT count(*) FROM transport_batches").fetchall()[0][0])
    finally:
        con.close()


def _a_second_run_digests_while_collecting(bed: Bed, earlier_job: str) -> None:
    """Another hushmon run while digests of the earlier job are built again
    and again: the collector keeps running (its pid stays), the lake's
    stored-batch count grows from the job's end until the run's digest is
    written (it waits for the collector, then digests), and every digest of
    the earlier job succeeds, some of them meanwhile."""
    transport.refresh_pids(bed)
    collector_pid = bed.daemons["collect"]
    counts: list[tuple[float, int]] = []
    digests: list[tuple[float, float, int]] = []  # start, end, exit code
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            counts.append((time.time(), _stored_batches(bed)))
            stop.wait(0.25)

    def digest_earlier() -> None:
        while not stop.is_set():
            started = time.time()
            r = hushmon(
                "digest", earlier_job, "--data-dir", str(bed.data_root), "--json", "-", timeout=120
            )
            digests.append((started, time.time(), r.returncode))

    threads = [threading.Thread(target=f, daemon=True) for f in (sample, digest_earlier)]
    for t in threads:
        t.start()
    try:
        run = hushmon(
            "run",
            "--data-dir",
            str(bed.data_root),
            "--json",
            "-",
            "--",
            "mpirun",
            "--allow-run-as-root",
            "--host",
            "n1,n2",
            "-np",
            "2",
            str(build_bin_dir() / "butterfly"),
            "--cycles",
            "2",
            "--comm-ms",
            "500",
            "--compute-ms",
            "500",
            "--length",
            "1M",
            timeout=240,
        )
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=150)
    assert run.returncode == 0, run.stderr
    outcome = json.loads(run.stdout)
    digest_json = Path(outcome["digest"]["json"])
    # from the job's end: the run waits until the collector stored what the
    # agents sent, then builds its digest (written last)
    began, done = outcome["ended_ns"] / 1e9, digest_json.stat().st_mtime
    during = [c for t, c in counts if began <= t <= done]
    print(f"stored batches from the job's end to its digest ({began:.1f}..{done:.1f}): {during}")
    print(f"digests of job {earlier_job} (start, end, exit): {digests}")
    transport.refresh_pids(bed)
    assert bed.daemons["collect"] == collector_pid, "the collector was restarted"
    assert len(during) >= 2 and during[-1] > during[0], counts
    assert digests and all(rc == 0 for _s, _e, rc in digests), digests
    assert any(s < done and e > began for s, e, _rc in digests), (began, done, digests)


def test_kill_a_rack_reducer(nats_bed: Bed) -> None:
    faults.kill_rack_reducer(nats_bed, 1)
    faults.time.sleep(3)
    _exactly_once(nats_bed, "reducer kill -9")
    faults.restart_reducer(nats_bed, 1)


def test_kill_and_restart_the_hub(nats_bed: Bed) -> None:
    faults.kill_hub(nats_bed, down_s=3)
    _exactly_once(nats_bed, "hub kill -9")


def test_uplink_down(nats_bed: Bed) -> None:
    faults.uplink_down(nats_bed, rack=2, down_s=10)
    _exactly_once(nats_bed, "uplink down 10 s")


def test_kill_an_agent_mid_batch(nats_bed: Bed) -> None:
    faults.kill_agent_mid_batch(nats_bed, "n2")
    faults.time.sleep(2)
    _exactly_once(nats_bed, "agent kill -9")


def test_kill_and_restart_the_collector(nats_bed: Bed) -> None:
    faults.time.sleep(2)
    faults.kill_collector(nats_bed)
    _exactly_once(nats_bed, "collector kill -9")


# ---- up and down ------------------------------------------------------------


def _transport_leftovers() -> list[str]:
    found = [ns for ns in network.bed_namespaces() if ns in (HUB_NETNS, leaf_netns(1))]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if (b"nats-server" in cmd and str(STATE_DIR).encode() in cmd) or (
            b"hushmon-reduce" in cmd and b"10.77." in cmd
        ):
            found.append(cmd.decode(errors="replace"))
    return found


def test_down_leaves_no_transport_behind(nats_bed: Bed) -> None:
    # Runs last in this module: takes the module's bed down and checks.
    down = hushmon("testbed", "down")
    assert down.returncode == 0, down.stderr
    assert _transport_leftovers() == []


def test_missing_programs_fail_in_one_line(tmp_path: Path) -> None:
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    with bed_lock():  # a refused up must not meet another's bed
        _missing_programs_fail_in_one_line(tmp_path)


def _missing_programs_fail_in_one_line(tmp_path: Path) -> None:
    data = DATA_PARENT / f"hushmon-test-bed-{uuid.uuid4().hex[:8]}"
    # nats-server is found on PATH: without it, up names the package.
    path = ":".join(
        p
        for p in os.environ["PATH"].split(":")
        if not os.path.exists(os.path.join(p, "nats-server"))
    )
    try:
        no_server = hushmon(
            "testbed", "up", "--transport", "nats", "--data-dir", str(data), env={"PATH": path}
        )
    finally:
        if network.bed_namespaces():  # the check failed to stop it: leave nothing
            hushmon("testbed", "down")
        shutil.rmtree(data, ignore_errors=True)
    assert no_server.returncode != 0
    assert no_server.stderr.strip().splitlines()[-1].startswith("hushmon: nats-server not found")
    no_reduce = hushmon(
        "testbed",
        "up",
        "--transport",
        "nats",
        "--data-dir",
        str(data),
        env={"HUSHMON_BIN": str(tmp_path)},
    )
    assert no_reduce.returncode != 0
    assert "hushmon-reduce not found" in no_reduce.stderr
    assert len(no_reduce.stderr.strip().splitlines()) == 1
    assert not network.bed_namespaces() and not STATE_DIR.exists()
