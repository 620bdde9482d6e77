"""A collected store is an ingested store: the same batches from spool files
and over NATS give the same samples, jobs and digest; the stored job-wide
summaries equal the raw truth, also when reducer partials overlap."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from transport_batches import (
    hushmon,
    publish,
    publish_raw_messages,
    rack_partial,
    spool_batches,
    store_rows,
    synthetic_batch,
)

from hushmon.digest.build import build_digest
from hushmon.paths import REPO_ROOT
from hushmon.store.ingest import ingest_spool
from hushmon.store.schema import open_store_readonly
from hushmon.transport.collect_summaries import read_job_summaries
from hushmon.transport.natsserver import LocalNatsServer
from hushmon.transport.rawsummary import summaries_from_store

BED = REPO_ROOT / "tests" / "fixtures" / "spool" / "testbed-4n2r"
RACKS = {"n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2"}
SAMPLES_SQL = """SELECT host, measurement, tags, field, time_ns, value
                 FROM samples JOIN series USING (series_id)
                 ORDER BY host, measurement, tags, field, time_ns"""


def _digest_json(db: Path, job: str, out: Path) -> dict:
    data = json.loads(build_digest(db, job, out).json_path.read_text())
    for volatile in ("generated_at", "created_at", "out_dir", "hushmon_version", "seconds"):
        data.pop(volatile, None)
    return data


@pytest.mark.parametrize("store", ["collected.lake", "collected.duckdb"])
def test_collected_equals_ingested(
    nats_server: LocalNatsServer, tmp_path: Path, store: str
) -> None:
    """The lake (series ids are key hashes, DuckLake files) and the embedded
    file (integer ids) hold what ``hushmon ingest`` stores from the spools."""
    shutil.copytree(BED, tmp_path / "spool")
    ingested, collected = tmp_path / "ingested.duckdb", tmp_path / store
    ingest_spool(ingested, tmp_path / "spool")
    batches = spool_batches(BED, RACKS)
    publish(nats_server.url, batches)
    r = hushmon("collect", "--url", nats_server.url, "--db", str(collected), "--once")
    assert r.returncode == 0, r.stderr
    assert f"collected {len(batches)} batch(es)" in r.stdout
    samples = store_rows(ingested, SAMPLES_SQL)
    assert len(samples) > 10_000 and store_rows(collected, SAMPLES_SQL) == samples
    jobs_sql = "SELECT job, host, time_ns FROM job_activity ORDER BY ALL"
    assert store_rows(collected, jobs_sql) == store_rows(ingested, jobs_sql)
    a = _digest_json(ingested, "5", tmp_path / "a")
    b = _digest_json(collected, "5", tmp_path / "b")
    assert a == b and a["findings"]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("store", ["c.lake", "c.duckdb"])
def test_job_summaries_equal_the_raw_truth_even_when_partials_overlap(
    nats_server: LocalNatsServer, tmp_path: Path, store: str
) -> None:
    db = tmp_path / store
    t0 = 1_795_000_000_000_000_000
    hosts = {"n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2"}
    batches = [
        synthetic_batch(h, i + 1, t0 + i * 10**9, job="j1", rack=rack, value=1.5 * i + int(h[1]))
        for i in range(3)
        for h, rack in hosts.items()
    ]
    publish(nats_server.url, batches)
    # what a rack reducer sends: per (job, period), its rack's batches merged
    partials = []
    for i in range(3):
        for rack in ("r1", "r2"):
            mine = [b for b in batches if b.rack == rack and b.seq == i + 1]
            payload = rack_partial(mine, rack, "j1", t0 + i * 10**9)
            partials.append((f"hm.sum.rack.{rack}", payload, {"Nats-Msg-Id": f"{rack}:{i}"}))
    publish_raw_messages(nats_server.url, partials)
    r = hushmon("collect", "--url", nats_server.url, "--db", str(db), "--once")
    assert r.returncode == 0, r.stderr
    assert "summaries: 6 stored, 0 duplicate(s), 0 overlapping" in r.stdout
    # a reducer that crashed after publishing r1's first partial: its twin
    # publishes it again under a new id (and one under the same id)
    subject, payload, _h = partials[0]
    publish_raw_messages(
        nats_server.url,
        [(subject, payload, {"Nats-Msg-Id": "r1:0:again"}), (subject, payload, {})],
    )
    # and a duplicate id the stream keeps because it came after its window
    publish_raw_messages(nats_server.url, [("hm.sum.rack.r2", partials[1][1], {})])
    r = hushmon("collect", "--url", nats_server.url, "--db", str(db), "--once")
    assert r.returncode == 0, r.stderr
    assert "overlapping (rebuilt from raw: 3)" in r.stdout, r.stdout
    con = open_store_readonly(db)
    try:
        for i in range(3):
            t = t0 + i * 10**9
            stored, truth = read_job_summaries(con, "j1", t), summaries_from_store(con, "j1", t)
            assert set(stored) == set(truth) and len(truth) == 3
            for key, s in truth.items():
                got = stored[key]
                assert (got.count, got.min, got.max) == (s.count, s.min, s.max) == (4, s.min, s.max)
                assert _close(got.sum, s.sum) and _close(got.mean, s.mean)
                assert _close(got.m2, s.m2)
                assert got.sketch.pos == s.sketch.pos
        origins = con.execute(
            "SELECT time_ns, min(origin) FROM merged_summaries GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()
    assert [o for _t, o in origins] == ["raw", "merged", "merged"]
    # the digest from summaries alone: min / avg / max over the 4 nodes per period
    r = hushmon(
        "digest",
        "j1",
        "--db",
        str(db),
        "--out",
        str(tmp_path / "rep"),
        "--from-summaries",
        "--json",
        "-",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["source"] == "summaries" and doc["periods"] == 3
    assert any("per-node" in why for why in doc["lost_compared_to_raw"])
    assert "lost compared to raw data" in r.stderr
    user = next(s for s in doc["sensors"] if s["name"] == "cpu.user_pct[cpu=total]")
    for i, p in enumerate(user["periods"]):
        assert (p["min"], p["avg"], p["max"], p["count"]) == (
            1.5 * i + 1,
            1.5 * i + 2.5,
            1.5 * i + 4,
            4,
        )
    assert user["min"] == 1.0 and user["max"] == 7.0
