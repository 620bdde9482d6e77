"""The job history's paths in ``hushmon serve``: what each answers, for whom.

| path | what |
|---|---|
| ``/jobs``, ``/jobs.json`` | search the job records (history/query.py): one page |
| ``/job/ID``, ``/job/ID.json`` | the job's digest report (built on demand when missing) |
| ``/compare?job=A&job=B``, ``/compare.json?...`` | ``hushmon compare A B`` (digest/compare.py) |

A viewer who is not an admin gets only their own jobs: a job of someone
else's is answered exactly as one that does not exist (404), so its
existence does not leak. The store is opened for each request and closed
(the embedded file is then free for ``hushmon run`` to write); the work
runs in one thread of its own, one request at a time (DuckDB, matplotlib):
the event loop's default pool would start up to 32 threads for requests
that wait on each other, and glibc gives each its own heap arena."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from hushmon.datadir import DataDir, owner_only
from hushmon.errors import HushmonError
from hushmon.history.query import JobPage, JobQuery, find_record, parse_time, search
from hushmon.history.reader import StoreReader
from hushmon.history.records import JobRecord
from hushmon.live.auth import Viewer
from hushmon.live.jobs_page import job_url, jobs_html, message_html, with_nav

MAX_COMPARE = 8
Reply = tuple[str, str, bytes]  # status, content type, body
HTML = "text/html; charset=utf-8"
JSON = "application/json"


@dataclass
class History:
    data: DataDir
    db: Path | None = None  # --db; None: the data folder's store (the lake once there is one)
    live: bool = True  # the live view is served too (links to it)
    # one thread: the requests run one at a time (DuckDB, matplotlib)
    _worker: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="hushmon-history")
    )
    reader: StoreReader = field(init=False)

    def __post_init__(self) -> None:
        self.reader = StoreReader(lambda: self.store)

    @property
    def store(self) -> Path:
        return self.db or self.data.store

    async def answer(self, path: str, pairs: list[tuple[str, str]], viewer: Viewer) -> Reply | None:
        """The reply for a history path, None for a path that is not one."""
        if path in ("/jobs", "/jobs.json"):
            work = lambda: self.jobs(pairs, viewer, path.endswith(".json"))  # noqa: E731
        elif path.startswith("/job/") and len(path) > 5:
            name = path[5:]
            as_json = name.endswith(".json")
            job = unquote(name[:-5] if as_json else name)
            work = lambda: self.job(job, viewer, as_json)  # noqa: E731
        elif path in ("/compare", "/compare.json"):
            jobs = [v for k, v in pairs if k == "job" and v]
            work = lambda: self.compare(jobs, viewer, path.endswith(".json"))  # noqa: E731
        else:
            return None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._worker, self._serialized, work, path.endswith(".json")
        )

    def _serialized(self, work: Any, as_json: bool) -> Reply:
        try:
            reply: Reply = work()
            return reply
        except HushmonError as exc:
            return _error("400 Bad Request", str(exc), as_json)

    # -- /jobs -----------------------------------------------------------
    def jobs(self, pairs: list[tuple[str, str]], viewer: Viewer, as_json: bool) -> Reply:
        q = query_from(pairs, viewer)
        if not self.reader.exists():
            page = JobPage([], 0, q)
        else:
            with self.reader.connection() as con:
                page = search(con, q)
        if as_json:
            body = {
                "viewer": viewer.to_json(),
                "total": page.total,
                "page": q.page,
                "pages": page.pages,
                "per_page": q.per_page,
                "sort": q.sort,
                "order": "desc" if q.descending else "asc",
                "tags_from": page.tags_from,
                "jobs": [_job_json(r) for r in page.records],
            }
            return "200 OK", JSON, json.dumps(body).encode()
        return "200 OK", HTML, jobs_html(page, viewer, factor_names(), self.live).encode()

    def _record(self, job: str, viewer: Viewer) -> JobRecord | None:
        if not self.reader.exists():
            return None
        with self.reader.connection() as con:
            return find_record(con, job, viewer.owner_filter)

    # -- /job/ID ---------------------------------------------------------
    def job(self, job: str, viewer: Viewer, as_json: bool) -> Reply:
        record = self._record(job, viewer)
        if record is None:
            return _error("404 Not Found", f"no job {job!r} here", as_json)
        # the folder name from the store goes through path_component too: a
        # record is data, and may not point outside reports/
        folder = self.data.reports(record.report or job)
        digest_json = folder / "digest.json"
        if not digest_json.exists():
            self._build(job, folder)
        if as_json:
            digest = json.loads(digest_json.read_text(encoding="utf-8"))
            body = {"record": _job_json(record), "digest": digest}
            return "200 OK", JSON, json.dumps(body).encode()
        report = (folder / "report.html").read_text(encoding="utf-8")
        extra = f" · <a href='{job_url(job, '.json')}'>digest as JSON</a>"
        return "200 OK", HTML, with_nav(report, extra).encode()

    def _build(self, job: str, folder: Path) -> None:
        from hushmon.digest.build import build_digest

        with owner_only():
            build_digest(self.store, job, folder)

    # -- /compare --------------------------------------------------------
    def compare(self, jobs: list[str], viewer: Viewer, as_json: bool) -> Reply:
        from hushmon.digest.compare import compare_runs, parse_run

        if not 2 <= len(jobs) <= MAX_COMPARE:
            raise HushmonError(f"select 2 to {MAX_COMPARE} jobs to compare (got {len(jobs)})")
        for job in jobs:
            if "@" in job or "=" in job:
                raise HushmonError(f"job {job!r}: a job id, without @SIZE or =NAME")
            parse_run(job)
            if self._record(job, viewer) is None:
                return _error("404 Not Found", f"no job {job!r} here", as_json)
        out = self.data.reports("compare-" + "-".join(jobs))
        with owner_only():
            cmp = compare_runs(self.store, jobs, out, reports=self.data.reports_root)
        if as_json:
            return "200 OK", JSON, cmp.json_path.read_bytes()
        links = "".join(f" · <a href='{job_url(j)}'>job {j}</a>" for j in jobs)
        html = cmp.report_path.read_text(encoding="utf-8")
        return "200 OK", HTML, with_nav(html, links).encode()


def _job_json(r: JobRecord) -> dict[str, Any]:
    out = r.to_json()
    out["report_url"] = job_url(r.job)
    out["json_url"] = job_url(r.job, ".json")
    return out


def _error(status: str, text: str, as_json: bool) -> Reply:
    if as_json:
        return status, JSON, json.dumps({"error": text}).encode()
    return status, HTML, message_html(status, text).encode()


def _int(pairs: dict[str, str], key: str, default: int) -> int:
    text = pairs.get(key, "").strip()
    if not text:
        return default
    if not text.isdigit():
        raise HushmonError(f"{key} must be a whole number, not {text!r}")
    return int(text)


def query_from(pairs: list[tuple[str, str]], viewer: Viewer) -> JobQuery:
    """The search a page's query string asks for, limited to what ``viewer`` may see."""
    p = {k: v for k, v in pairs}
    order = p.get("order", "desc")
    if order not in ("asc", "desc"):
        raise HushmonError("order must be asc or desc")
    q = JobQuery(
        viewer=viewer.owner_filter,
        owner=p.get("user", "").strip() if viewer.admin else "",
        name=p.get("name", "").strip(),
        job=p.get("job", "").strip(),
        state=p.get("state", "").strip(),
        tag=p.get("tag", "").strip(),
        factor=p.get("factor", "").strip(),
        severity=p.get("severity", "").strip(),
        since_ns=parse_time(p.get("since", ""), "since"),
        until_ns=parse_time(p.get("until", ""), "until"),
        sort=p.get("sort", "start") or "start",
        descending=order == "desc",
        page=_int(p, "page", 1),
        per_page=_int(p, "per_page", 50),
    )
    return q.check()


def factor_names() -> list[str]:
    from hushmon.digest.factors import FACTORS

    return [f.name for f in FACTORS]
