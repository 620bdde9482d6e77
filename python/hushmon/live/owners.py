"""Who owns each live job, for the live view's per-user filter.

The summaries on NATS carry a job id only. Its owner comes from the job
records in the store (``hushmon run`` writes one when the job starts) and,
where Slurm is there, from ``squeue`` (every running job with its user). A
job whose owner neither knows is shown to admins only. Refreshed in a
thread at most every :data:`REFRESH_S`, so a request never waits for it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import duckdb

from hushmon.errors import HushmonError
from hushmon.history.reader import StoreReader
from hushmon.transport.slurmjob import squeue_users

REFRESH_S = 5.0
SQUEUE_TIMEOUT_S = 5.0


def squeue_owners() -> dict[str, str]:
    """job id -> user of every job Slurm lists ({} without Slurm)."""
    return squeue_users(SQUEUE_TIMEOUT_S) or {}


def record_owners(reader: StoreReader, jobs: list[str]) -> dict[str, str]:
    """job id -> owner of those of ``jobs`` (the live ones) with a record
    naming one: a site's 100,000 recorded jobs are not read every 5 s."""
    from hushmon.history.query import owners_of

    if not jobs or not reader.exists():
        return {}
    try:
        with reader.connection() as con:
            return owners_of(con, jobs)
    except (HushmonError, duckdb.Error):
        return {}  # a writer holds the embedded file now: next time


class LiveOwners:
    def __init__(self, store: StoreReader | None, live_jobs: Callable[[], list[str]]) -> None:
        self.store = store
        self.live_jobs = live_jobs
        self._owners: dict[str, str] = {}
        self._at = -REFRESH_S
        self._busy = threading.Lock()

    def current(self) -> dict[str, str]:
        if time.monotonic() - self._at >= REFRESH_S and self._busy.acquire(blocking=False):
            self._at = time.monotonic()
            threading.Thread(target=self._refresh, daemon=True).start()
        return self._owners

    def _refresh(self) -> None:
        try:
            jobs = self.live_jobs()
            owners = record_owners(self.store, jobs) if self.store is not None else {}
            owners.update(squeue_owners())  # Slurm's word on a running job wins
            self._owners = owners
        except (HushmonError, OSError, RuntimeError, duckdb.Error):
            pass  # a failed refresh keeps the last map (RuntimeError: the jobs changed meanwhile)
        finally:
            self._busy.release()

    def refresh_now(self) -> dict[str, str]:
        """Wait for a fresh map (tests, the first request)."""
        with self._busy:
            pass
        self._at = -REFRESH_S
        self.current()
        with self._busy:
            return self._owners
