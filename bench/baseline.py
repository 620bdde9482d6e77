"""A baseline commit's Python package, for the benches that run it beside
this tree's in one run (``--baseline COMMIT``): only python/hushmon is taken
from git, so the C programs of both sides are this tree's build."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def baseline_tree(commit: str, tmp: Path) -> Path:
    """A folder under ``tmp`` holding ``commit``'s python/hushmon (put its
    ``python`` on PYTHONPATH)."""
    tree = tmp / "baseline"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "python/hushmon"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree
