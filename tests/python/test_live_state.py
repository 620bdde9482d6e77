"""The live views' state (hushmon.live.state) and the top frame, on
summaries recorded from the real reducers (tests/fixtures/live: 4 nodes in
2 racks running job 42 with an application metric, 6 periods, made by
tests/transport/livetraffic.py): the figures equal the raw values the
batches held, partials merge, duplicates and late partials do not count
twice, bad messages are refused with a reason."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from hushmon.live.state import LiveState
from hushmon.live.top import render

FIXTURE = Path(__file__).parent.parent / "fixtures" / "live" / "summaries.jsonl"
NOW_NS = 1_795_445_537_000_000_000  # 2 s after the last recorded period


def recorded() -> list[tuple[str, bytes]]:
    out = []
    for line in FIXTURE.read_text().splitlines():
        m = json.loads(line)
        out.append((m["subject"], json.dumps(m["payload"]).encode()))
    return out


def feed(msgs: list[tuple[str, bytes]]) -> LiveState:
    state = LiveState()
    for i, (subject, payload) in enumerate(msgs):
        assert state.add(subject, payload, NOW_NS - 1_000_000_000 + i) == ""
    return state


def last_seq(msgs: list[tuple[str, bytes]]) -> int:
    payload = json.loads(msgs[-1][1])
    seqs = {s[2] for s in payload["sources"]}
    assert len(seqs) == 1
    return int(seqs.pop())


def sensor(job: dict[str, Any], label: str) -> dict[str, Any]:
    return next(s for s in job["sensors"] if s["label"] == label)


def test_recorded_stream_gives_the_raw_values_of_the_newest_period() -> None:
    msgs = recorded()
    snap = feed(msgs).snapshot(NOW_NS, stale_s=60)
    assert [j["job"] for j in snap["jobs"]] == ["42"]
    job = snap["jobs"][0]
    assert job["from"] == "job"
    assert job["time_ns"] == max(json.loads(p)["time_ns"] for _s, p in msgs)
    assert job["nodes"] == ["n1", "n2", "n3", "n4"]
    # livetraffic.batch: user_pct = 10 + (k*7 + rank*3) % 80, rank = host number - 1
    k = last_seq(msgs)
    users = [10.0 + (k * 7 + r * 3) % 80 for r in range(4)]
    cpu = sensor(job, "cpu usr")
    assert (cpu["count"], cpu["min"], cpu["max"]) == (4, min(users), max(users))
    assert cpu["avg"] == pytest.approx(sum(users) / 4, rel=1e-12)
    net = sensor(job, "net rx")  # eth0, never the loopback's 9e9
    assert (net["which"], net["min"], net["max"]) == ("eth0", 1e6, 4e6)
    assert [r["rack"] for r in job["racks"]] == ["r1", "r2"]
    assert job["racks"][0]["nodes"] == ["n1", "n2"]
    r2_cpu = next(s for s in job["racks"][1]["sensors"] if s["label"] == "cpu usr")
    assert (r2_cpu["min"], r2_cpu["max"]) == (min(users[2:]), max(users[2:]))
    [app] = job["app"]
    iters = [0.5 + 0.1 * r + 0.01 * k for r in range(4)]
    assert (app["name"], app["ranks"]) == ("iter_s", 4)
    assert app["min"] == pytest.approx(min(iters)) and app["max"] == pytest.approx(max(iters))
    assert app["avg"] == pytest.approx(sum(iters) / 4)
    assert snap["bad"] == snap["late"] == snap["duplicates"] == 0


def test_rack_partials_alone_merge_to_the_job_summary() -> None:
    msgs = recorded()
    whole = feed(msgs).snapshot(NOW_NS)["jobs"][0]
    racks_only = feed([m for m in msgs if m[0].startswith("hm.sum.rack.")])
    job = racks_only.snapshot(NOW_NS)["jobs"][0]
    assert job["from"] == "racks" and job["nodes"] == whole["nodes"]
    for a, b in zip(job["sensors"], whole["sensors"], strict=True):
        assert (a["label"], a["count"], a["min"], a["max"]) == (
            b["label"], b["count"], b["min"], b["max"])  # fmt: skip
        assert a["avg"] == pytest.approx(b["avg"], rel=1e-12)
    assert job["app"][0]["avg"] == pytest.approx(whole["app"][0]["avg"], rel=1e-12)


def test_duplicates_and_late_partials_do_not_count_twice() -> None:
    msgs = recorded()
    state = feed(msgs)
    before = state.snapshot(NOW_NS)["jobs"][0]
    job_msgs = [m for m in msgs if m[0] == "hm.sum.job.42"]
    state.add(*job_msgs[-1], NOW_NS)  # the same summary again
    state.add(*job_msgs[0], NOW_NS)  # an older period
    after = state.snapshot(NOW_NS)
    assert (after["duplicates"], after["late"]) == (1, 1)
    assert after["jobs"][0]["sensors"] == before["sensors"]


def test_two_disjoint_partials_of_one_period_merge() -> None:
    msgs = recorded()
    r1, r2 = (next(m for m in reversed(msgs) if m[0] == f"hm.sum.rack.{r}") for r in ("r1", "r2"))
    state = LiveState()
    # the same rack partials sent as two job-level parts (a late batch makes another partial)
    for _subject, payload in (r1, r2):
        obj = json.loads(payload)
        obj["level"] = "job"
        obj.pop("rack")
        state.add("hm.sum.job.42", json.dumps(obj).encode(), NOW_NS)
    job = state.snapshot(NOW_NS)["jobs"][0]
    assert job["nodes"] == ["n1", "n2", "n3", "n4"] and sensor(job, "cpu usr")["count"] == 4
    assert state.duplicates == 0


@pytest.mark.parametrize(
    ("subject", "payload", "reason"),
    [
        ("hm.sum.job.42", b"{not json", "not JSON"),
        ("hm.sum.job.42", b"[]", "not an object"),
        ("hm.sum.job.42", b'{"level": "node"}', "neither"),
        ("hm.sum.rack.r1", b'{"level": "job", "job": "1", "time_ns": 1}', "outside"),
        ("hm.sum.job.1", b'{"level": "job", "job": "1", "time_ns": "x", "sensors": {}}', "time_ns"),
        ("hm.sum.job.1", b'{"level": "job", "job": "1", "time_ns": 1, "sensors": []}', "sensors"),
        (
            "hm.sum.job.1",
            b'{"level": "job", "job": "1", "time_ns": 1, "sensors": {"cpu x": {"count": 0}}}',
            "sensor 'cpu x'",
        ),
        (
            "hm.sum.job.1",
            b'{"level": "job", "job": "1", "time_ns": 1, "sources": [[1]], "sensors": {}}',
            "source",
        ),
    ],
)
def test_bad_messages_are_refused_with_a_reason(subject: str, payload: bytes, reason: str) -> None:
    state = feed(recorded())
    before = state.snapshot(NOW_NS)["jobs"]
    why = state.add(subject, payload, NOW_NS)
    assert reason in why
    snap = state.snapshot(NOW_NS)
    assert snap["bad"] == 1 and snap["last_error"] == why and snap["jobs"] == before


def test_stale_jobs_are_hidden_and_counted() -> None:
    state = feed(recorded())
    snap = state.snapshot(NOW_NS + 600 * 1_000_000_000, stale_s=300)
    assert snap["jobs"] == [] and snap["stale_jobs"] == 1
    assert len(state.snapshot(NOW_NS + 600 * 1_000_000_000, stale_s=math.inf)["jobs"]) == 1


def test_app_values_of_another_job_on_the_node_are_left_out() -> None:
    subject, payload = next(m for m in reversed(recorded()) if m[0] == "hm.sum.job.42")
    obj = json.loads(payload)
    key = next(k for k in obj["sensors"] if k.startswith("app,"))
    obj["sensors"][key.replace("job=42", "job=7").replace("iter_s", "other")] = obj["sensors"][key]
    state = LiveState()
    state.add(subject, json.dumps(obj).encode(), NOW_NS)
    assert [a["name"] for a in state.snapshot(NOW_NS)["jobs"][0]["app"]] == ["iter_s"]


def test_top_frame_shows_jobs_racks_and_app_metrics() -> None:
    msgs = recorded()
    snap = feed(msgs).snapshot(NOW_NS)
    frame = render(snap, "nats://hub:4222")
    k = last_seq(msgs)
    users = [10.0 + (k * 7 + r * 3) % 80 for r in range(4)]
    assert "nats://hub:4222" in frame and "jobs 1" in frame
    row = next(ln for ln in frame.splitlines() if ln.startswith("42 "))
    assert f"{sum(users) / 4:.3g} ({min(users):.3g}-{max(users):.3g})" in row
    assert "4M" in row and "9G" not in frame  # net rx max 4 MB/s, loopback left out
    assert any(ln.strip().startswith("r1") and "n1,n2" in ln for ln in frame.splitlines())
    assert "iter_s" in frame
    other = render(snap, "nats://hub:4222", job="999")
    assert "no summaries yet for job 999" in other and "iter_s" not in other


def test_history_keeps_every_period_in_order_with_its_raw_values() -> None:
    msgs = recorded()
    history = feed(msgs).history()
    periods = sorted({json.loads(p)["time_ns"] for s, p in msgs if s == "hm.sum.job.42"})
    entries = history["42"]
    assert [e["time_ns"] for e in entries] == periods  # oldest first, the open one last
    for entry in entries:
        job_msg = next(
            json.loads(p)
            for s, p in msgs
            if s == "hm.sum.job.42" and json.loads(p)["time_ns"] == entry["time_ns"]
        )
        k = next(iter(job_msg["sources"]))[2]  # livetraffic: one seq per period for all hosts
        users = [10.0 + (k * 7 + r * 3) % 80 for r in range(4)]
        lo, avg, hi = entry["series"]["cpu usr"]
        assert (lo, hi) == (min(users), max(users)) and avg == pytest.approx(sum(users) / 4)
        assert entry["units"]["cpu usr"] == "%" and "app iter_s" in entry["series"]


def test_app_values_stay_shown_through_periods_without_them() -> None:
    """At a 100 ms period a program calling once per 1 s iteration leaves
    most periods without app values: the views show the newest period that
    had some, with its time (and the page does not plot it again)."""
    msgs = [m for m in recorded() if m[0] == "hm.sum.job.42"]
    state = feed(msgs)
    subject, payload = msgs[-1]
    obj = json.loads(payload)
    with_app_ns = obj["time_ns"]
    obj["time_ns"] += 100_000_000
    obj["sources"] = [[s[0], s[1], s[2] + 1000] for s in obj["sources"]]
    obj["sensors"] = {k: v for k, v in obj["sensors"].items() if not k.startswith("app")}
    assert state.add(subject, json.dumps(obj).encode(), NOW_NS) == ""
    [job] = state.snapshot(NOW_NS)["jobs"]
    assert job["time_ns"] == with_app_ns + 100_000_000
    assert [a["name"] for a in job["app"]] == ["iter_s"] and job["app_time_ns"] == with_app_ns
    frame = render(state.snapshot(NOW_NS), "nats://hub:4222")
    assert "application metrics (over ranks, period " in frame and "iter_s" in frame
    # the newest period's own app values when it has them
    [fresh] = feed(msgs).snapshot(NOW_NS)["jobs"]
    assert fresh["app_time_ns"] == fresh["time_ns"] and fresh["app"]
