"""Node scope (--scope-cgroup): the real agent binary reports a node's CPU
and memory from its cgroup -- on the v2 and v1 fixture trees, with the
second snapshot copied in while --once waits, and live on this machine in a
cgroup v1 made for the test with a busy process in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from waiting import wait_until

from test_agent_once import FIXTURES, Line, parse_lines

GiB = 1 << 30
MiB = 1 << 20
INTERVAL_S = 3.0  # --once: first reading, INTERVAL_S, second reading
FIXTURE_DT_S = 2.0  # the fixtures' t0 -> t1 figures are worked out for 2 s


def run_once_across(bin_dir: Path, tree: Path, root: Path, *args: str) -> list[Line]:
    """--once on a copy of tree/t0; tree/t1 is copied over it (same files, so
    the agent's open descriptors see it) halfway between the two readings."""
    shutil.copytree(tree / "t0", root, symlinks=True)
    proc = subprocess.Popen(
        [
            str(bin_dir / "hushmon-agent"),
            "--once",
            "--once-interval-ms",
            str(int(INTERVAL_S * 1000)),
            "--root",
            str(root),
            "--host",
            "n1",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # halfway, counted from the first reading (the agent holds its files open
    # from then on), not from the start, which a loaded machine may delay
    wait_until(lambda: proc.poll() is not None or _holds_files_under(proc.pid, root),
               "the agent's first reading", timeout_s=INTERVAL_S * 10)  # fmt: skip
    time.sleep(INTERVAL_S / 2)
    for src in (tree / "t1").rglob("*"):
        if src.is_file():
            shutil.copyfile(src, root / src.relative_to(tree / "t1"))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return parse_lines(out)


def _holds_files_under(pid: int, root: Path) -> bool:
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd).startswith(f"{root}/"):
                return True
        except OSError:
            continue
    return False


def one(lines: list[Line], m: str, **tags: str) -> Line:
    found = [
        x for x in lines if x.m == m and {k: v for k, v in x.tags.items() if k != "host"} == tags
    ]
    assert len(found) == 1, f"{m} {tags}: {len(found)} lines"
    return found[0]


def per_s(fixture_pct: float) -> float:
    """A share worked out for 2 s, over the --once interval instead."""
    return fixture_pct * FIXTURE_DT_S / INTERVAL_S


def near(value: float, expected: float) -> bool:
    return abs(value - expected) <= 0.01 * abs(expected) + 0.05


def test_node_scope_cgroup_v2_fixture(bin_dir: Path, tmp_path: Path) -> None:
    """n1: cpuset "1" of 2 CPUs, quota 1.5 CPUs (capacity 1), memory.max 6 GiB."""
    lines = run_once_across(
        bin_dir,
        FIXTURES / "node-v2",
        tmp_path / "root",
        "--scope-cgroup",
        "hushmon-testbed/n1",
        "--sources",
        "node,cpu,mem",
    )
    cpu = one(lines, "cpu", cpu="total")
    assert near(cpu.fields["user_pct"], per_s(60.0)), cpu
    assert near(cpu.fields["system_pct"], per_s(15.0)), cpu
    assert near(cpu.fields["idle_pct"], 100.0 - per_s(75.0)), cpu
    mem = one(lines, "mem")
    assert mem.fields["total_bytes"] == 6 * GiB
    assert mem.fields["used_bytes"] == 3 * GiB
    assert mem.fields["used_pct"] == 50.0
    assert mem.fields["swap_used_bytes"] == 100 * MiB
    node = one(lines, "node_cgroup")
    assert (node.fields["cpus"], node.fields["cpuset_cpus"], node.fields["quota_cpus"]) == (
        1,
        1,
        1.5,
    )
    assert node.fields["throttled_pct"] == 25.0
    assert near(node.fields["io_read_bytes_per_s"], 2_000_000 / INTERVAL_S)
    # host-wide lines tagged; per-CPU lines only for the node's CPU
    assert one(lines, "cpu", cpu="total", scope="host").fields["user_pct"] == 50.0
    assert one(lines, "mem", scope="host").fields["total_bytes"] == 8_192_000_000
    assert [x.tags["cpu"] for x in lines if x.m == "cpu" and x.tags["cpu"] != "total"] == ["cpu1"]


def test_node_scope_cgroup_v1_fixture(bin_dir: Path, tmp_path: Path) -> None:
    """n2 in cpu,cpuacct / cpuset / memory hierarchies: cpuset "0", quota 0.5
    CPU (capacity 0.5), no memory limit (the host's 8 GB)."""
    lines = run_once_across(
        bin_dir,
        FIXTURES / "node-v1",
        tmp_path / "root",
        "--scope-cgroup",
        "self",  # /proc/self/cgroup: cpuacct and memory in n2, cpuset at the root
        "--sources",
        "node,cpu,mem",
    )
    cpu = one(lines, "cpu", cpu="total")
    assert near(cpu.fields["user_pct"], per_s(40.0)), cpu
    assert near(cpu.fields["idle_pct"], 100.0 - per_s(50.0)), cpu
    mem = one(lines, "mem")
    assert mem.fields["total_bytes"] == 8_192_000_000
    assert mem.fields["used_bytes"] == 2 * GiB - GiB // 2
    node = one(lines, "node_cgroup")
    assert (node.fields["cpus"], node.fields["cpuset_cpus"]) == (0.5, 2)
    assert node.fields["throttled_pct"] == 50.0
    assert "io_read_bytes_per_s" not in node.fields  # v1 blkio is not read
    assert {x.tags["cpu"] for x in lines if x.m == "cpu"} == {"total", "cpu0", "cpu1"}


def test_host_wide_by_default_no_scope_tags(bin_dir: Path, tmp_path: Path) -> None:
    """Without scope.cgroup nothing changes: no node lines, no scope tags."""
    lines = run_once_across(
        bin_dir, FIXTURES / "node-v2", tmp_path / "root", "--sources", "node,cpu,mem"
    )
    assert {x.m for x in lines} == {"cpu", "mem"}
    assert all("scope" not in x.tags for x in lines)
    assert sorted(x.tags["cpu"] for x in lines if x.m == "cpu") == ["cpu0", "cpu1", "total"]
    assert one(lines, "cpu", cpu="total").fields["user_pct"] == 50.0  # the host's


def test_scope_errors_are_clear(bin_dir: Path) -> None:
    proc = subprocess.run(
        [
            str(bin_dir / "hushmon-agent"),
            "--once",
            "--root",
            str(FIXTURES / "node-v2" / "t0"),
            "--sources",
            "node,mem",
            "--scope-cgroup",
            "no/such/node",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0  # a source that cannot open is off; the others run
    assert "source node off: scope.cgroup 'no/such/node': neither" in proc.stderr
    # the host-wide lines are still tagged: they do not describe the node
    assert [(x.m, x.tags.get("scope")) for x in parse_lines(proc.stdout)] == [("mem", "host")]
    help_text = subprocess.run(
        [str(bin_dir / "hushmon-agent"), "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--scope-cgroup VALUE" in help_text and "[scope.cgroup]" in help_text
    assert " node " in help_text and "node_cgroup" in help_text


# ---- live, on this machine's cgroup v1 hierarchies --------------------------

CGROUP = Path("/sys/fs/cgroup")
V1_NEEDS = {"cpuacct": "cpuacct.usage", "memory": "memory.limit_in_bytes", "cpuset": "cpuset.cpus"}


def _v1_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    missing = [c for c, f in V1_NEEDS.items() if not (CGROUP / c / f).exists()]
    if missing:
        return f"no cgroup v1 {', '.join(missing)} hierarchy under {CGROUP}"
    return None


@pytest.fixture
def v1_node() -> Iterator[tuple[str, dict[str, Path]]]:
    """A node cgroup in each v1 hierarchy: 1 CPU, a 0.2-CPU quota (a busy
    process reaches it even on a loaded machine), 256 MiB."""
    reason = _v1_skip_reason()
    if reason:
        pytest.skip(reason)
    name = f"hushmon-test-{os.getpid()}"
    ctrls = ["cpuacct", "memory", "cpuset"]
    if (CGROUP / "cpu" / "cpu.cfs_quota_us").exists():
        ctrls.append("cpu")
    dirs = {c: CGROUP / c / name for c in ctrls}
    made: list[Path] = []
    try:
        for d in dirs.values():
            if not d.exists():  # cpu and cpuacct may be one hierarchy
                try:
                    d.mkdir()
                except OSError as exc:
                    pytest.skip(f"cannot create {d}: {exc}")
                made.append(d)
        parent_cpus = (CGROUP / "cpuset" / "cpuset.effective_cpus").read_text().strip()
        first_cpu = parent_cpus.split(",")[0].split("-")[0]
        (dirs["cpuset"] / "cpuset.cpus").write_text(first_cpu)
        (dirs["cpuset"] / "cpuset.mems").write_text(
            (CGROUP / "cpuset" / "cpuset.mems").read_text().strip()
        )
        (dirs["memory"] / "memory.limit_in_bytes").write_text(str(256 * MiB))
        if "cpu" in dirs:
            (dirs["cpu"] / "cpu.cfs_period_us").write_text("100000")
            (dirs["cpu"] / "cpu.cfs_quota_us").write_text("20000")
        yield name, dirs
    finally:
        for d in reversed(made):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)  # tasks of a just-killed process still leaving


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_live_cgroup_v1_node(bin_dir: Path, v1_node: tuple[str, dict[str, Path]]) -> None:
    name, dirs = v1_node
    # v1 charges a page to the cgroup its process was in when the page was
    # first touched: the child fills 32 MiB only once it has been moved.
    child = "import sys\nsys.stdin.readline()\nb = b'x' * (32 << 20)\nwhile True: pass\n"
    busy = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE)
    try:
        for d in {p.resolve() for p in dirs.values()}:
            (d / "cgroup.procs").write_text(str(busy.pid))
        assert busy.stdin is not None
        busy.stdin.write(b"go\n")
        busy.stdin.flush()
        time.sleep(0.5)  # the 32 MiB written; the quota settled into its 100 ms periods
        t0, c0 = time.monotonic(), _cpu_seconds(busy.pid)
        proc = subprocess.run(
            [
                str(bin_dir / "hushmon-agent"),
                "--once",
                "--once-interval-ms",
                "2000",
                "--scope-cgroup",
                name,
                "--sources",
                "node,cpu,mem",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        t1, c1 = time.monotonic(), _cpu_seconds(busy.pid)
    finally:
        busy.kill()
        busy.wait()
    assert proc.returncode == 0, proc.stderr
    lines = parse_lines(proc.stdout)
    node = one(lines, "node_cgroup")
    capacity = 0.2 if "cpu" in dirs else 1.0
    assert node.fields["cpus"] == capacity and node.fields["cpuset_cpus"] == 1
    # The node's busy share is the child's CPU time over the node's capacity.
    # (It may pass a quota by a scheduler tick per period; the share stops at 100 %.)
    expected = min(100.0, 100.0 * (c1 - c0) / (t1 - t0) / capacity)
    if expected < 10:
        pytest.skip(f"machine too busy: the child got {expected:.0f} % of its node's CPU")
    cpu = one(lines, "cpu", cpu="total")
    busy_pct = 100.0 - cpu.fields["idle_pct"]
    assert abs(busy_pct - expected) < 15, (busy_pct, expected, cpu)
    assert abs(cpu.fields["user_pct"] + cpu.fields["system_pct"] - busy_pct) < 10
    if "cpu" in dirs:
        # a busy loop that got its quota's worth ran into it (on a loaded
        # machine it may not get even that much)
        assert 0 <= node.fields["throttled_pct"] <= 100
        if expected >= 95:
            assert node.fields["throttled_pct"] > 0
    mem = one(lines, "mem")
    assert mem.fields["total_bytes"] == 256 * MiB
    assert 32 * MiB <= mem.fields["used_bytes"] < 256 * MiB
    # only the node's CPU among the per-CPU lines, tagged host-wide
    node_cpu = (dirs["cpuset"] / "cpuset.cpus").read_text().strip()
    per_cpu = [x for x in lines if x.m == "cpu" and x.tags["cpu"] != "total"]
    assert [(x.tags["cpu"], x.tags.get("scope")) for x in per_cpu] == [(f"cpu{node_cpu}", "host")]
