"""network_bandwidth with InfiniBand congestion counters (factors/congestion.py).

The synthetic scenario's saturated job keeps each node's InfiniBand traffic at
1.1 GB/s; its node links are given a capacity of 1.2 GB/s (the parameters'
last resort, ``link_capacity_bytes_per_s``) and the lines added here the port's
``xmit_wait_per_s``: waiting the whole time (a full link) or never (a busy one
that keeps up), so the evidence's verdict is known."""

from __future__ import annotations

from pathlib import Path

from hushmon.digest.factors import network_bandwidth, parameters
from hushmon.digest.jobdata import JobData, load_job
from hushmon.store.ingest import ingest_spool
from hushmon.store.synthetic import START_NS, Scenario, write_spool

SECONDS = 40
CAPACITY_BYTES_PER_S = 1.2e9


def _job(tmp: Path, xmit_wait_per_s: float | None) -> JobData:
    sc = Scenario(nodes=2, seconds=SECONDS, job="j", network="saturated")
    spool = tmp / "spool"
    write_spool(sc, spool)
    for node in range(sc.nodes):
        host = sc.host(node)
        lines = []
        for i in range(SECONDS):
            ts = START_NS + i * sc.period_ns
            if xmit_wait_per_s is not None:
                lines.append(
                    f"ib,host={host},device=mlx5_0,port=1 xmit_wait_per_s={xmit_wait_per_s} {ts}\n"
                )
        (spool / f"{host}-{START_NS}-900.lp").write_text("".join(lines), encoding="ascii")
    db = tmp / "hushmon.duckdb"
    assert ingest_spool(db, spool).rejected_lines == 0
    return load_job(db, "j")


def _finding(job: JobData) -> dict[str, object]:
    params = {
        **parameters()["network_bandwidth"],
        "link_capacity_bytes_per_s": CAPACITY_BYTES_PER_S,
    }
    [f] = network_bandwidth.FACTOR.analyze(job, params)
    return {**f.evidence, "hint": f.hint}


def test_a_full_link_waits_for_credit(tmp_path: Path) -> None:
    ev = _finding(_job(tmp_path, 5000.0))
    assert ev["ib_periods_waiting_near_capacity"] == 1.0
    assert ev["ib_xmit_wait_per_s_near_capacity"] == 5000.0  # the busiest node link: its port
    assert str(ev["ib_congestion"]).startswith("full")
    assert "port_xmit_wait" in str(ev["hint"])


def test_a_busy_link_that_keeps_up_does_not(tmp_path: Path) -> None:
    ev = _finding(_job(tmp_path, 0.0))
    assert str(ev["ib_congestion"]).startswith("busy, not full")
    assert "keeps up" in str(ev["hint"])


def test_without_the_counters_nothing_is_claimed(tmp_path: Path) -> None:
    ev = _finding(_job(tmp_path, None))
    assert "ib_congestion" not in ev
