"""Reading the store from a long-running server (``hushmon serve``).

The embedded DuckDB file is opened for each use and closed at once: while
a process holds it open, ``hushmon run`` / ``hushmon ingest`` cannot write
it. A lake is opened once and kept: its readers never block its writers,
each query sees the newest commit, and opening one costs about 1 CPU-s
(the catalog attached, the extensions loaded: bench/bench_job_history.py),
which a request should not pay. It is opened again every
:data:`REOPEN_EVERY_QUERIES` uses: DuckLake's catalog keeps about 33 KB
of each query until its database is closed (400 job searches grew a
reader's glibc heap by 12.8 MiB, which a close gave back whole), as it
does for the collector's writer (transport/lake_writer.py)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb

from hushmon.store.lake import is_lake
from hushmon.transport.memdump import give_back_after_close

# Uses of a kept lake connection between reopens (module doc): what the
# catalog keeps stays under ~8 MiB, and the reopen's ~1 CPU-s is under 2 %
# of the 256 requests' own work (0.1-0.35 CPU-s each at 100,000 jobs).
REOPEN_EVERY_QUERIES = 256


class StoreReader:
    def __init__(self, store: Callable[[], Path]) -> None:
        self._store = store  # where the store is now (the lake once a collector made one)
        self._lock = threading.Lock()
        self._lake: tuple[Path, duckdb.DuckDBPyConnection] | None = None
        self._uses = 0  # of the kept lake connection since it was opened
        self.opens = 0  # of a lake connection, over the reader's life

    @property
    def path(self) -> Path:
        return self._store()

    def exists(self) -> bool:
        return self.path.exists()

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """A read-only connection, used by one thread at a time."""
        from hushmon.store.schema import open_store_readonly

        path = self.path
        with self._lock:
            if not is_lake(path):
                con = open_store_readonly(path)
                try:
                    yield con
                finally:
                    con.close()
                return
            if self._lake is not None and (
                self._lake[0] != path or self._uses >= REOPEN_EVERY_QUERIES
            ):
                self._close_lake()
            if self._lake is None:
                self._lake = (path, open_store_readonly(path))
                self._uses = 0
                self.opens += 1
            self._uses += 1
            try:
                yield self._lake[1]
            except duckdb.Error:
                # a connection in a bad state is not kept for the next request
                self._close_lake()
                raise

    def _close_lake(self) -> None:
        """The kept lake connection closed and its memory given back."""
        if self._lake is None:
            return
        with contextlib.suppress(duckdb.Error):
            self._lake[1].close()
        self._lake = None
        give_back_after_close()
