"""memdump's reading of /proc/self/smaps (transport/memdump.py): every
mapping with its resident size, and the largest anonymous ones named by
their likely owner, so that a report shows which one grows."""

from __future__ import annotations

import mmap
import os
import tracemalloc

import pytest

from hushmon.transport.memdump import (
    GLIBC_HEAP_ALIGN,
    Mapping,
    anonymous_by_owner,
    guess_owner,
    largest_anonymous,
    mappings,
    mappings_mib,
    python_arenas_mib,
)

MIB = 1 << 20


def test_a_touched_anonymous_mapping_is_read_with_its_resident_size() -> None:
    size = 24 * MIB
    buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        buf[: 10 * MIB] = b"x" * (10 * MIB)  # 10 of its 24 MiB made resident
        ours = [m for m in mappings() if m.kind == "anon" and m.size_kib >= size >> 10]
        # the kernel may merge it with a neighbour made alike, never shrink it
        assert any(m.rss_kib >= 10 << 10 for m in ours), ours
        assert mappings_mib()["anon"] >= 10
    finally:
        buf.close()


def test_mappings_are_sorted_by_address_and_classified() -> None:
    maps = mappings()
    starts = [m.start for m in maps]
    assert starts == sorted(starts)
    kinds = {m.kind for m in maps}
    assert {"file", "anon", "stack"} <= kinds, kinds  # python's .so files, its heap, its stack
    assert all(m.rss_kib <= m.size_kib for m in maps)


def test_owner_guesses_go_by_shape() -> None:
    arena = Mapping(7 * GLIBC_HEAP_ALIGN, 132, "rw-p", "", 100)
    assert guess_owner(arena) == "glibc arena"
    stack = Mapping(0x7F00_0000_1000, 8 << 10, "rw-p", "", 40)
    assert guess_owner(stack) == "thread stack"
    assert guess_owner(Mapping(0x7F00_0010_0000, 1 << 10, "rw-p", "", 1024)) == "?"
    assert guess_owner(Mapping(0x2B9F_B800_000, 64 << 10, "rw-p", "", 20 << 10)) == "mimalloc"
    # an arena of 1 GiB, wherever the kernel put it
    assert guess_owner(Mapping(0x7F4B_6580_0000, 1 << 20, "rw-p", "", 54 << 10)) == "mimalloc"
    # larger than a glibc heap can be, although aligned: not one
    assert guess_owner(Mapping(GLIBC_HEAP_ALIGN, 128 << 10, "rw-p", "", 10)) == "?"


def test_arrow_s_pool_is_seen_as_mimalloc_where_arrow_uses_it() -> None:
    import pyarrow as pa

    if pa.default_memory_pool().backend_name != "mimalloc":
        pytest.skip(f"this Arrow's pool is {pa.default_memory_pool().backend_name}")
    table = pa.array(range(2_000_000), pa.int64())  # 15 MiB from Arrow's pool
    owners = {guess_owner(m) for m in mappings() if m.kind == "anon" and m.rss_kib >= 8 << 10}
    assert "mimalloc" in owners, (owners, len(table))


def test_largest_anonymous_lists_the_most_resident_first_and_skips_files() -> None:
    maps = [
        Mapping(0x1000, 4096, "rw-p", "", 1024),
        Mapping(0x2010_0000, 8192, "rw-p", "", 4096),
        Mapping(0x3000_0000, 65536, "r-xp", "/usr/lib/libduckdb.so", 60000),
        Mapping(0x4000_0000, 2048, "rw-p", "", 0),
    ]
    assert largest_anonymous(maps) == "20100000: 4.0/8.0 (thread stack), 1000: 1.0/4.0 (?)"
    assert largest_anonymous(maps, 1) == "20100000: 4.0/8.0 (thread stack)"
    assert largest_anonymous([]) == "none"


def test_python_s_object_arenas_are_read_and_stderr_is_given_back(
    capfd: pytest.CaptureFixture[str],
) -> None:
    before = python_arenas_mib()
    assert before is not None
    objects = [bytearray(100) for _ in range(200_000)]  # ~30 MiB of small blocks
    grown = python_arenas_mib()
    assert grown is not None and grown["arenas_mib"] >= before["arenas_mib"] + 10
    assert grown["highwater_mib"] >= grown["arenas_mib"]
    del objects[1::2]  # every other one freed: their arenas stay, half free
    holed = python_arenas_mib()
    assert holed is not None and holed["free_mib"] >= before["free_mib"] + 5
    assert holed["arenas_mib"] >= grown["arenas_mib"] - 2
    os.write(2, b"after\n")  # the borrowed stderr is this process's again
    assert capfd.readouterr().err == "after\n"


def test_python_s_object_arenas_are_not_read_while_tracemalloc_traces() -> None:
    tracemalloc.start()
    try:
        assert python_arenas_mib() is None  # its hooks hide pymalloc
    finally:
        tracemalloc.stop()
    assert python_arenas_mib() is not None


def test_anonymous_memory_is_split_by_owner() -> None:
    maps = [
        Mapping(5 * GLIBC_HEAP_ALIGN, 8192, "rw-p", "", 6 << 10),  # a glibc arena
        Mapping(0x7F4B_6580_0000, 1 << 20, "rw-p", "", 2 << 10),  # mimalloc's arena
        Mapping(0x7F4B_0010_0000, 20 << 10, "rw-p", "", 20 << 10),  # anything else
        Mapping(0x7F4B_0200_0000, 1 << 10, "r-xp", "/usr/lib/libc.so.6", 1 << 10),
    ]
    duck = {"duckdb": {"resident": 3.0}, "ducklake": None}
    line = anonymous_by_owner(maps, duck, {"arenas_mib": 12.0})
    assert line == (
        "anonymous 28.0 MiB by owner: glibc's other arenas 6.0, DuckDB's allocators 3.0, "
        "Python's object arenas 12.0, mimalloc 2.0, the rest 5.0"
    )
