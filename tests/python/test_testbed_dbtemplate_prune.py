"""The bed's accounting template cache keeps one template: a new one
(programs upgraded, options changed) removes the others and what a crashed
``up`` left half-copied."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hushmon.testbed import dbtemplate


def test_a_new_template_removes_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dbtemplate, "CACHE_DIR", tmp_path)
    names = ("accounting-old1", "accounting-new", ".building-crashed", ".building-now", "unrelated")
    for name in names:
        (tmp_path / name / "mysql").mkdir(parents=True)
        (tmp_path / name / "mysql" / "f").write_bytes(b"x" * 100)
    two_hours_ago = time.time() - 7200
    os.utime(tmp_path / ".building-crashed", (two_hours_ago, two_hours_ago))
    dbtemplate._prune_others(tmp_path / "accounting-new")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [".building-now", "accounting-new", "unrelated"]
    assert (tmp_path / "accounting-new" / "mysql" / "f").read_bytes() == b"x" * 100
