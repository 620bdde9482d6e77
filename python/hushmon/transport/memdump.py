"""A running collector's memory, on request: ``kill -USR2 PID`` writes one
report to its log (stderr), between two groups.

What it says, so that a growing resident size can be split into its parts:
the kernel's view (VmRSS as anonymous, file-backed and shared pages),
glibc's heap (``mallinfo2``: bytes handed out and bytes free but kept),
DuckDB's buffer manager per tag (``duckdb_memory()``) and its settings that
bound it, Python's heap (``tracemalloc``: the top allocation sites by size
and their growth since the last report, only when the process was started
with ``HUSHMON_TRACEMALLOC=1``: tracing costs CPU on every allocation), the
garbage collector's counts, and the sizes of the collector's long-lived
containers. docs/transport.md, "Memory over time", says how to read it.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import duckdb

from hushmon.daemon_env import ARROW_POOL_ENV, libc_function
from hushmon.procstat import status_kib
from hushmon.store import duckdb_heap

TRACE_ENV = "HUSHMON_TRACEMALLOC"
# frames kept per traced allocation: enough to tell a caller of DuckDB's
# Python API from one of nats-py's, cheap enough to leave on for an hour
TRACE_FRAMES = 4
TOP_SITES = 12
_STATUS_FIELDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM")


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
            "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def start_tracing_if_asked() -> bool:
    """tracemalloc on when HUSHMON_TRACEMALLOC=1 (before the work starts, so
    that what the collector holds is traced from its first allocation)."""
    if os.environ.get(TRACE_ENV, "") not in ("", "0") and not tracemalloc.is_tracing():
        tracemalloc.start(TRACE_FRAMES)
    return tracemalloc.is_tracing()


def malloc_mib() -> dict[str, float] | None:
    """glibc's heap: in use (small blocks and mmapped ones) and free but
    kept, over every arena; None where mallinfo2 is missing (musl, glibc
    before 2.33)."""
    fn = libc_function("mallinfo2")
    if fn is None:
        return None
    fn.restype = _MallInfo2
    m = fn()
    mib = 1 << 20
    return {
        "in_use": (m.uordblks + m.hblkhd) / mib,
        "free_kept": m.fordblks / mib,
        "arena": m.arena / mib,
        "mmapped": m.hblkhd / mib,
    }


@dataclass(frozen=True)
class Mapping:
    """One of the process's mappings (a VMA of /proc/self/smaps)."""

    start: int
    size_kib: int
    perms: str
    path: str
    rss_kib: int

    @property
    def kind(self) -> str:
        if self.path == "[heap]":
            return "heap"
        if self.path.startswith("[stack"):
            return "stack"
        return "anon" if not self.path or self.path.startswith("[") else "file"


# glibc's arenas other than the main one live in heaps of at most 64 MiB
# (HEAP_MAX_SIZE on 64-bit), each aligned to its own maximum size: an
# anonymous mapping that starts on such a boundary is most likely one
GLIBC_HEAP_ALIGN = 64 << 20
# a thread's stack: glibc's default 8 MiB, under a guard page of its own
THREAD_STACK_KIB = 8 << 10
# mimalloc (Arrow's default pool) reserves its arenas 1 GiB at a time, and
# asks for other regions at hint addresses from 2 TiB up to 30 TiB, far
# below where glibc's mmaps land
MIMALLOC_ARENA_KIB = 1 << 20
MIMALLOC_HINTS = range(2 << 40, 30 << 40)
LARGEST_SHOWN = 8


def mappings() -> list[Mapping]:
    """The process's mappings, in address order; [] where smaps is unreadable."""
    out: list[Mapping] = []
    try:
        with open("/proc/self/smaps") as f:
            head: list[str] | None = None
            for line in f:
                first = line.split(maxsplit=5)
                if not first:
                    continue
                if "-" in first[0] and len(first) >= 5 and ":" not in first[0]:
                    head = first
                elif first[0] == "Rss:" and head is not None:
                    lo, hi = (int(x, 16) for x in head[0].split("-"))
                    path = head[5].strip() if len(head) > 5 else ""
                    out.append(Mapping(lo, (hi - lo) >> 10, head[1], path, int(first[1])))
                    head = None
    except (OSError, ValueError, IndexError):
        return []
    return out


def mappings_mib(maps: list[Mapping] | None = None) -> dict[str, float]:
    """Resident MiB of the process's mappings by kind: glibc's main heap,
    anonymous mappings (glibc's other arenas, large blocks, Python's object
    arenas, Arrow's allocator), stacks, and files (the libraries: DuckDB's
    alone is ~60 MiB)."""
    kinds = {"heap": 0, "anon": 0, "stack": 0, "file": 0}
    for m in mappings() if maps is None else maps:
        kinds[m.kind] += m.rss_kib
    return {k: v / 1024 for k, v in kinds.items()}


def guess_owner(m: Mapping) -> str:
    """Who most likely made an anonymous mapping, from its shape alone (the
    kernel merges neighbours made alike, so this is a hint: Python's 1 MiB
    object arenas have no shape of their own, and merge with thread stacks
    and glibc's large blocks)."""
    if m.start % GLIBC_HEAP_ALIGN == 0 and m.size_kib <= GLIBC_HEAP_ALIGN >> 10:
        return "glibc arena"
    if m.size_kib == THREAD_STACK_KIB:
        return "thread stack"
    if m.start in MIMALLOC_HINTS or m.size_kib == MIMALLOC_ARENA_KIB:
        return "mimalloc"
    return "?"


def largest_anonymous(maps: list[Mapping], n: int = LARGEST_SHOWN) -> str:
    """The n anonymous mappings that hold the most resident memory, each as
    address: resident/size MiB (its likely owner); a report's readers
    compare these between reports to see which one grows."""
    anon = sorted(
        (m for m in maps if m.kind == "anon" and m.rss_kib > 0),
        key=lambda m: m.rss_kib,
        reverse=True,
    )
    return (
        ", ".join(
            f"{m.start:x}: {m.rss_kib / 1024:.1f}/{m.size_kib / 1024:.1f} ({guess_owner(m)})"
            for m in anon[:n]
        )
        or "none"
    )


def python_arenas_mib() -> dict[str, float] | None:
    """Python's small-object allocator (pymalloc): its arenas now and at
    most (1 MiB each), and the bytes of their blocks in use and free. An
    arena goes back to the kernel only once every block in it is free, so
    after a peak of objects a few survivors can keep many arenas: the
    blocks free in them say how many. None where the interpreter does not
    say (sys._debugmallocstats writes to C's stderr, borrowed meanwhile;
    it says nothing while tracemalloc traces, or under PYTHONMALLOC=malloc)."""
    stats = getattr(sys, "_debugmallocstats", None)
    if stats is None:
        return None
    try:
        with tempfile.TemporaryFile("w+") as out:
            saved = os.dup(2)
            try:
                os.dup2(out.fileno(), 2)
                stats()
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            out.seek(0)
            text = out.read()
    except OSError:
        return None
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition("=")
        key = PYMALLOC_FIELDS.get(name.strip("# ").strip())
        if key is not None:
            found[key] = int(value.strip().replace(",", ""))
    if "arenas" not in found:
        return None
    arena_mib = PYMALLOC_ARENA_BYTES / (1 << 20)
    return {
        "arenas_mib": found["arenas"] * arena_mib,
        "highwater_mib": found.get("highwater", 0) * arena_mib,
        "in_use_mib": found.get("in_use", 0) / (1 << 20),
        "free_mib": found.get("free", 0) / (1 << 20),
    }


# sys._debugmallocstats's lines that python_arenas_mib reads
PYMALLOC_FIELDS = {
    "arenas allocated current": "arenas",
    "arenas highwater mark": "highwater",
    "bytes in allocated blocks": "in_use",
    "bytes in available blocks": "free",
}
PYMALLOC_ARENA_BYTES = 1 << 20  # 64-bit CPython 3.10 and later


def anonymous_by_owner(
    vmas: list[Mapping],
    duckdb_copies: dict[str, dict[str, float] | None],
    pyheap: dict[str, float] | None,
) -> str:
    """The anonymous resident memory split among the allocators that own
    it: glibc's arenas other than the main heap and mimalloc's by their
    mappings' shape (guess_owner), DuckDB's jemalloc copies and Python's
    object arenas by what they report; the rest is what none of them
    claims (thread stacks, glibc's mmapped blocks, a misread shape). It can
    read below zero: jemalloc's "resident" is an upper bound (pages mapped
    but never touched count), and an arena of Python's is counted whole."""
    anon = [m for m in vmas if m.kind == "anon"]
    total = sum(m.rss_kib for m in anon) / 1024
    by_shape = {
        owner: sum(m.rss_kib for m in anon if guess_owner(m) == owner) / 1024
        for owner in ("glibc arena", "mimalloc")
    }
    duck = sum(c["resident"] for c in duckdb_copies.values() if c is not None)
    python = pyheap["arenas_mib"] if pyheap is not None else 0.0
    rest = total - by_shape["glibc arena"] - by_shape["mimalloc"] - duck - python
    return (
        f"anonymous {total:.1f} MiB by owner: glibc's other arenas {by_shape['glibc arena']:.1f}, "
        f"DuckDB's allocators {duck:.1f}, Python's object arenas {python:.1f}, mimalloc "
        f"{by_shape['mimalloc']:.1f}, the rest {rest:.1f}"
    )


def arrow_mib() -> str:
    """Arrow's default pool: its allocator, bytes allocated now and at most."""
    import pyarrow as pa

    pool = pa.default_memory_pool()
    return (
        f"arrow pool {pool.backend_name}: allocated {pool.bytes_allocated() / (1 << 20):.1f} "
        f"MiB, max {pool.max_memory() / (1 << 20):.1f}"
    )


def malloc_trim() -> bool:
    """Gives glibc's free pages back to the kernel; False where it cannot."""
    fn = libc_function("malloc_trim")
    return bool(fn(0)) if fn is not None else False


def give_back_after_close() -> None:
    """After a long-running process closed a DuckDB database: what it freed
    back to the kernel. glibc keeps freed pages of its arenas otherwise, and
    the close switched DuckDB's background purge off for the whole process
    (store/duckdb_heap.py, docs/transport.md)."""
    malloc_trim()
    duckdb_heap.after_close()


def arrow_pool_for_a_daemon() -> dict[str, str]:
    """Arrow's buffers from glibc's heap (Arrow's system pool), tuned above,
    instead of mimalloc: after a compaction's backlog, mimalloc's arena held
    54 MiB of a summaries collector while Arrow had nothing allocated, and
    no trim gives that back; glibc's large blocks are mmapped and returned
    at free (an hour side by side: docs/transport.md, "Arrow's buffers from
    glibc"). Started by hushmon.cli, a daemon has Arrow's C++ default set
    before any import (daemon_env.py). Started otherwise (a test, ``python
    -c``), pyarrow's own calls move here, the Parquet writer's cannot, and
    the answer says so. A site's own ARROW_DEFAULT_MEMORY_POOL is kept."""
    import pyarrow as pa

    # Arrow's C++ default while pyarrow's own is unset, as in a fresh daemon
    cpp = pa.default_memory_pool().backend_name
    if cpp == "system" or ARROW_POOL_ENV in os.environ:
        return {"arrow_pool": cpp}
    pa.set_memory_pool(pa.system_memory_pool())
    return {"arrow_pool": f"system, its C++ parts {cpp} (set {ARROW_POOL_ENV} before start)"}


def duckdb_lines(con: duckdb.DuckDBPyConnection) -> list[str]:
    """duckdb_memory()'s tags that hold anything, and the settings that bound them."""
    try:
        rows = con.execute(
            "SELECT tag, memory_usage_bytes, temporary_storage_bytes FROM duckdb_memory() "
            "WHERE memory_usage_bytes > 0 OR temporary_storage_bytes > 0 ORDER BY 2 DESC"
        ).fetchall()
        settings = con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN "
            "('memory_limit', 'enable_external_file_cache', 'allocator_flush_threshold')"
        ).fetchall()
    except duckdb.Error as exc:
        return [f"duckdb: not read ({str(exc).splitlines()[0][:120]})"]
    total = sum(int(r[1]) for r in rows) / (1 << 20)
    tags = ", ".join(f"{t} {int(b) / (1 << 20):.1f}" for t, b, _ in rows) or "nothing"
    return [
        f"duckdb buffer manager {total:.1f} MiB: {tags}",
        "duckdb settings: " + ", ".join(f"{n}={v}" for n, v in settings),
    ]


class MemoryDump:
    """One report per request; the Python heap's growth is against the
    previous report's snapshot (the first: against the process's start)."""

    def __init__(self, out: TextIO, malloc_settings: dict[str, int | str] | None = None) -> None:
        self.out = out
        # what tune_malloc_for_a_daemon set at the start, said with the heap
        self.malloc_settings = malloc_settings or {}
        # set by the owner once it has them: its long-lived containers'
        # sizes, and its DuckDB connection (read only between its transactions)
        self.containers: Callable[[], dict[str, int]] = dict
        self.connection: Callable[[], duckdb.DuckDBPyConnection | None] = lambda: None
        self.requested = False
        self.reports = 0
        self._started = time.monotonic()
        self._last: tracemalloc.Snapshot | None = None

    def request(self) -> None:
        """The signal handler's part: the report is written at the next
        point where no group is being stored (write_if_requested)."""
        self.requested = True

    def write_if_requested(self) -> None:
        if self.requested:
            self.requested = False
            self.write()

    def write(self) -> None:
        self.reports += 1
        lines = self.lines()
        print("\n".join(f"memdump: {line}" for line in lines), file=self.out, flush=True)

    def lines(self) -> list[str]:
        up_s = time.monotonic() - self._started
        st = status_kib("self", _STATUS_FIELDS)
        out = [
            f"report {self.reports} at {up_s:.0f} s, pid {os.getpid()}: "
            + ", ".join(f"{k} {v / 1024:.1f}" for k, v in st.items())
            + " MiB"
        ]
        vmas = mappings()
        maps = mappings_mib(vmas) if vmas else {}
        out.append("resident by mapping MiB: " + ", ".join(f"{k} {v:.1f}" for k, v in maps.items()))
        out.append("largest anonymous mappings, resident/size MiB: " + largest_anonymous(vmas))
        copies = duckdb_heap.copies_mib()
        heap = malloc_mib()
        if heap is not None:
            out.append(
                "glibc heap MiB: "
                + ", ".join(f"{k} {v:.1f}" for k, v in heap.items())
                + "; set at start: "
                + (", ".join(f"{k} {v}" for k, v in self.malloc_settings.items()) or "nothing")
            )
        pyheap = python_arenas_mib()
        out.append(
            f"python object arenas MiB: {pyheap['arenas_mib']:.0f} (at most "
            f"{pyheap['highwater_mib']:.0f}), blocks in use {pyheap['in_use_mib']:.1f}, "
            f"free in them {pyheap['free_mib']:.1f}"
            if pyheap is not None
            # tracemalloc's hooks stand between Python and pymalloc, which
            # then says nothing: the traced bytes below stand for it
            else "python object arenas: not readable"
            + (f" while tracemalloc traces ({TRACE_ENV}=1)" if tracemalloc.is_tracing() else "")
        )
        if maps:
            out.append(anonymous_by_owner(vmas, copies, pyheap))
        for name, duck in copies.items():
            out.append(
                f"duckdb allocator ({name}) MiB: "
                + ", ".join(f"{k} {v:.1f}" for k, v in duck.items())
                if duck is not None
                else f"duckdb allocator ({name}): not readable (no duckdb_je_mallctl found)"
            )
        on = duckdb_heap.background_thread_on()
        arenas = duckdb_heap.arenas_of("duckdb")
        out.append(
            "duckdb allocator (duckdb) background purge thread: "
            + ("unknown" if on is None else "on" if on else "off")
            + "; freed pages kept by arena (MiB, its decay ms): "
            + (
                "not readable"
                if arenas is None
                else ", ".join(f"{i}: {mib:.1f} ({ms})" for i, mib, ms in arenas) or "none"
            )
        )
        out.append(arrow_mib())
        con = self.connection()
        if con is not None:
            out += duckdb_lines(con)
        out.append(f"gc: counts {gc.get_count()}, objects {len(gc.get_objects())}")
        sizes = self.containers()
        out.append("containers: " + ", ".join(f"{k}={v}" for k, v in sizes.items()))
        out += self._python_heap()
        out.append(self._given_back())
        return out

    def _given_back(self) -> str:
        """What the allocators gave back when told to, last (after every
        reading above): resident memory that a purge and a trim free was
        kept by an allocator, not held by the collector, so a rise that
        this takes back is no leak."""
        before = status_kib("self", ("RssAnon",)).get("RssAnon")
        copies = duckdb_heap.purge_every_copy()
        trimmed = malloc_trim()
        after = status_kib("self", ("RssAnon",)).get("RssAnon")
        if before is None or after is None:
            return "given back when told: RssAnon not readable"
        return (
            f"given back when told (DuckDB's allocators purged: {', '.join(copies) or 'none'}; "
            f"glibc trimmed: {'yes' if trimmed else 'no'}): RssAnon {before / 1024:.1f} -> "
            f"{after / 1024:.1f} MiB"
        )

    def _python_heap(self) -> list[str]:
        if not tracemalloc.is_tracing():
            return [f"python heap: not traced (start with {TRACE_ENV}=1)"]
        snap = tracemalloc.take_snapshot().filter_traces(
            (tracemalloc.Filter(False, tracemalloc.__file__),)
        )
        traced, peak = tracemalloc.get_traced_memory()
        out = [f"python heap traced {traced / (1 << 20):.1f} MiB (peak {peak / (1 << 20):.1f})"]
        out.append("top sites by size:")
        out += [f"  {_site(s)}" for s in snap.statistics("lineno")[:TOP_SITES]]
        if self._last is not None:
            grew = [d for d in snap.compare_to(self._last, "lineno") if d.size_diff > 0]
            out.append("top growth since the last report:")
            out += [
                f"  {d.size_diff / 1024:+.0f} KiB ({d.count_diff:+d} blocks) {_where(d.traceback)}"
                for d in grew[:TOP_SITES]
            ]
        self._last = snap
        return out


def _site(s: tracemalloc.Statistic) -> str:
    return f"{s.size / 1024:.0f} KiB in {s.count} blocks {_where(s.traceback)}"


def _where(tb: tracemalloc.Traceback) -> str:
    frame = tb[0]
    parts = Path(frame.filename).parts
    return f"{'/'.join(parts[-3:])}:{frame.lineno}"
