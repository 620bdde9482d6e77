"""Where the built C programs live, found the same way by every command."""

from __future__ import annotations

import os
from pathlib import Path

from hushmon.errors import HushmonError

# python/hushmon/paths.py -> repository root
REPO_ROOT = Path(__file__).resolve().parents[2]


def build_bin_dir() -> Path:
    """The directory of the C programs: $HUSHMON_BIN, else <repo>/build/bin."""
    override = os.environ.get("HUSHMON_BIN")
    return Path(override) if override else REPO_ROOT / "build" / "bin"


def program(name: str) -> Path:
    """Path of a built C program, or a clear error telling how to build it."""
    path = build_bin_dir() / name
    if not path.is_file() or not os.access(path, os.X_OK):
        raise HushmonError(f"{path} not found: run 'make' first (or set HUSHMON_BIN)")
    return path
