"""The share of a job's traffic that crossed between racks, measured (issue 21):
where the nodes counted the bytes they received from each rack (``net_rack``
lines, as python/hushmon/testbed/rackcount.py writes them on the bed), the
topology finding gives that share instead of the node counters' bounds.

On the bed's recorded butterfly (tests/fixtures/spool/testbed-4n2r, job 3: 4
nodes in 2 racks, whose bounds are 0-100 %), with per-rack lines added that
split each node's received bytes 70 % from the other rack, 30 % from its own."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from hushmon.digest.build import build_digest
from hushmon.paths import REPO_ROOT
from hushmon.store.ingest import ingest_spool
from hushmon.testbed.rackcount import line

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "spool" / "testbed-4n2r"
RACK = {"n1": 1, "n2": 1, "n3": 2, "n4": 2}
FROM_OTHER = 0.7
_RX = re.compile(r"^net,host=(n\d),iface=eth0 .*?rx_bytes_per_s=([0-9.e+]+).* (\d+)$")


def _store(tmp: Path, counted: bool, from_other: float = FROM_OTHER) -> Path:
    spool = tmp / "spool"
    tmp.mkdir()
    spool.mkdir()
    extra: dict[str, list[str]] = {}
    for f in FIXTURE.glob("n*-3.lp"):
        shutil.copy(f, spool / f.name)
        for text in f.read_text(encoding="utf-8").splitlines():
            m = _RX.match(text)
            if m is None:
                continue
            host, rx, ts = m.group(1), float(m.group(2)), int(m.group(3))
            own = RACK[host]
            for rack in (1, 2):
                share = 1 - from_other if rack == own else from_other
                extra.setdefault(host, []).append(line(host, rack, round(rx * share), 1.0, ts))
    if counted:
        for host, lines in extra.items():
            (spool / f"{host}-netrack-1.lp").write_text("\n".join(lines) + "\n")
    ingest_spool(tmp / "hushmon.duckdb", spool)
    return tmp / "hushmon.duckdb"


def _topology(tmp: Path, counted: bool, from_other: float = FROM_OTHER) -> dict:
    d = build_digest(_store(tmp, counted, from_other), "3", tmp / "r", FIXTURE / "topology.conf")
    (f,) = [f for f in d.findings if f.factor == "topology"]
    return {"evidence": f.evidence, "hint": f.hint, "loss": f.loss}


def test_counted_bytes_give_the_share_that_crossed(tmp_path: Path) -> None:
    bounded = _topology(tmp_path / "a", False)
    ev = bounded["evidence"]
    assert ev["share_that_crossed_racks_at_least"] < 0.2 < 0.9 < ev["share_that_may_cross_racks"]
    assert "not measured" in ev["partners"]
    measured = _topology(tmp_path / "b", True)
    ev = measured["evidence"]
    # of the bytes rack r1 sent to the job, r2's nodes got 70 % of theirs, r1's nodes
    # 30 % of theirs: with the nodes' receive rates close, about 70 % crossed
    lo, hi = ev["share_that_crossed_racks_at_least"], ev["share_that_may_cross_racks"]
    assert lo == pytest.approx(FROM_OTHER, abs=0.08) and hi == pytest.approx(FROM_OTHER, abs=0.08)
    assert ev["partners"].startswith("measured")
    assert "measured: the nodes counted" in measured["hint"]
    assert "cannot tell" not in measured["hint"]
    # the loss follows the measured share: narrower than the bounded one
    wide, narrow = bounded["loss"], measured["loss"]
    assert narrow.high_share - narrow.low_share < wide.high_share - wide.low_share


def test_a_trickle_across_racks_costs_its_transfer_time_only(tmp_path: Path) -> None:
    # 0.5 % of the bytes crossed: the uplinks carried under idle_link_share (10 %) of
    # their 25 MB/s in every period, so no exchange waited in their queue; the high
    # end no longer counts each message period whole (an all-to-all of 8-byte
    # messages on the bed read [medium] 0-26 % that way, test_bed_phases at 07:59)
    crossing = _topology(tmp_path / "a", True, from_other=0.005)
    assert crossing["evidence"]["share_that_may_cross_racks"] < 0.02
    assert crossing["loss"] is not None and crossing["loss"].high_share < 0.02
    most = _topology(tmp_path / "b", True)
    assert most["loss"] is not None and most["loss"].high_share > 0.2
