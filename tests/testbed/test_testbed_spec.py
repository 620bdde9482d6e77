"""The bed's plan, files and scripts, checked without root: names,
addresses, limits, /etc/hosts editing, cgroup layout detection, the ssh
stand-in's argument handling."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hushmon.errors import HushmonError
from hushmon.store.schema import open_store
from hushmon.testbed import cgroups, launcher, slurm
from hushmon.testbed.spec import (
    BedSpec,
    node_cpus,
    parse_bytes,
    parse_latency_us,
    parse_rate_bits,
)
from hushmon.testbed.state import Bed, load

GIB = 1 << 30


def test_nodes_fill_racks_in_order_with_addresses_per_rack() -> None:
    nodes = BedSpec(nodes=5, racks=2).node_list()
    assert [(n.name, n.rack, n.address) for n in nodes] == [
        ("n1", 1, "10.77.1.1"),
        ("n2", 1, "10.77.1.2"),
        ("n3", 1, "10.77.1.3"),
        ("n4", 2, "10.77.2.1"),
        ("n5", 2, "10.77.2.2"),
    ]
    assert {n.netns for n in nodes} == {f"hm-n{i}" for i in range(1, 6)}


@pytest.mark.parametrize(
    ("text", "bits"),
    [("1gbit", 10**9), ("200mbit", 2 * 10**8), ("500M", 5 * 10**8), ("10mbps", 8 * 10**7)],
)
def test_rates_parse_as_tc_writes_them(text: str, bits: int) -> None:
    assert parse_rate_bits(text) == bits


@pytest.mark.parametrize("text", ["fast", "1 tbit", "10bit", "-1mbit", ""])
def test_bad_rates_are_refused_in_one_line(text: str) -> None:
    with pytest.raises(HushmonError) as exc:
        parse_rate_bits(text)
    assert "\n" not in str(exc.value)


def test_latency_and_sizes() -> None:
    assert parse_latency_us("50us") == 50
    assert parse_latency_us("2ms") == 2000
    assert parse_bytes("512M") == 512 << 20
    assert parse_bytes("2G") == 2 * GIB
    with pytest.raises(HushmonError):
        parse_latency_us("soon")
    with pytest.raises(HushmonError):
        parse_bytes("lots")


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        (BedSpec(nodes=0), "at least 1 node"),
        (BedSpec(nodes=2, racks=3), "one per node"),
        (BedSpec(nodes=65, racks=2), "at most 64"),
        (BedSpec(nodes=8, racks=2, node_memory_bytes=4 * GIB), "use fewer nodes"),
        (BedSpec(nodes=2, racks=1, cpus_per_node=9), "has 2 CPU"),
    ],
)
def test_beds_the_machine_cannot_hold_are_refused_naming_the_fix(
    spec: BedSpec, needle: str
) -> None:
    with pytest.raises(HushmonError) as exc:
        spec.check(cpus=2, mem_available_bytes=16 * GIB)
    assert needle in str(exc.value)


def test_cpu_slices_wrap_around_the_machine() -> None:
    spec = BedSpec(nodes=3, racks=1, cpus_per_node=1)
    assert [node_cpus(spec, n, 2) for n in spec.node_list()] == [[0], [1], [0]]
    assert node_cpus(BedSpec(), BedSpec().node_list()[0], 2) == [0, 1]


def _bed(tmp_path: Path, spec: BedSpec | None = None) -> Bed:
    layout = cgroups.Layout(2, tmp_path / "cg", {"unified": tmp_path / "cg" / "hushmon-testbed"})
    return Bed(spec or BedSpec(nodes=3, racks=2), tmp_path / "data", layout, root=tmp_path / "run")


def test_hosts_block_is_added_once_and_removed_leaving_the_rest(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    original = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n"
    hosts.write_text(original)
    bed = _bed(tmp_path)
    launcher.add_hosts(bed, hosts)
    launcher.add_hosts(bed, hosts)  # a second up replaces, never duplicates
    text = hosts.read_text()
    assert text.count(launcher.HOSTS_BEGIN) == 1
    assert "10.77.2.1\tn3" in text and text.startswith(original)
    assert launcher.remove_hosts(hosts)
    assert hosts.read_text() == original
    assert not launcher.remove_hosts(hosts)


def test_state_round_trips(tmp_path: Path) -> None:
    bed = _bed(tmp_path, BedSpec(nodes=2, racks=1, link_bits_per_s=10**8))
    bed.daemons = {"slurmctld": 42}
    bed.save()
    back = load(bed.root)
    assert back is not None
    assert back.spec == bed.spec and back.daemons == {"slurmctld": 42}
    assert back.cgroups == bed.cgroups
    (bed.root / "state.json").write_text("{not json")
    with pytest.raises(HushmonError, match="testbed down"):
        load(bed.root)


def test_cgroup_layout_v2_when_unified_else_v1_below_own_cgroups(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    layout = cgroups.detect(v2, proc_self_cgroup="0::/user.slice\n")
    assert layout.version == 2 and layout.bases == {"unified": v2 / "hushmon-testbed"}
    assert cgroups.jobs_parent(layout, "n2") == v2 / "hushmon-testbed" / "n2"

    v1 = tmp_path / "v1"
    for ctrl in ("cpuset", "cpu,cpuacct", "memory"):
        (v1 / ctrl).mkdir(parents=True)
        (v1 / ctrl / "cgroup.procs").write_text("")
    own = "4:memory:/process_api/abc\n3:cpuset:/\n2:cpu,cpuacct:/\n0::/\n"
    layout = cgroups.detect(v1, proc_self_cgroup=own)
    assert layout.version == 1
    assert layout.bases["memory"] == v1 / "memory" / "process_api" / "abc" / "hushmon-testbed"
    assert layout.bases["cpuacct"] == v1 / "cpu,cpuacct" / "hushmon-testbed"
    assert layout.node_dirs("n1")[0].name == "n1"
    assert cgroups.jobs_parent(layout, "n1") is None  # no v2 mount beside the controllers
    (v1 / "unified").mkdir()
    (v1 / "unified" / "cgroup.controllers").write_text("")
    layout = cgroups.detect(v1, proc_self_cgroup=own)
    assert cgroups.jobs_parent(layout, "n1") == v1 / "unified" / "hushmon-testbed" / "n1"
    assert len(layout.node_dirs("n1")) == 4  # nodes join it too: their jobs go below

    with pytest.raises(HushmonError, match="controller"):
        cgroups.detect(tmp_path / "nothing", proc_self_cgroup="0::/\n")


def test_rsh_passes_the_node_and_one_command_line_like_ssh(tmp_path: Path) -> None:
    bed = _bed(tmp_path)
    launcher.write_scripts(bed)
    # Stand in for entering the node: print what would run there.
    enter = bed.node_dir("n2") / "enter"
    enter.write_text('#!/bin/sh\necho "on n2: $*"\n')
    enter.chmod(0o755)
    out = subprocess.run(
        [str(bed.rsh()), "-x", "-o", "BatchMode=yes", "root@n2", "orted", "--mca", "a b"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "on n2: /bin/sh -c orted --mca a b"
    bad = subprocess.run(
        [str(bed.node_exec()), "n9", "true"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 255 and "no node 'n9'" in bad.stderr


def test_slurm_topology_names_racks_and_uplink_rate(tmp_path: Path) -> None:
    bed = _bed(tmp_path, BedSpec(nodes=4, racks=2, link_bits_per_s=10**9))
    text = slurm.topology_conf(bed)
    assert "SwitchName=r1 Nodes=n1,n2 LinkSpeed=1000" in text
    assert "SwitchName=core Switches=r1,r2 LinkSpeed=200" in text


def test_slurm_job_ids_go_on_after_the_stores_newest(tmp_path: Path) -> None:
    bed = _bed(tmp_path, BedSpec(nodes=2, racks=1))
    lake, embedded = bed.store, bed.data_root / "hushmon.duckdb"
    assert slurm.first_job_id(lake, embedded) == 1  # a new data folder
    lake.parent.mkdir(parents=True)
    con = open_store(embedded)  # a spool bed's runs: the embedded file
    con.execute(
        "INSERT INTO job_activity (host, job, time_ns) VALUES "
        "('n1', '7', 1), ('n2', '41', 2), ('n1', 'mpirun-3', 3)"
    )
    con.close()
    assert slurm.first_job_id(lake, embedded) == 42
    con = open_store(lake)  # a NATS bed's collector: the lake
    con.execute("INSERT INTO job_activity (host, job, time_ns) VALUES ('n1', '50', 4)")
    con.close()
    assert slurm.first_job_id(lake, embedded) == 51
    assert "FirstJobId=42\n" in slurm.write_conf(bed, slurm.first_job_id(embedded)).read_text()
    embedded.write_text("not a store")
    with pytest.raises(HushmonError, match="cannot read the job ids"):
        slurm.first_job_id(lake, embedded)
    (lake / "catalog.sqlite").write_text("not a catalog")
    with pytest.raises(HushmonError, match="cannot read the job ids"):
        slurm.first_job_id(lake)


@pytest.mark.parametrize("action", ["up", "down"])
def test_without_root_says_so_in_one_line(
    action: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hushmon import cli

    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert (
        cli.main(["testbed", action, *(["--data-dir", "/var/tmp/x"] if action == "up" else [])])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs root" in err and "sudo" in err


def test_transport_plan_hub_leaves_agents_and_daemons(tmp_path: Path) -> None:
    from hushmon.testbed import agents, transport
    from hushmon.testbed.spec import hub_addresses, leaf_address

    with pytest.raises(HushmonError, match="--transport carrier"):
        BedSpec(transport="carrier").check(4, 1 << 34)
    bed = _bed(tmp_path, BedSpec(nodes=3, racks=2, transport="nats"))
    assert hub_addresses() == ["10.77.0.1", "10.77.0.2", "10.77.0.3"]
    assert {leaf_address(r) for r in (1, 2)} == {"10.77.1.250", "10.77.2.250"}
    # Agents publish to their own rack's leaf, under their rack's name.
    argv = agents.agent_argv(bed, "n3")
    assert argv[argv.index("--sink") + 1] == "nats"
    # TLS by default: the agent checks its leaf's certificate
    assert argv[argv.index("--nats-url") + 1] == "tls://10.77.2.250:4222"
    assert argv[argv.index("--nats-rack") + 1] == "r2"
    assert "--sink" not in agents.agent_argv(_bed(tmp_path, BedSpec(nodes=3, racks=2)), "n3")
    hubs = [c.render() for c in transport.hub_configs(bed)]
    assert len(hubs) == 3 and all(h.count("nats-route://") == 3 for h in hubs)
    assert all('domain: "hub"' in h for h in hubs)
    # every listener verifies its peers; the monitor is the host's alone
    for h in hubs:
        assert h.count("verify: true") == 2 and "verify_cert_and_check_known_urls: true" in h
        assert 'http: "127.0.0.1:' in h
    leaves = transport.leaf_configs(bed)
    assert sorted(leaves) == [1, 2]
    leaf = leaves[2].render()
    assert "jetstream" not in leaf.split("mappings")[0] and "nats-leaf://10.77.0.3:7422" in leaf
    # Every daemon is named for status/down/restart, in the namespace it belongs to.
    names = {d.name: d.netns for d in transport.servers(bed)}
    assert names == {
        "nats@hub1": "hm-hub",
        "nats@hub2": "hm-hub",
        "nats@hub3": "hm-hub",
        "nats@leaf-r1": "hm-leaf-r1",
        "nats@leaf-r2": "hm-leaf-r2",
    }
