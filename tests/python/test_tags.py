"""hushmon tag: rule files evaluated on stored jobs' digests, tags written to
job_tags on both stores (embedded DuckDB file and lake), found by the job
history's tag search; idempotent; a site's thresholds retag; the rule
language refuses what is not an expression."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hushmon.errors import HushmonError
from hushmon.history.query import JobQuery, search
from hushmon.history.records import JobRecord, record_job
from hushmon.store.schema import open_store, open_store_readonly
from hushmon.tags.expr import Missing, parse
from hushmon.tags.rules import load_rules
from hushmon.tags.store import tags_of


def _digest(
    job: str, duration_s: float, busy_pct: float, findings: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "job": job, "nodes": ["n1", "n2"], "duration_s": duration_s, "periods": int(duration_s),
        "period_s": 1.0,
        "sensors": [
            {"name": "cpu.busy_pct", "min": busy_pct / 2, "avg": busy_pct, "max": busy_pct * 1.5},
            {"name": "cpu.idle_pct[cpu=total]", "min": 0, "avg": 1, "max": 2},
        ],
        "findings": findings,
    }  # fmt: skip


JOBS = {
    "11": _digest("11", 30, 80, []),  # short
    "12": _digest(
        "12",
        900,
        40,
        [{"factor": "imbalance", "severity": "high", "evidence": {"imbalance": 0.45}}],
    ),
    "13": _digest("13", 900, 12, []),  # low load
}


def _hushmon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hushmon.cli", *args],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


@pytest.fixture(params=["duckdb", "lake"])
def data(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    store = tmp_path / ("hushmon.lake" if request.param == "lake" else "hushmon.duckdb")
    open_store(store).close()
    record_job(
        store, [JobRecord(job=j, owner="alice", state="COMPLETED", start_ns=1) for j in JOBS]
    )
    for job, digest in JOBS.items():
        (tmp_path / "reports" / job).mkdir(parents=True)
        (tmp_path / "reports" / job / "digest.json").write_text(json.dumps(digest))
    return tmp_path


def _store(data: Path) -> Path:
    lake = data / "hushmon.lake"
    return lake if lake.exists() else data / "hushmon.duckdb"


def _tag(data: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    """hushmon tag in this process (the CLI's own main: no interpreter start
    per call; the one-line errors are checked through a real process below)."""
    from hushmon import cli

    capsys.readouterr()
    argv = ["tag", "--all", "--no-build", "--data-dir", str(data), "--db", str(_store(data)),
            "--json", "-", *extra]  # fmt: skip
    assert cli.main(argv) == 0
    return dict(json.loads(capsys.readouterr().out))


def _tagged(data: Path, *tags: str) -> dict[str, list[str]]:
    """The job history's search for each tag (one store opening: a lake's costs seconds)."""
    con = open_store_readonly(_store(data))
    try:
        return {t: sorted(r.job for r in search(con, JobQuery(tag=t)).records) for t in tags}
    finally:
        con.close()


def test_tag_all_writes_searchable_tags_once_and_retags(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _tag(data, capsys)
    assert {j: [t["tag"] for t in v["tags"]] for j, v in first["jobs"].items()} == {
        "11": ["short_job"], "12": ["load_imbalance"], "13": ["lowload"]}  # fmt: skip
    assert sorted(first["changed"]) == ["11", "12", "13"]
    hint = first["jobs"]["13"]["tags"][0]["hint"]
    assert "CPUs busy 12% on average over 15 min" in hint
    # the lowload guard: a 30 s job is not judged for its load
    assert first["jobs"]["11"]["not_applied"]["lowload"].startswith("guard false")
    assert _tagged(data, "lowload", "short_job") == {"lowload": ["13"], "short_job": ["11"]}
    # again: nothing changed, nothing written
    assert _tag(data, capsys)["changed"] == []
    # a site's threshold: busy below 50 % is low load now -> job 12 too
    site = tmp_path / "site"
    site.mkdir()
    (site / "parameters.toml").write_text("lowload_busy_pct = 50\n")
    # ... and a site rule replacing the shipped short_job: nothing is short now
    (site / "short_job.toml").write_text(
        'tag = "short_job"\nrequires = ["job.duration_s"]\n'
        'condition = "job.duration_s < 10"\nhint = "ran {job.duration_s} s"\n'
    )
    again = _tag(data, capsys, "--rules", str(site))
    # 13's hint quotes the new threshold, so its row is written again too
    assert sorted(again["changed"]) == ["11", "12", "13"]
    assert "(below 50%)" in again["jobs"]["13"]["tags"][0]["hint"]
    assert _tagged(data, "lowload", "short_job") == {"lowload": ["12", "13"], "short_job": []}
    con = open_store_readonly(_store(data))
    try:
        assert [t.tag for t in tags_of(con, "12")] == ["load_imbalance", "lowload"]
    finally:
        con.close()


def test_bad_rule_is_one_line(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "evil.toml").write_text(
        'tag = "evil"\ncondition = "__import__(\'os\').system(\'true\')"\nhint = "x"\n'
    )
    open_store(tmp_path / "hushmon.duckdb").close()
    out = _hushmon("tag", "--all", "--data-dir", str(tmp_path), "--rules", str(site))
    assert out.returncode != 0
    assert "evil.toml" in out.stderr and "may be called" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    (site / "evil.toml").write_text(
        'tag = "evil"\ncondition = "cpu.busy_pct.avg < typo_pct"\nhint = "x"\n'
    )
    out = _hushmon("tag", "--all", "--data-dir", str(tmp_path), "--rules", str(site))
    assert out.returncode != 0 and "'typo_pct' is not in parameters.toml" in out.stderr


@pytest.mark.parametrize(
    "text",
    ["(lambda: 1)()", "x[0]", "open('f')", "[i for i in y]", "a.b()", "f'{a}'", "x if y else z",
     "min(a, key=b)", "None"],
)  # fmt: skip
def test_expression_refuses(text: str) -> None:
    with pytest.raises(HushmonError):
        parse(text, "t")


def test_expression_evaluates() -> None:
    facts = {"cpu.busy_pct.avg": 12.0, "finding.x.severity": "high", "job.duration_s": 900}
    params = {"lim": 25}
    assert parse("cpu.busy_pct.avg < lim and job.duration_s / 60 >= 15", "t").evaluate(
        facts, params
    )
    assert parse("finding.x.severity in ('high', 'medium')", "t").evaluate(facts, params)
    assert not parse("0 < cpu.busy_pct.avg < 10", "t").evaluate(facts, params)
    assert parse("max(1, -cpu.busy_pct.avg) == 1", "t").evaluate(facts, params)
    with pytest.raises(Missing):
        parse("gpu.sm_pct.avg < 5", "t").evaluate(facts, params)
    # short-circuit: a missing fact after a false 'and' is not read
    assert not parse("job.duration_s < 0 and gpu.sm_pct.avg < 5", "t").evaluate(facts, params)


def test_shipped_rules_load() -> None:
    rules = load_rules()
    assert {"lowload", "idle_gpu", "load_imbalance", "io_bound", "short_job"} <= {
        r.tag for r in rules.rules
    }
    assert all(r.hint for r in rules.rules)


def test_alert_bad_flags_are_one_line() -> None:
    for args in (["--webhook", "ftp://x"], ["--subject-prefix", "hm.>"], ["--keep-s", "0"]):
        out = _hushmon("alert", "--url", "nats://127.0.0.1:9", *args)
        assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert "Traceback" not in out.stderr


def _summary(job: str, t_s: int, idle_pct: float) -> Any:
    from hushmon.live.sensors import parse_sensor
    from hushmon.live.state import Parsed
    from hushmon.transport.summary import Summary

    sensor = parse_sensor("cpu,cpu=total idle_pct")
    assert sensor is not None
    sources = {("n1", 1, t_s), ("n2", 1, t_s)}
    return Parsed("job", job, "", t_s * 10**9, sources, {sensor: Summary.of([idle_pct] * 2)})


def test_live_rules_once_per_job_until_cleared_and_not_for_no_job(tmp_path: Path) -> None:
    from hushmon.tags.live import LiveRules

    (tmp_path / "parameters.toml").write_text("idle_alloc_min_s = 3\n")
    live = LiveRules(load_rules(tmp_path))
    seen = []
    for t, idle in enumerate([99.0] * 6 + [20.0] * 2 + [99.0] * 5):
        for job in ("7", "-"):  # "-": nodes without a job, never alerted on
            seen += [(a.job, a.rule, a.state, t) for a in live.add(_summary(job, t, idle), 0)]
    # fires when the condition has held 3 s, once; clears; holds 3 s again, fires again
    assert seen == [("7", "idle_allocation", "firing", 3), ("7", "idle_allocation", "cleared", 6),
                    ("7", "idle_allocation", "firing", 11)]  # fmt: skip
