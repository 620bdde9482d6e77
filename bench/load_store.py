"""What bench_transport_load.py counts in the store after the run (a lake or
the embedded DuckDB file, opened read-only as any reader does): batches lost
and duplicated by (host, epoch, seq), values stored twice, the delay from a
period's end to a collector taking its batch, and the bytes on disk per
stored value."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HUSHMON = REPO / ".venv/bin/hushmon"

# Above this many values the exact check (every (series, time) counted) needs
# more memory and minutes than the run; the count check stands instead.
EXACT_VALUE_CHECK_MAX = 30_000_000
COMPACT_TIMEOUT_S = 180.0


@dataclass
class StoreCounts:
    batch_rows: int  # rows of transport_batches for the simulated agents
    batches: int  # distinct (host, epoch, seq) among them
    values: int  # samples stored
    values_per_batch: int  # of one batch (host n00000, period 0)
    duplicated_values: int  # values stored more than once for one (series, time)
    exact_values_check: bool  # duplicated_values counted per (series, time)
    taken_p50_s: float  # end of period -> a collector received its batch
    taken_p99_s: float
    store_bytes: int  # the store on disk (every file of the lake, or the DuckDB file)

    @property
    def duplicated_batches(self) -> int:
        return self.batch_rows - self.batches

    @property
    def bytes_per_value(self) -> float:
        return self.store_bytes / self.values if self.values else 0.0


def store_bytes(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    wal = path.with_name(path.name + ".wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def count_store(path: Path, periods: int, t0_ns: int) -> StoreCounts:
    from hushmon.store.schema import open_store_readonly

    con = open_store_readonly(path)
    try:
        rows, distinct = con.execute(
            "SELECT count(*), count(DISTINCT (host, epoch, seq)) FROM transport_batches "
            "WHERE host LIKE 'n%' AND seq BETWEEN 1 AND ?",
            [periods],
        ).fetchone()
        (values,) = con.execute("SELECT count(*) FROM samples").fetchone()
        (per_batch,) = con.execute(
            "SELECT count(*) FROM samples WHERE time_ns = ? AND series_id IN "
            "(SELECT series_id FROM series WHERE host = 'n00000')",
            [t0_ns],
        ).fetchone()
        exact = values <= EXACT_VALUE_CHECK_MAX
        if exact:
            (dup,) = con.execute(
                "SELECT coalesce(sum(c - 1), 0) FROM "
                "(SELECT count(*) AS c FROM samples GROUP BY series_id, time_ns)"
            ).fetchone()
        else:  # every batch holds the same fields: more values than that are duplicates
            dup = max(0, int(values) - int(distinct) * int(per_batch))
        # seq s is period s-1, published at the end of its period: t0 + s seconds
        p50, p99 = con.execute(
            "SELECT quantile_cont(epoch_us(received_at) / 1e6 - (? + seq * 1e9) / 1e9, "
            "[0.5, 0.99]) FROM transport_batches WHERE host LIKE 'n%'",
            [t0_ns],
        ).fetchone()[0] or (float("nan"), float("nan"))
    finally:
        con.close()
    return StoreCounts(
        batch_rows=int(rows),
        batches=int(distinct),
        values=int(values),
        values_per_batch=int(per_batch),
        duplicated_values=int(dup),
        exact_values_check=exact,
        taken_p50_s=float(p50),
        taken_p99_s=float(p99),
        store_bytes=store_bytes(path),
    )


@dataclass
class Compaction:
    ok: bool
    seconds: float
    bytes_after: int
    line: str  # its first line, or why it failed


def compact(path: Path) -> Compaction:
    """``hushmon store compact`` once the collectors stopped, with no grace for
    readers (there are none): the lake as a site keeps it, small files merged."""
    t = time.monotonic()
    try:
        r = subprocess.run(
            [str(HUSHMON), "store", "compact", "--db", str(path), "--grace", "0"],
            capture_output=True,
            text=True,
            check=False,
            timeout=COMPACT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return Compaction(False, COMPACT_TIMEOUT_S, store_bytes(path), "timed out")
    seconds = time.monotonic() - t
    text = (r.stdout + r.stderr).strip().splitlines()
    line = text[0] if r.returncode == 0 and text else (text[-1] if text else f"exit {r.returncode}")
    return Compaction(r.returncode == 0, seconds, store_bytes(path), line)
