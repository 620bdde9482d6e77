"""``hushmon collect`` into a lake: the raw path (collect_raw.py) makes a
RawGroup, the lake writer (lake_writer.py) appends it in one commit, and
only then are the messages acked. Summaries are written as into the
embedded store (collect_summaries.py), in one lake transaction per group.

Several collectors may write one lake. Raw batches: any number share the
``collect-raw`` consumer (the writer's recheck keeps storage exactly once).
Summaries: appended only (rack partials as rows, merged when read through
the view ``merged_summaries``); any number of ``--summaries-only``
collectors share ``collect-sum``: a message's overlap with stored partials
is looked up in the transaction that stores it, under the lake's commit
lock, so each group sees every group committed before it
(docs/transport.md, "Summaries with several collectors").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb

from hushmon.errors import HushmonError
from hushmon.store.lake import is_transient
from hushmon.transport.collect_raw import RawGroupBuilder
from hushmon.transport.collect_records import CollectStats, Event, Message, sender_of
from hushmon.transport.collect_store import _store_failure as embedded_failure
from hushmon.transport.collect_store import count_raw_events
from hushmon.transport.collect_summaries import store_summary_group
from hushmon.transport.lake_writer import LakeWriter, commit
from hushmon.transport.natsserver import MAX_PAYLOAD_BYTES
from hushmon.transport.raw_group import RawGroup
from hushmon.transport.set_aside import write_or_set_aside


class LakeCollectorStore:
    """The collector's writer for a lake; the same calls as CollectorStore."""

    def __init__(self, lake_path: Path, max_batch_bytes: int = MAX_PAYLOAD_BYTES) -> None:
        self.db_path = Path(lake_path)
        self.stats = CollectStats()
        self.writer = LakeWriter(self.db_path)
        self.builder = RawGroupBuilder(max_batch_bytes)
        self.builder.newest_seq = self.writer.newest_seqs()

    def close(self) -> None:
        self.writer.close()

    # ---- raw batches -------------------------------------------------------

    def write_raw(self, messages: list[Message]) -> list[bytes]:
        """Stores the batches not stored yet in one commit; returns the stored
        batches' bytes (for forwarding). Raises HushmonError when the store
        fails (nothing of the call is stored, nothing must be acked); a
        message that breaks the group any other way is set aside alone."""
        try:
            return self._write_raw_group(messages)
        except Exception as exc:
            self.builder.forget()  # its series were not stored
            if _store_failure(exc):
                raise HushmonError(f"store {self.db_path}: {str(exc).splitlines()[0]}") from exc
            if len(messages) == 1:
                self._set_aside(messages[0], exc, "rejected")
                return []
            return [data for m in messages for data in self.write_raw([m])]

    def _write_raw_group(self, messages: list[Message]) -> list[bytes]:
        group = self.builder.build(messages)
        appended, events = self.writer.append(group)
        self.builder.stored(group, appended.kept)
        self.stats.raw_messages += len(messages)
        count_raw_events(self.stats, events)
        lines = group.batches.column("lines").to_pylist()
        self.stats.batches_stored += len(appended.kept)
        self.stats.lines_stored += sum(lines[i] for i in appended.kept)
        self.stats.values_stored += appended.values
        # the stored batches' bytes (for forwarding), in the group's order
        return [self.builder.payloads[i] for i in appended.kept]

    def write_group(self, group: RawGroup, messages: int) -> None:
        """Stores a group the C source made (fastcollect.FastSource: it has
        checked and parsed the messages already) in one commit."""
        try:
            appended, events = self.writer.append(group)
        except Exception as exc:
            raise HushmonError(f"store {self.db_path}: {str(exc).splitlines()[0]}") from exc
        self.stats.raw_messages += messages
        count_raw_events(self.stats, events)
        lines = group.batches.column("lines").to_pylist()
        self.stats.batches_stored += len(appended.kept)
        self.stats.lines_stored += sum(lines[i] for i in appended.kept)
        self.stats.values_stored += appended.values

    def _set_aside(self, msg: Message, exc: Exception, kind: str) -> None:
        """A message that fails alone is poison: recorded with its sender and
        acked (collect_store.CollectorStore._set_aside says why)."""
        sender = sender_of(msg)
        why = f"not storable ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
        event = Event(kind, sender, msg.subject[:200], None, None, 1, why)
        try:
            self.writer.append_events([event])
        except Exception as again:
            raise HushmonError(f"store {self.db_path}: {again}") from again
        if kind == "rejected":
            self.stats.raw_messages += 1
            self.stats.rejected_batches += 1
        else:
            self.stats.summary_messages += 1
            self.stats.rejected_summaries += 1
        self.stats.note(f"set aside a message from {sender} ({msg.subject[:80]}): {why}")

    # ---- summaries ---------------------------------------------------------

    def write_summaries(self, messages: list[Message]) -> None:
        """Stores the summaries in one commit (collect_summaries.py); a message
        that breaks the group is set aside (set_aside.py)."""

        def run(body: Callable[[duckdb.DuckDBPyConnection], None]) -> None:
            commit(self.writer.con, body, self.writer.commits)

        write_or_set_aside(
            messages,
            lambda group: store_summary_group(group, run, self.stats),
            self._after_failed_summaries,
            lambda msg, exc: self._set_aside(msg, exc, "summary_rejected"),
        )
        self.writer.summaries_committed()

    def _after_failed_summaries(self, exc: Exception) -> None:
        if _store_failure(exc):
            raise HushmonError(f"store {self.db_path}: {str(exc).splitlines()[0]}") from exc


def _store_failure(exc: BaseException) -> bool:
    """The store's own failures (collect_store._store_failure), a lake commit
    that other writers kept failing (HushmonError from lake_commit) and a
    catalog error that another writer causes."""
    return (
        embedded_failure(exc)
        or isinstance(exc, HushmonError)
        or (isinstance(exc, duckdb.Error) and is_transient(exc))
    )
