"""DuckDB's own allocator as store/duckdb_heap.py reads it: a table that
DuckDB builds is counted there (and not by glibc), and the pages it frees
are counted as kept until DuckDB's decay gives them back."""

from __future__ import annotations

import duckdb
import pytest

from hushmon.store import duckdb_heap
from hushmon.transport.memdump import malloc_mib


def test_a_duckdb_table_is_counted_by_duckdbs_allocator() -> None:
    before = duckdb_heap.stats_mib()
    if before is None:
        pytest.skip("this DuckDB library exports no duckdb_je_mallctl (not a Linux build)")
    glibc_before = malloc_mib()
    con = duckdb.connect()
    try:
        # ~48 MB of BIGINTs, held by the connection
        con.execute("CREATE TABLE t AS SELECT range AS a, range * 2 AS b FROM range(3000000)")
        held = duckdb_heap.stats_mib()
        glibc_held = malloc_mib()
        con.execute("DROP TABLE t")
        freed = duckdb_heap.stats_mib()
    finally:
        con.close()
    assert held is not None and freed is not None
    assert held["allocated"] - before["allocated"] > 30, (before, held)
    assert held["resident"] >= held["allocated"]
    if glibc_before is not None and glibc_held is not None:
        # the table's bytes are not glibc's: that is why mallinfo2 missed them
        assert glibc_held["in_use"] - glibc_before["in_use"] < 10, (glibc_before, glibc_held)
    assert freed["allocated"] - before["allocated"] < 10, (before, freed)
    # freed, not yet given back: resident beyond what is allocated
    assert freed["dirty"] > 20, freed
