"""Where hushmon keeps its data on this machine (embedded mode).

One folder holds the agent's spool, the DuckDB store and the reports, so a
user can find, copy or delete everything in one place:

    <data>/spool/              agent spool files (line protocol)
    <data>/hushmon.duckdb      the embedded store (hushmon ingest, hushmon run)
    <data>/hushmon.lake/       the cluster store (hushmon collect; readers prefer it)
    <data>/reports/<job>/      report.html, digest.json, exports
    <data>/run/agent.sock      the embedded agent's control socket

<data> is --data-dir, else $HUSHMON_DATA, else ~/.local/share/hushmon.

Everything there holds job data (every job's measurements, the
applications' event text), so it is its owner's only: the folder is made
0700, and the commands that write the store and reports do it under
:func:`owner_only`. A job id or host name comes from the data (an agent,
the wire) and becomes a folder name only through :func:`path_component`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# Kept as they are in a file name; everything else is written %XX. Slurm's
# job ids (42, 42_7 for arrays, 42+1 for heterogeneous jobs) and host names
# pass unchanged.
_PLAIN = re.compile(r"[A-Za-z0-9_.+=,@-]")
# Below NAME_MAX (255 bytes) with room for a suffix such as ".parquet".
MAX_COMPONENT_BYTES = 200
_HASH_CHARS = 16


def path_component(name: str) -> str:
    """``name`` (a job id, a host: data from an agent or the wire) as one
    file name that stays inside its folder: '/', NUL, a leading '.' (so
    never '.' or '..') and every character outside a small plain set are
    written %XX (their UTF-8 bytes), '%' too, so two names never share a
    folder. A name longer than :data:`MAX_COMPONENT_BYTES` keeps its start
    and ends in '~' and a hash of the whole."""
    out = []
    for i, ch in enumerate(name):
        if _PLAIN.fullmatch(ch) and not (i == 0 and ch == "."):
            out.append(ch)
        else:
            out += [f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")]
    text = "".join(out) or "%"  # '%' alone: no other name encodes to it
    if len(text) > MAX_COMPONENT_BYTES:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
        text = text[: MAX_COMPONENT_BYTES - _HASH_CHARS - 1] + "~" + digest[:_HASH_CHARS]
    return text


@contextlib.contextmanager
def owner_only() -> Iterator[None]:
    """Files and folders this process makes meanwhile are its owner's only
    (umask 077): the store, its write-ahead log (which DuckDB makes again
    after every checkpoint), reports and exports. Programs started meanwhile
    inherit it, so a job is never run inside."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


Command = Callable[[argparse.Namespace], int]


def writes_job_data(command: Command) -> Command:
    """A command that writes the store, reports or exports runs :func:`owner_only`."""

    @functools.wraps(command)
    def private(args: argparse.Namespace) -> int:
        with owner_only():
            return command(args)

    return private


def drop_world_access(path: Path) -> None:
    """Takes the world's read/write bits off a file of ours made before
    hushmon kept job data private (a store made 0644); a group a site gave
    on purpose keeps its bits."""
    with contextlib.suppress(FileNotFoundError):
        st = path.stat()
        if st.st_uid == os.geteuid() and st.st_mode & 0o007:
            path.chmod(st.st_mode & 0o7770)


@dataclass(frozen=True)
class DataDir:
    root: Path

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def database(self) -> Path:
        """The embedded store (``hushmon ingest`` writes it)."""
        return self.root / "hushmon.duckdb"

    @property
    def lake(self) -> Path:
        """The cluster store (``hushmon collect`` writes it, docs/store.md)."""
        return self.root / "hushmon.lake"

    @property
    def store(self) -> Path:
        """The store readers open by default: the lake where collectors write
        one, else the embedded file."""
        return self.lake if (self.lake / "catalog.sqlite").exists() else self.database

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def agent_socket(self) -> Path:
        return self.run / "agent.sock"

    @property
    def reports_root(self) -> Path:
        return self.root / "reports"

    def reports(self, job: str) -> Path:
        """A job's report folder; ``job`` may come from the data."""
        return self.reports_root / path_component(job)

    def create(self) -> DataDir:
        # Only a folder made here is made private; one that exists keeps its mode.
        self.root.parent.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(mode=0o700, exist_ok=True)
        for path in (self.spool, self.run):
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
            "--db",
            type=Path,
            metavar="PATH",
            help="the store: a DuckDB file or a *.lake folder (default: <data>/hushmon.lake "
            "where a collector writes one, else <data>/hushmon.duckdb)",
        )


def from_args(args: argparse.Namespace, default: str = "store") -> tuple[DataDir, Path]:
    """The data folder and store that ``add_data_dir_options`` asked for:
    ``--db``, else by ``default``: "store" (readers: the lake when there is
    one, else the embedded file), "database" (``hushmon ingest`` writes the
    embedded file) or "lake" (``hushmon collect`` writes the lake)."""
    dd = data_dir(args.data_dir)
    explicit = getattr(args, "db", None)
    if explicit:
        return dd, Path(explicit)
    return dd, {"store": dd.store, "database": dd.database, "lake": dd.lake}[default]
