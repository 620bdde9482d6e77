"""Load spool files into the store: vectorized, idempotent, transactional.

Files are read in batches of whole lines; :mod:`hushmon.store.fastparse`
turns a batch into columns (key, field, time, value) with no Python loop per
line, two batches at a time on two threads; DuckDB takes the columns as one
Arrow table. Lines the fast path cannot take safely go to the exact parser
(:mod:`hushmon.store.lineproto`), which stores them or says why not, with
file:line.

Idempotency: a file already ingested with the same content is skipped whole;
samples whose (series, time) are already stored are not stored again. Each
batch of files is one transaction, so a failure stores nothing of the batch
and loses nothing stored before.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute

from hushmon.errors import HushmonError
from hushmon.progress import bar
from hushmon.store import lineproto
from hushmon.store.fastparse import FastBatch, parse_batch
from hushmon.store.schema import open_store
from hushmon.store.transaction import in_transaction

# Text per parse batch: large enough that per-batch costs vanish, small enough
# that two batches in flight stay well under a gigabyte of memory.
BATCH_BYTES = 64 << 20
MAX_LISTED_REJECTS = 1000


@dataclass
class Rejected:
    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class IngestReport:
    db_path: Path
    spool_dir: Path
    files_ingested: int = 0
    files_already_ingested: int = 0
    partial_files: int = 0
    lines_read: int = 0
    values_stored: int = 0
    duplicate_values: int = 0
    job_periods_stored: int = 0
    string_fields_skipped: int = 0
    rejected_lines: int = 0
    rejected: list[Rejected] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def values_per_s(self) -> float:
        return self.values_stored / self.seconds if self.seconds > 0 else 0.0

    def reject(self, file: str, line: int, reason: str) -> None:
        self.rejected_lines += 1
        if len(self.rejected) < MAX_LISTED_REJECTS:
            self.rejected.append(Rejected(file, line, reason))

    def summary_lines(self) -> list[str]:
        lines = [
            f"ingested {self.files_ingested} spool file(s) from {self.spool_dir} into "
            f"{self.db_path}: {self.values_stored:,} values in {self.seconds:.1f} s",
        ]
        if self.jobs:
            lines.append(f"jobs seen: {', '.join(self.jobs)}")
        if self.files_already_ingested:
            lines.append(f"skipped {self.files_already_ingested} file(s) already ingested")
        if self.partial_files:
            lines.append(f"read {self.partial_files} open spool file(s) up to their last line")
        if self.duplicate_values:
            lines.append(f"skipped {self.duplicate_values:,} value(s) already stored (duplicates)")
        if self.string_fields_skipped:
            lines.append(f"skipped {self.string_fields_skipped} string field(s) (numbers only)")
        if self.rejected_lines:
            lines.append(f"rejected {self.rejected_lines} corrupt line(s):")
            lines.extend(f"  {r}" for r in self.rejected[:20])
            if self.rejected_lines > 20:
                lines.append(f"  ... and {self.rejected_lines - 20} more (see --json)")
        return lines

    def to_json(self) -> dict[str, object]:
        return {
            "db_path": str(self.db_path),
            "spool_dir": str(self.spool_dir),
            "files_ingested": self.files_ingested,
            "files_already_ingested": self.files_already_ingested,
            "partial_files": self.partial_files,
            "lines_read": self.lines_read,
            "values_stored": self.values_stored,
            "duplicate_values": self.duplicate_values,
            "job_periods_stored": self.job_periods_stored,
            "jobs": self.jobs,
            "string_fields_skipped": self.string_fields_skipped,
            "rejected_lines": self.rejected_lines,
            "rejected": [
                {"file": r.file, "line": r.line, "reason": r.reason} for r in self.rejected
            ],
            "seconds": self.seconds,
            "values_per_s": self.values_per_s,
        }


@dataclass
class _SpoolFile:
    name: str  # what rejected lines cite: the file's name (hushmon collect: the batch's id)
    data: bytes
    content_hash: str
    partial: bool
    lines: int


def spool_files(spool_dir: Path) -> list[Path]:
    """Closed (.lp) and open (.lp.open) spool files, by name: those in the
    folder and in its sub-folders one level down (a cluster's shared spool
    has one folder per host). File names begin with the host, so a name is
    unique across hosts."""
    if not spool_dir.is_dir():
        raise HushmonError(f"spool directory {spool_dir} does not exist")
    folders = [spool_dir, *(p for p in spool_dir.iterdir() if p.is_dir())]
    found = [
        p
        for folder in folders
        for p in folder.iterdir()
        if p.is_file() and p.name.endswith((".lp", ".lp.open"))
    ]
    return sorted(found, key=lambda p: p.name)


def _read_spool_file(path: Path) -> _SpoolFile:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise HushmonError(f"cannot read {path}: {exc.strerror}") from exc
    partial = path.name.endswith(".lp.open")
    if partial:
        # The agent may be writing it: take it up to its last complete line.
        data = data[: data.rfind(b"\n") + 1]
    elif data and not data.endswith(b"\n"):
        data += b"\n"
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    return _SpoolFile(path.name, data, digest, partial, data.count(b"\n"))


def _batches(files: Iterable[_SpoolFile]) -> Iterator[list[_SpoolFile]]:
    batch: list[_SpoolFile] = []
    size = 0
    for f in files:
        if batch and size + len(f.data) > BATCH_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(f)
        size += len(f.data)
    if batch:
        yield batch


@dataclass
class _Parsed:
    batch: list[_SpoolFile]
    data: bytes
    fast: FastBatch | None  # None: not valid UTF-8, every line goes to the exact parser


def _parse(batch: list[_SpoolFile]) -> _Parsed:
    data = b"".join(f.data for f in batch)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return _Parsed(batch, data, None)
    return _Parsed(batch, data, parse_batch(data))


_Key = tuple[str, str, str, str]  # host, measurement, tags, job


def _repeated_lines(line: np.ndarray, key_id: np.ndarray, time_ns: np.ndarray) -> bool:
    """Whether two lines of the batch may carry the same (key, time).

    Values of one line are adjacent, so checking lines (not values) is enough
    and cheap; a hash collision only costs the exact (slower) dedupe.
    """
    if len(line) == 0:
        return False
    first = np.flatnonzero(np.diff(line, prepend=line[0] - 1) != 0)
    h = time_ns[first] ^ (key_id[first].astype(np.int64) * np.int64(0x9E3779B97F4A7C15 >> 1))
    return len(np.unique(h)) < len(h)


def canonical_key(key: str) -> _Key | str:
    """(host, measurement, sorted tags without host, job) of a line key, or why it is bad."""
    try:
        measurement, tags = lineproto.parse_key(key)
    except lineproto.LineError as exc:
        return str(exc)
    host = tags.pop("host", "")
    if not host:
        return "no host tag"
    job = tags.get("job", "") if measurement == "job" else ""
    if measurement == "job" and not job:
        return "job line without a job tag"
    return host, measurement, ",".join(f"{k}={v}" for k, v in sorted(tags.items())), job


class _LineKeys:
    """What the ingest needs of each line key text and each (key, field)
    pair, worked out once per text for the ingester's life.

    A batch of a large cluster has a key of its own in nearly every line
    and a series of its own in nearly every value (the host is in the key),
    so Python work per key or per pair cost as much as the rest of the
    ingest. Here a key text costs one dict lookup per batch; its host, its
    kind (job line, bad) and its series come from numpy arrays for whole
    columns at once. A pair is one 64-bit code (key id << 32 | name id);
    the codes seen so far are a sorted array numpy searches, and only pairs
    never seen go through Python (the ingester's series dict, the truth)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.canon: list[_Key | str] = []  # per key id: canonical_key's answer
        self.host = np.zeros(0, dtype=np.int64)  # per key id: host id; -1 for a bad key
        self.job = np.zeros(0, dtype=bool)  # per key id: a job line's key
        self.host_ids: dict[str, int] = {}
        self.hosts: list[str] = []
        self.name_ids: dict[str, int] = {}
        self.names: list[str] = []
        self.codes = np.zeros(0, dtype=np.int64)  # sorted
        self.sids = np.zeros(0, dtype=np.int64)  # series id of each code (the lake's are 64-bit)

    def host_id(self, host: str) -> int:
        return _numbered(host, self.host_ids, self.hosts)

    def key_ids(self, texts: list[str]) -> np.ndarray:
        get = self.ids.get
        out = [get(t, -1) for t in texts]
        if -1 in out:
            hosts: list[int] = []
            jobs: list[bool] = []
            for i, text in enumerate(texts):
                if out[i] != -1:
                    continue
                got = self.ids.get(text)  # the same text twice in this call
                if got is None:
                    got = self.ids[text] = len(self.canon)
                    c = canonical_key(text)
                    self.canon.append(c)
                    hosts.append(-1 if isinstance(c, str) else self.host_id(c[0]))
                    jobs.append(not isinstance(c, str) and c[1] == "job")
                out[i] = got
            self.host = np.concatenate((self.host, np.array(hosts, dtype=np.int64)))
            self.job = np.concatenate((self.job, np.array(jobs, dtype=bool)))
        return np.array(out, dtype=np.int64)

    def series_ids(
        self,
        keys: np.ndarray,
        names: list[str],
        key_id: np.ndarray,
        name_id: np.ndarray,
        series_id: Callable[[str, str, str, str], int],
    ) -> np.ndarray:
        """The series id of each value, its key ``keys[key_id]`` (ids of
        :meth:`key_ids`, all valid) and its field ``names[name_id]``."""
        name_ids = np.array(
            [_numbered(n, self.name_ids, self.names) for n in names], dtype=np.int64
        )
        code = (keys[key_id] << 32) | name_ids[name_id]
        pos = np.searchsorted(self.codes, code)
        hit = pos < len(self.codes)
        hit[hit] = self.codes[pos[hit]] == code[hit]
        if not hit.all():
            new = np.unique(code[~hit])
            sids = np.empty(len(new), dtype=np.int64)
            for i, c in enumerate(new.tolist()):
                canon = self.canon[c >> 32]
                assert not isinstance(canon, str)
                sids[i] = series_id(canon[0], canon[1], canon[2], self.names[c & 0xFFFFFFFF])
            codes = np.concatenate((self.codes, new))
            order = np.argsort(codes, kind="stable")
            self.codes = codes[order]
            self.sids = np.concatenate((self.sids, sids))[order]
            pos = np.searchsorted(self.codes, code)
        return self.sids[pos]


def _numbered(text: str, ids: dict[str, int], texts: list[str]) -> int:
    """The id of ``text`` in (ids, texts), given the next one when new."""
    got = ids.get(text)
    if got is None:
        got = ids[text] = len(texts)
        texts.append(text)
    return got


def _exec(con: duckdb.DuckDBPyConnection, sql: str, params: object = None) -> list[tuple]:
    """Run a statement to completion (DuckDB keeps a pending result otherwise)."""
    return con.execute(sql, params).fetchall()


class _Ingester:
    def __init__(
        self, con: duckdb.DuckDBPyConnection, report: IngestReport, record_files: bool = True
    ) -> None:
        self.con = con
        self.report = report
        # hushmon collect records its batches in its own table, not as spool files.
        self.record_files = record_files
        self.series_ids: dict[tuple[str, str, str, str], int] = {
            (h, m, t, f): int(i)
            for i, h, m, t, f in con.execute(
                "SELECT series_id, host, measurement, tags, field FROM series"
            ).fetchall()
        }
        self.jobs: set[str] = set()
        self.new_series: list[tuple[int, str, str, str, str]] = []
        self.batch_has_repeats = False
        self.known_max_id = len(self.series_ids)
        # a cache only: rebuilt with the ingester after a rolled-back batch
        self.keys = _LineKeys()

    def _series_id(self, host: str, measurement: str, tags: str, field_name: str) -> int:
        key = (host, measurement, tags, field_name)
        sid = self.series_ids.get(key)
        if sid is None:
            sid = len(self.series_ids) + 1
            self.series_ids[key] = sid
            self.new_series.append((sid, *key))
        return sid

    def ingest(
        self,
        parsed: _Parsed,
        before_commit: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    ) -> None:
        """Store one parsed batch in one transaction; ``before_commit`` adds
        the caller's own rows (hushmon collect's batch records) to it."""
        # series ids above this one are new in this batch: nothing stored to check
        self.known_max_id = len(self.series_ids)
        self.new_series = []
        self.batch_has_repeats = False
        batch, data = parsed.batch, parsed.data
        sizes = np.array([len(f.data) for f in batch], dtype=np.int64)
        file_start = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        exact_rows: list[tuple[int, int, float]] = []
        exact_jobs: list[tuple[str, str, int]] = []
        fast = parsed.fast
        if fast is None:
            self._exact_all(batch, exact_rows, exact_jobs)
            table = None
            job_rows: list[tuple[str, str, int]] = []
        else:
            self.report.lines_read += fast.n_lines
            first_line = np.searchsorted(fast.line_starts, file_start)

            def where(line: int) -> tuple[str, int]:
                fid = int(np.searchsorted(first_line, line, side="right")) - 1
                return batch[fid].name, line - int(first_line[fid]) + 1

            for line in fast.exact_lines:
                start, end = fast.line_starts[line], fast.line_starts[line + 1] - 1
                name, no = where(int(line))
                self._exact_line(name, no, data[start:end].decode("utf-8"), exact_rows, exact_jobs)
            table, job_rows = self._fast_columns(fast, where)

        def body(con: duckdb.DuckDBPyConnection) -> None:
            self._store(batch, table, exact_rows, job_rows + exact_jobs)
            if before_commit is not None:
                before_commit(con)

        in_transaction(self.con, body)

    def _fast_columns(
        self, fast: FastBatch, where: object
    ) -> tuple[pa.Table, list[tuple[str, str, int]]]:
        keys = self.keys.key_ids(fast.keys)
        canon = self.keys.canon
        value_key = keys[fast.key_id]
        keep = self.keys.host[value_key] >= 0
        if not keep.all():
            seen: set[int] = set()
            for i in np.flatnonzero(~keep):
                line = int(fast.line[i])
                if line not in seen:
                    seen.add(line)
                    name, no = where(line)  # type: ignore[operator]
                    self.report.reject(name, no, str(canon[value_key[i]]))
        is_job = self.keys.job[value_key]
        job_mask = keep & is_job
        job_rows: list[tuple[str, str, int]] = []
        if job_mask.any() and "active" in fast.names:
            active = job_mask & (fast.name_id == fast.names.index("active")) & (fast.value != 0)
            kt = np.unique(np.column_stack([value_key[active], fast.time_ns[active]]), axis=0)
            for kid, t in kt.tolist():
                c = canon[kid]
                assert not isinstance(c, str)
                job_rows.append((c[3], c[0], int(t)))
        sample_mask = keep & ~is_job
        table = pa.table(
            {
                "series_id": self.keys.series_ids(
                    keys,
                    fast.names,
                    fast.key_id[sample_mask],
                    fast.name_id[sample_mask],
                    self._series_id,
                ),
                "time_ns": fast.time_ns[sample_mask],
                "value": fast.value[sample_mask],
            }
        )
        self.batch_has_repeats = _repeated_lines(
            fast.line[sample_mask], fast.key_id[sample_mask], fast.time_ns[sample_mask]
        )
        return table, job_rows

    def _store(
        self,
        batch: list[_SpoolFile],
        table: pa.Table | None,
        exact_rows: list[tuple[int, int, float]],
        job_rows: list[tuple[str, str, int]],
    ) -> None:
        con = self.con
        if self.new_series:
            cols = list(zip(*self.new_series, strict=True))
            new = pa.table(
                {
                    "series_id": pa.array(cols[0], pa.int32()),
                    "host": cols[1],
                    "measurement": cols[2],
                    "tags": cols[3],
                    "field": cols[4],
                }
            )
            con.register("lp_series", new)
            try:
                _exec(con, "INSERT INTO series SELECT * FROM lp_series")
            finally:
                con.unregister("lp_series")
        if table is not None and table.num_rows:
            self._insert_samples(
                table,
                dedupe_batch=self.batch_has_repeats,
                only_new_series=int(pa.compute.min(table.column("series_id")).as_py())
                > self.known_max_id,
            )
        if exact_rows:
            extra = pa.table(
                {
                    "series_id": pa.array([r[0] for r in exact_rows], pa.int32()),
                    "time_ns": pa.array([r[1] for r in exact_rows], pa.int64()),
                    "value": pa.array([r[2] for r in exact_rows], pa.float64()),
                }
            )
            self._insert_samples(extra, dedupe_batch=True)
        if job_rows:
            jobs = pa.table(
                {
                    "job": [r[0] for r in job_rows],
                    "host": [r[1] for r in job_rows],
                    "time_ns": pa.array([r[2] for r in job_rows], pa.int64()),
                }
            )
            self.jobs.update(jobs.column("job").to_pylist())
            times = jobs.column("time_ns")
            # bounded by the batch's times like the samples' (below): unbounded,
            # the anti-join read the whole table, 1 s of CPU a transaction at 20 M rows
            bounds = [int(pa.compute.min(times).as_py()), int(pa.compute.max(times).as_py())]
            con.register("lp_jobs", jobs)
            try:
                inserted = _exec(
                    con,
                    """INSERT INTO job_activity
                       SELECT DISTINCT n.job, n.host, n.time_ns FROM lp_jobs n
                       WHERE NOT EXISTS (SELECT 1 FROM job_activity a
                                         WHERE a.time_ns BETWEEN ? AND ? AND a.job = n.job
                                           AND a.host = n.host AND a.time_ns = n.time_ns)""",
                    bounds,
                )
            finally:
                con.unregister("lp_jobs")
            self.report.job_periods_stored += int(inserted[0][0])
        for f in batch if self.record_files else []:
            _exec(
                con,
                "INSERT INTO spool_files (name, content_hash, size_bytes, lines) "
                "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [f.name, f.content_hash, len(f.data), f.lines],
            )

    def _insert_samples(
        self, table: pa.Table, dedupe_batch: bool, only_new_series: bool = False
    ) -> None:
        """Insert what is not stored yet; the first value of a (series, time) wins."""
        con = self.con
        if only_new_series and not dedupe_batch:
            # Every series first appears in this batch (a fresh spool): nothing
            # stored can collide, so the anti-join is skipped.
            con.register("lp_new", table)
            try:
                _exec(con, "INSERT INTO samples SELECT * FROM lp_new")
            finally:
                con.unregister("lp_new")
            self.report.values_stored += table.num_rows
            return
        series = table.column("series_id")
        times = table.column("time_ns")
        bounds = [
            int(pa.compute.min(times).as_py()),
            int(pa.compute.max(times).as_py()),
            int(pa.compute.min(series).as_py()),
            int(pa.compute.max(series).as_py()),
        ]
        # Only stored rows in the batch's time and series range are scanned
        # (DuckDB's zone maps skip the rest).
        stored_filter = """NOT EXISTS (
            SELECT 1 FROM samples s
            WHERE s.time_ns BETWEEN ? AND ? AND s.series_id BETWEEN ? AND ?
              AND s.series_id = n.series_id AND s.time_ns = n.time_ns)"""
        if dedupe_batch:
            sql = f"""INSERT INTO samples
                SELECT n.series_id, n.time_ns, first(n.value ORDER BY n.rowid_) FROM
                  (SELECT *, row_number() OVER () AS rowid_ FROM lp_new) n
                WHERE {stored_filter} GROUP BY n.series_id, n.time_ns"""
        else:
            sql = f"INSERT INTO samples SELECT n.* FROM lp_new n WHERE {stored_filter}"
        con.register("lp_new", table)
        try:
            stored = int(_exec(con, sql, bounds)[0][0])  # an INSERT answers its row count
        finally:
            con.unregister("lp_new")
        self.report.values_stored += stored
        self.report.duplicate_values += table.num_rows - stored

    def _exact_all(
        self,
        batch: list[_SpoolFile],
        rows: list[tuple[int, int, float]],
        jobs: list[tuple[str, str, int]],
    ) -> None:
        for f in batch:
            text = f.data.decode("utf-8", errors="replace")
            for no, line in enumerate(text.split("\n")[:-1], 1):
                self.report.lines_read += 1
                if "\ufffd" in line:
                    self.report.reject(f.name, no, "invalid UTF-8")
                    continue
                self._exact_line(f.name, no, line, rows, jobs)

    def _exact_line(
        self,
        name: str,
        no: int,
        text: str,
        rows: list[tuple[int, int, float]],
        jobs: list[tuple[str, str, int]],
    ) -> None:
        line = text.rstrip("\r")
        if not line or line.startswith("#"):
            return
        try:
            parsed = lineproto.parse_line(line)
        except lineproto.LineError as exc:
            self.report.reject(name, no, str(exc))
            return
        host = parsed.tags.pop("host", "")
        if not host:
            self.report.reject(name, no, "no host tag")
            return
        self.report.string_fields_skipped += len(parsed.string_fields)
        if parsed.measurement == "job":
            job = parsed.tags.get("job", "")
            if not job:
                self.report.reject(name, no, "job line without a job tag")
            elif parsed.fields.get("active", 0.0) != 0.0:
                jobs.append((job, host, parsed.time_ns))
            return
        tags = ",".join(f"{k}={v}" for k, v in sorted(parsed.tags.items()))
        for field_name, value in parsed.fields.items():
            sid = self._series_id(host, parsed.measurement, tags, field_name)
            rows.append((sid, parsed.time_ns, value))


def ingest_spool(db_path: Path, spool_dir: Path) -> IngestReport:
    """Load every spool file of ``spool_dir`` into the store at ``db_path``."""
    started = time.perf_counter()
    db_path, spool_dir = Path(db_path), Path(spool_dir)
    report = IngestReport(db_path=db_path, spool_dir=spool_dir)
    paths = spool_files(spool_dir)
    con = open_store(db_path)
    try:
        known = set(con.execute("SELECT name, content_hash FROM spool_files").fetchall())

        def unseen() -> Iterator[_SpoolFile]:
            # Files are read as batches are needed, so memory holds a few
            # batches, not the whole spool.
            for path in paths:
                f = _read_spool_file(path)
                if (path.name, f.content_hash) in known:
                    report.files_already_ingested += 1
                    continue
                report.partial_files += int(f.partial)
                yield f

        ingester = _Ingester(con, report)
        total = sum(p.stat().st_size for p in paths)
        with (
            bar("ingest", total=total, unit="B") as progress,
            ThreadPoolExecutor(max_workers=2, thread_name_prefix="hushmon-parse") as pool,
        ):
            # Parse up to two batches ahead while DuckDB stores the current one.
            pending: list[Future[_Parsed]] = []
            batches = _batches(unseen())
            for b in batches:
                pending.append(pool.submit(_parse, b))
                if len(pending) >= 2:
                    break
            while pending:
                parsed = pending.pop(0).result()
                nxt = next(batches, None)
                if nxt is not None:
                    pending.append(pool.submit(_parse, nxt))
                ingester.ingest(parsed)
                report.files_ingested += len(parsed.batch)
                progress.update(len(parsed.data))
        report.jobs = sorted(ingester.jobs)
    except duckdb.Error as exc:
        raise HushmonError(f"ingest into {db_path} failed: {str(exc).splitlines()[0]}") from exc
    finally:
        con.close()
    report.seconds = time.perf_counter() - started
    return report
