"""hushmon-agent as a command: one batch with --once, valid line protocol,
fixture trees through --root, and clear errors on bad input."""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentproc import run_agent

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agent"

# measurement[,tag=value...] field=value[,field=value...] timestamp
_NAME = r"(?:[^,= \\]|\\[,= ])+"
LINE_RE = re.compile(
    rf"^(?P<m>{_NAME})(?P<tags>(?:,{_NAME}={_NAME})*) "
    rf"(?P<fields>{_NAME}=(?:-?[0-9.e+-]+i?)(?:,{_NAME}=(?:-?[0-9.e+-]+i?))*) "
    r"(?P<ts>[0-9]{19})$"
)


@dataclass
class Line:
    m: str
    tags: dict[str, str]
    fields: dict[str, float]
    ts: int


def parse_lines(text: str) -> list[Line]:
    """Every line must match line protocol; returns measurement, tags, fields."""
    out = []
    for line in text.splitlines():
        m = LINE_RE.match(line)
        assert m, f"not valid line protocol: {line!r}"
        tags = dict(t.split("=", 1) for t in m.group("tags").split(",")[1:])
        fields: dict[str, float] = {}
        for item in m.group("fields").split(","):
            key, value = item.split("=", 1)
            fields[key] = int(value[:-1]) if value.endswith("i") else float(value)
        out.append(Line(m.group("m"), tags, fields, int(m.group("ts"))))
    return out


def test_once_prints_one_valid_batch(bin_dir: Path) -> None:
    # The profile is named: with "auto" a host with a PMU would pick by its CPU.
    proc = run_agent(bin_dir, "--once", "--sink", "stdout", "--pmu-profile", "generic")
    assert proc.returncode == 0, proc.stderr
    lines = parse_lines(proc.stdout)
    measurements = {line.m for line in lines}
    for wanted in ("cpu", "load", "mem", "vm", "disk", "net", "perf_sw", "hushmon_agent"):
        assert wanted in measurements, f"{wanted} missing from --once output"
    assert len({line.ts for line in lines}) == 1, "one batch = one timestamp"
    assert all("host" in line.tags for line in lines)
    total = next(x for x in lines if x.m == "cpu" and x.tags["cpu"] == "total")
    assert abs(sum(total.fields.values()) - 100.0) < 0.1
    if "hardware counters unavailable" in proc.stderr:
        # This machine: say so once, publish nothing made up.
        assert proc.stderr.count("hardware counters unavailable") == 1
        assert "pmu" not in measurements
    else:
        assert "pmu" in measurements


def test_once_on_fixture_tree(bin_dir: Path) -> None:
    proc = run_agent(
        bin_dir,
        "--once",
        "--root",
        str(FIXTURES / "t0"),
        "--sources",
        "mem,load,jobs,cgroup,ib",
        "--slurm-scan-ms",
        "0",
        "--host",
        "node 7",
    )
    assert proc.returncode == 0, proc.stderr
    lines = parse_lines(proc.stdout)
    mem = next(x for x in lines if x.m == "mem")
    assert mem.tags == {"host": "node\\ 7"}
    assert mem.fields["total_bytes"] == 16000000 * 1024
    assert "shmem_bytes" not in mem.fields
    jobs = [x for x in lines if x.m == "job"]
    assert [j.tags["job"] for j in jobs] == ["1234"]
    # unchanged fixture: rates are 0, not absent, after the second reading
    ib = next(x for x in lines if x.m == "ib")
    assert ib.fields["rx_bytes_per_s"] == 0


def test_configured_link_capacity_beside_the_reported_speed(bin_dir: Path) -> None:
    """A shaped link reports a speed it does not have: the configured rate
    goes out beside it, on every interface but loopback."""
    proc = run_agent(
        bin_dir,
        "--once",
        "--root",
        str(FIXTURES / "t0"),
        "--sources",
        "net",
        "--net-link-bits-per-s",
        "200000000",
    )
    assert proc.returncode == 0, proc.stderr
    net = {x.tags["iface"]: x.fields for x in parse_lines(proc.stdout) if x.m == "net"}
    assert net["eth0"]["speed_bits_per_s"] == 25e9
    assert net["eth0"]["capacity_bits_per_s"] == 2e8
    assert "speed_bits_per_s" not in net["eth1"]
    assert "capacity_bits_per_s" not in net["lo"]


PROFILE_DIR = Path(__file__).resolve().parents[2] / "c" / "agent" / "pmu" / "profiles"
PROFILES = sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def test_every_profile_is_found() -> None:
    # A glob that found nothing would leave the test below with no cases.
    assert {"generic", "skylake", "icelake", "zen4"} <= set(PROFILES)


@pytest.mark.parametrize("profile", PROFILES)
def test_simulated_pmu_counts_every_profile(bin_dir: Path, profile: str) -> None:
    """Each shipped profile runs on the simulated PMU as the profile models
    it (zen4: 6 general-purpose counters; Intel: fixed counters besides the
    general-purpose ones), whatever CPU runs the test."""
    events = list(tomllib.loads((PROFILE_DIR / f"{profile}.toml").read_text())["events"])
    proc = run_agent(
        bin_dir,
        "--once",
        "--sink",
        "stdout",
        "--sources",
        "pmu",
        "--pmu",
        "kernel",
        "--pmu-backend",
        "sim",
        "--pmu-profile",
        profile,
        "--pmu-profile-dir",
        str(PROFILE_DIR),
    )
    assert proc.returncode == 0, proc.stderr
    assert "SIMULATED PMU" in proc.stderr and "warning" not in proc.stderr, proc.stderr
    pmu = [x for x in parse_lines(proc.stdout) if x.m == "pmu"]
    assert pmu, f"no pmu lines: {proc.stderr}"
    assert all(x.tags["backend"] == "sim" for x in pmu)
    assert all(math.isfinite(v) for x in pmu for v in x.fields.values())
    total = next(x for x in pmu if x.tags["cpu"] == "total")
    missing = [e for e in events if f"{e}_per_s" not in total.fields]
    assert not missing, f"{profile}: events never counted: {missing}"
    assert all(total.fields[f"{e}_per_s"] > 0 for e in events)
    assert total.fields["ipc"] > 0
    assert 0 < total.fields["mux_ratio"] <= 1


def test_help_lists_every_source(bin_dir: Path) -> None:
    proc = run_agent(bin_dir, "--help")
    assert proc.returncode == 0
    for name in ("cpu", "load", "mem", "vm", "disk", "net", "ib", "jobs", "cgroup", "perf_sw"):
        assert re.search(rf"^\s+\*?\s*{name}\s", proc.stdout, re.M), name
    assert "--period-ms" in proc.stdout and "[pmu.mode]" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--period-ms", "5"], "period_ms: 5 is outside"),
        (["--sources", "cpu,nonsense"], "unknown source 'nonsense'"),
        (["--sources", ""], "no sources selected"),
        (["--pmu", "sometimes"], "'sometimes' is not one of none|kernel|rotate"),
        (["--bogus-flag"], "unknown option '--bogus-flag'"),
        (["--offset-ms", "2000"], "offset_ms (2000) must be less than period_ms"),
        (["--config", "/nonexistent/agent.toml"], "opening config /nonexistent/agent.toml"),
    ],
)
def test_bad_arguments_fail_clearly(bin_dir: Path, args: list[str], message: str) -> None:
    proc = run_agent(bin_dir, *args, "--once")
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""


def test_malformed_config_names_file_and_line(bin_dir: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "agent.toml"
    cfg.write_text('period_ms = 1000\n[pmu]\nmode = "kernel\n')
    proc = run_agent(bin_dir, "--config", str(cfg), "--once")
    assert proc.returncode == 2
    assert f"{cfg}:3: unterminated string" in proc.stderr
    cfg.write_text("period_ms = 1000\nsampling = 3\n")
    proc = run_agent(bin_dir, "--config", str(cfg), "--once")
    assert proc.returncode == 2 and f"{cfg}:2: unknown key 'sampling'" in proc.stderr


def test_unreadable_source_is_logged_and_others_go_on(bin_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "loadavg").write_text("0.10 0.20 0.30 1/100 42\n")
    proc = run_agent(bin_dir, "--once", "--root", str(root), "--sources", "mem,load")
    assert proc.returncode == 0
    assert "source mem off: opening" in proc.stderr and "proc/meminfo" in proc.stderr
    lines = parse_lines(proc.stdout)
    assert [x.m for x in lines] == ["load"]


def test_example_config_parses(bin_dir: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "c" / "agent" / "systemd" / "agent.toml"
    proc = run_agent(
        bin_dir,
        "--config",
        str(example),
        "--once",
        "--sources",
        "mem,self",
        "--pmu-profile-dir",
        str(example.parents[1] / "pmu" / "profiles"),
    )
    assert proc.returncode == 0, proc.stderr
    assert {x.m for x in parse_lines(proc.stdout)} == {"mem", "hushmon_agent"}
