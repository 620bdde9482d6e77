"""Slurm's topology.conf as the digest reads it: host lists, switches, where
it is looked for, and what an unreadable one does."""

from __future__ import annotations

from pathlib import Path

import pytest

from hushmon.digest import fabric
from hushmon.digest.fabric import expand_hostlist, load_fabric, parse_topology
from hushmon.errors import HushmonError

PARAMS = {"topology_conf": "", "linkspeed_unit_bits_per_s": 1e6}
BED = """# Written by 'hushmon testbed up'. LinkSpeed: Mbit/s.
SwitchName=r1 Nodes=n1,n2 LinkSpeed=1000
SwitchName=r2 Nodes=n[3-4] LinkSpeed=1000
SwitchName=core Switches=r[1-2] LinkSpeed=200
"""


def test_host_lists() -> None:
    assert expand_hostlist("n[1-3,7],gpu[01-02],x") == [
        "n1",
        "n2",
        "n3",
        "n7",
        "gpu01",
        "gpu02",
        "x",
    ]
    assert expand_hostlist("") == []
    with pytest.raises(HushmonError, match="range"):
        expand_hostlist("n[a-b]")


def test_racks_and_uplinks(tmp_path: Path) -> None:
    conf = tmp_path / "topology.conf"
    conf.write_text(BED)
    info = load_fabric(conf, PARAMS, job_start_ns=10**30)
    fab = info.fabric
    assert fab is not None and info.note == ""
    assert fab.racks(["n1", "n3", "n4", "other"]) == {"r1": ["n1"], "r2": ["n3", "n4"]}
    assert fab.leaf_of("n2.cluster.example") == "r1"  # short names match
    assert fab.node_link_bits("n3") == 1e9
    assert fab.uplink_bits("r2") == 200e6
    assert fab.uplink_bits("core") is None
    assert "LinkSpeed=200" in fab.uplink_text("r1")


def test_a_file_newer_than_the_job_is_flagged(tmp_path: Path) -> None:
    conf = tmp_path / "topology.conf"
    conf.write_text(BED)
    info = load_fabric(conf, PARAMS, job_start_ns=0)
    assert "after the job started" in info.note


def test_an_earlier_digest_beats_a_file_newer_than_the_job(tmp_path: Path) -> None:
    # the job ran on a 2-rack bed; another bed (one rack) wrote the file since: a
    # rebuilt digest (hushmon compare after bench_findings' second bed) reads the
    # racks its first digest recorded while the job's own file was there
    import json

    conf = tmp_path / "topology.conf"
    conf.write_text(BED)
    then = load_fabric(None, {**PARAMS, "topology_conf": str(conf)}, job_start_ns=10**30)
    assert then.note == ""
    previous = tmp_path / "digest.json"
    previous.write_text(json.dumps({"fabric": then.to_json(["n1", "n3"])}))
    conf.write_text("SwitchName=r1 Nodes=n[1-4] LinkSpeed=1000\n")
    params = {**PARAMS, "topology_conf": str(conf)}
    now = load_fabric(None, params, job_start_ns=0, previous_digest=previous)
    assert now.fabric is not None and "earlier digest" in now.note
    assert now.fabric.racks(["n1", "n3"]) == {"r1": ["n1"], "r2": ["n3"]}
    assert now.fabric.uplink_bits("r1") == 200e6
    # --topology FILE is what the user says: it wins, flagged as newer
    given = load_fabric(conf, PARAMS, job_start_ns=0, previous_digest=previous)
    assert given.fabric is not None and len(given.fabric.racks(["n1", "n3"])) == 1
    assert "after the job started" in given.note
    # an earlier digest that itself read a newer file knows no better
    previous.write_text(json.dumps({"fabric": given.to_json(["n1", "n3"])}))
    again = load_fabric(None, params, job_start_ns=0, previous_digest=previous)
    assert again.fabric is not None and len(again.fabric.racks(["n1", "n3"])) == 1
    assert "after the job started" in again.note


def test_bad_files_name_the_line(tmp_path: Path) -> None:
    with pytest.raises(HushmonError, match=r"t.conf:2: LinkSpeed='fast'"):
        parse_topology("SwitchName=a Nodes=x\nSwitchName=b Nodes=y LinkSpeed=fast\n", "t.conf")
    with pytest.raises(HushmonError, match="not KEY=VALUE"):
        parse_topology("SwitchName=a Nodes\n", "t.conf")
    with pytest.raises(HushmonError, match="no SwitchName"):
        parse_topology("# nothing\n", "t.conf")
    with pytest.raises(HushmonError, match=r"--topology .*: no such file"):
        load_fabric(tmp_path / "missing.conf", PARAMS, 0)


def test_where_it_is_looked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slurm = tmp_path / "etc-slurm"
    bed = tmp_path / "run-bed"
    slurm.mkdir()
    bed.mkdir()
    (bed / "slurm.conf").write_text("ClusterName=x\n")
    (bed / "topology.conf").write_text(BED)
    (slurm / "slurm.conf").symlink_to(bed / "slurm.conf")  # as the test bed links it
    monkeypatch.setattr(fabric, "DEFAULT_SLURM_DIR", slurm)
    monkeypatch.delenv("SLURM_CONF", raising=False)
    info = load_fabric(None, PARAMS, 10**30)
    assert info.fabric is not None and info.fabric.source == str(bed / "topology.conf")
    # $SLURM_CONF's folder comes first
    other = tmp_path / "other"
    other.mkdir()
    (other / "topology.conf").write_text("SwitchName=x Nodes=n1\n")
    monkeypatch.setenv("SLURM_CONF", str(other / "slurm.conf"))
    info = load_fabric(None, PARAMS, 10**30)
    assert info.fabric is not None and info.fabric.source == str(other / "topology.conf")
    # nothing anywhere: unknown, with the places tried
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "none" / "slurm.conf"))
    monkeypatch.setattr(fabric, "DEFAULT_SLURM_DIR", tmp_path / "none")
    info = load_fabric(None, PARAMS, 10**30)
    assert info.fabric is None and str(tmp_path / "none" / "topology.conf") in info.tried
    assert info.to_json([])["status"] == "unknown"
    assert info.describe().startswith("unknown (no topology.conf: tried ")
