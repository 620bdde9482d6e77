"""Where `hushmon run --demo` runs: on the test bed when it can, else on this
machine alone, saying why (no jobs are run here: the choice and the commands)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hushmon.datadir import DataDir
from hushmon.errors import HushmonError
from hushmon.runcmd import demo


def test_without_root_it_falls_back_to_one_node_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(demo.os, "geteuid", lambda: 1000)
    said: list[str] = []
    place = demo.choose_place(DataDir(tmp_path), None, said.append)
    assert place.bed is None and not place.brought_up
    assert place.why_not == "not root: the test bed needs root (sudo make demo)"
    with pytest.raises(HushmonError, match="--testbed: not root"):
        demo.choose_place(DataDir(tmp_path), True, said.append)


def test_no_testbed_asks_for_one_node(tmp_path: Path) -> None:
    place = demo.choose_place(DataDir(tmp_path), False, lambda _m: None)
    assert place.bed is None and place.why_not == "--no-testbed"


def test_a_bed_that_is_not_the_demos_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from hushmon.testbed import bed as bedmod
    from hushmon.testbed.spec import BedSpec

    class Up:
        bed = type("B", (), {"spec": BedSpec(nodes=2, racks=1)})()
        up = True

    monkeypatch.setattr(demo, "bed_unavailable", lambda: None)
    monkeypatch.setattr(bedmod, "status", lambda: Up())
    monkeypatch.setattr(bedmod, "up", lambda *a, **k: pytest.fail("must not bring a bed up"))
    place = demo.choose_place(DataDir(tmp_path), None, lambda _m: None)
    assert place.bed is None
    assert "2 nodes, 1 racks" in place.why_not and "left alone" in place.why_not


def test_commands() -> None:
    bed_jobs = {(j.name, j.nodes) for j in demo.BED_JOBS}
    assert {("butterfly", 4), ("snake", 4), ("matmul", 1), ("matmul", 2), ("matmul", 4)} == (
        bed_jobs
    )
    bf = demo.demo_command(demo.BED_JOBS[0])
    assert bf[:3] == ["srun", "-N", "4"] and bf[3].endswith("/butterfly")
    one = demo.demo_command(demo.DEMO_JOBS[-1], Path("/var/tmp/x"))
    assert one[-2:] == ["--dir", "/var/tmp/x"]  # out-of-core data on a disk, not in /tmp
