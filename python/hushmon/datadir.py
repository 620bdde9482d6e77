"""Where hushmon keeps its data on this machine (embedded mode).

One folder holds the agent's spool, the DuckDB store and the reports, so a
user can find, copy or delete everything in one place:

    <data>/spool/              agent spool files (line protocol)
    <data>/hushmon.duckdb      the store
    <data>/reports/<job>/      report.html, digest.json, exports
    <data>/run/agent.sock      the embedded agent's control socket

<data> is --data-dir, else $HUSHMON_DATA, else ~/.local/share/hushmon.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DataDir:
    root: Path

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def database(self) -> Path:
        return self.root / "hushmon.duckdb"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def agent_socket(self) -> Path:
        return self.run / "agent.sock"

    def reports(self, job: str) -> Path:
        return self.root / "reports" / job

    def create(self) -> DataDir:
        for path in (self.root, self.spool, self.run):
            path.mkdir(parents=True, exist_ok=True)
        return self


def data_dir(explicit: str | os.PathLike[str] | None = None) -> DataDir:
    if explicit:
        return DataDir(Path(explicit).expanduser())
    env = os.environ.get("HUSHMON_DATA")
    if env:
        return DataDir(Path(env).expanduser())
    return DataDir(Path.home() / ".local" / "share" / "hushmon")


def add_data_dir_options(parser: argparse.ArgumentParser, with_db: bool = True) -> None:
    """``--data-dir`` (and ``--db``), the same for every command that reads the store."""
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="hushmon data folder: spool, store, reports "
        "(default $HUSHMON_DATA or ~/.local/share/hushmon)",
    )
    if with_db:
        parser.add_argument(
            "--db", type=Path, metavar="FILE", help="store file (default <data>/hushmon.duckdb)"
        )


def from_args(args: argparse.Namespace) -> tuple[DataDir, Path]:
    """The data folder and store file that ``add_data_dir_options`` asked for."""
    dd = data_dir(args.data_dir)
    return dd, getattr(args, "db", None) or dd.database
