"""A fetched group written whole, else each message alone, and a message that
still fails alone set aside: what both stores (collect_store.py, the embedded
DuckDB file; collect_lake.py, the lake) do with a group of summaries.

A poison message (one the store cannot take) must neither stop collection nor
hold back the valid messages fetched with it; unacked, it came back on every
restart. A failure of the store itself (disk, lock, a lake commit that other
writers kept failing) is not a message's: ``after_failure`` raises it, and
nothing of the group is acked.
"""

from __future__ import annotations

from collections.abc import Callable

from hushmon.transport.collect_records import Message


def write_or_set_aside(
    messages: list[Message],
    write_group: Callable[[list[Message]], None],
    after_failure: Callable[[Exception], None],
    set_aside: Callable[[Message, Exception], None],
) -> None:
    """``write_group(messages)`` in one transaction; when it fails and
    ``after_failure`` does not raise, each message again alone, and
    ``set_aside`` the one that fails alone."""
    try:
        write_group(messages)
    except Exception as exc:  # noqa: BLE001 - a store failure or a poison message
        after_failure(exc)
        if len(messages) == 1:
            set_aside(messages[0], exc)
            return
        for m in messages:
            write_or_set_aside([m], write_group, after_failure, set_aside)
