"""One transaction on a store, whichever kind it is.

The embedded DuckDB file takes a plain BEGIN ... COMMIT; a lake's commit
goes through :func:`hushmon.store.lake.lake_commit` (its commit lock, and a
retry when another writer's commit made the snapshot stale)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import duckdb

from hushmon.store.lake import lake_commit


def in_transaction(
    con: duckdb.DuckDBPyConnection, body: Callable[[duckdb.DuckDBPyConnection], object]
) -> None:
    """BEGIN, ``body(con)``, COMMIT; on any failure ROLLBACK and raise the
    failure (a rollback that fails too, on a connection already broken, is
    not what the caller needs to hear)."""
    con.execute("BEGIN TRANSACTION").fetchall()
    try:
        body(con)
        con.execute("COMMIT").fetchall()
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK").fetchall()
        raise


def store_transaction(
    con: duckdb.DuckDBPyConnection,
    lake: bool,
    body: Callable[[duckdb.DuckDBPyConnection], object],
) -> None:
    """``body`` in one transaction of the store ``con`` holds: a lake's
    (``lake``) through lake_commit, else :func:`in_transaction`."""
    if lake:
        lake_commit(con, body)
    else:
        in_transaction(con, body)
