"""Reading the store from a long-running server (``hushmon serve``).

The embedded DuckDB file is opened for each use and closed at once: while
a process holds it open, ``hushmon run`` / ``hushmon ingest`` cannot write
it. A lake is opened once and kept: its readers never block its writers,
each query sees the newest commit, and opening one costs about 1 CPU-s
(the catalog attached, the extensions loaded: bench/bench_job_history.py),
which a request should not pay."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb

from hushmon.store.lake import is_lake


class StoreReader:
    def __init__(self, store: Callable[[], Path]) -> None:
        self._store = store  # where the store is now (the lake once a collector made one)
        self._lock = threading.Lock()
        self._lake: tuple[Path, duckdb.DuckDBPyConnection] | None = None

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
            if self._lake is None or self._lake[0] != path:
                self._lake = (path, open_store_readonly(path))
            try:
                yield self._lake[1]
            except duckdb.Error:
                # a connection in a bad state is not kept for the next request
                self._lake[1].close()
                self._lake = None
                raise
