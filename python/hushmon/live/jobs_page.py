"""The job history's HTML (``/jobs``) in the reports' style (report/html.py):
rendered on the server, no script, nothing fetched from elsewhere, so it
works on a login node's browser with no network and in any text browser.
Every value from the store reaches the page through :func:`escape`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from urllib.parse import quote, urlencode

from hushmon.history.query import SORTS, JobPage, JobQuery
from hushmon.history.records import SEVERITIES, JobRecord
from hushmon.live.auth import Viewer
from hushmon.report.html import Page, escape

STATES = ("RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")
COLUMNS = (
    ("job", "job"),
    ("owner", "user"),
    ("name", "name"),
    ("state", "state"),
    ("start", "start (UTC)"),
    ("duration", "duration"),
    ("nodes", "nodes"),
    ("worst", "worst finding"),
)
_EXTRA_STYLE = """<style>
form.search { display: flex; flex-wrap: wrap; gap: .4em 1em; align-items: end;
              background: #f7f8fa; padding: .6em .8em; border: 1px solid #ccd3de; }
form.search label { display: flex; flex-direction: column; font-size: .8em; color: #445; }
form.search input, form.search select { font-size: 1em; padding: .15em .3em; }
table.jobs td, table.jobs th { white-space: nowrap; }
table.jobs td.main { white-space: normal; max-width: 28em; text-align: left; }
table.jobs th a { color: inherit; text-decoration: none; }
.sev-high { color: #c62828; font-weight: 600; }
.sev-medium { color: #b56a00; font-weight: 600; }
.sev-low { color: #2e7d32; }
.tag { background: #eef2f8; border: 1px solid #ccd3de; border-radius: 3px;
       padding: 0 .3em; margin-right: .2em; font-size: .85em; }
.pages a, .pages span { margin-right: .8em; }
nav.top { font-size: .9em; margin-bottom: .4em; }
</style>"""


def job_url(job: str, suffix: str = "") -> str:
    return "/job/" + quote(job, safe="") + suffix


def when(ns: int | None) -> str:
    if not ns:
        return "-"
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")


def duration(r: JobRecord) -> str:
    if r.end_ns is None or not r.start_ns:
        return "-"
    s = max(0, (r.end_ns - r.start_ns) // 1_000_000_000)
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}"


def query_pairs(q: JobQuery, **change: object) -> list[tuple[str, str]]:
    """The page's query string for ``q`` with some fields changed (links)."""
    values: dict[str, object] = {
        "job": q.job,
        "user": q.owner,
        "name": q.name,
        "state": q.state,
        "tag": q.tag,
        "factor": q.factor,
        "severity": q.severity,
        "since": "" if q.since_ns is None else when(q.since_ns).replace(" ", "T"),
        "until": "" if q.until_ns is None else when(q.until_ns).replace(" ", "T"),
        "sort": q.sort,
        "order": "desc" if q.descending else "asc",
        "page": q.page,
        "per_page": q.per_page,
    }
    values.update(change)
    return [(k, str(v)) for k, v in values.items() if v not in ("", None)]


def _select(name: str, current: str, options: Sequence[str], blank: str) -> str:
    opts = [f"<option value=''>{escape(blank)}</option>"]
    for o in options:
        sel = " selected" if o == current else ""
        opts.append(f"<option value='{escape(o)}'{sel}>{escape(o)}</option>")
    return f"<select name='{name}'>{''.join(opts)}</select>"


def _field(label: str, name: str, value: str, placeholder: str = "", size: int = 12) -> str:
    return (
        f"<label>{escape(label)}<input name='{name}' value='{escape(value)}' size='{size}' "
        f"placeholder='{escape(placeholder)}'></label>"
    )


def _form(q: JobQuery, viewer: Viewer, factors: Sequence[str]) -> str:
    since = "" if q.since_ns is None else when(q.since_ns).replace(" ", "T")
    until = "" if q.until_ns is None else when(q.until_ns).replace(" ", "T")
    parts = [
        _field("job id", "job", q.job, "42 or 42*", 10),
        _field("user", "user", q.owner, "any", 10) if viewer.admin else "",
        _field("name", "name", q.name, "part of it", 12),
        f"<label>state{_select('state', q.state, STATES, 'any')}</label>",
        _field("tag", "tag", q.tag, "any", 12),
        f"<label>finding{_select('factor', q.factor, factors, 'any factor')}</label>",
        f"<label>at least{_select('severity', q.severity, SEVERITIES[:3], 'any')}</label>",
        _field("started since", "since", since, "2026-11-01", 16),
        _field("until", "until", until, "2026-11-30T18:00", 16),
        f"<input type='hidden' name='sort' value='{escape(q.sort)}'>",
        f"<input type='hidden' name='order' value='{'desc' if q.descending else 'asc'}'>",
        f"<input type='hidden' name='per_page' value='{q.per_page}'>",
        "<button type='submit'>search</button> <a href='/jobs'>clear</a>",
    ]
    return f"<form class='search' method='get' action='/jobs'>{''.join(parts)}</form>"


def _header(q: JobQuery, key: str, label: str) -> str:
    desc = not q.descending if q.sort == key else key in ("start", "duration", "worst", "nodes")
    arrow = (" ▼" if q.descending else " ▲") if q.sort == key else ""
    href = "/jobs?" + urlencode(query_pairs(q, sort=key, order="desc" if desc else "asc", page=1))
    return f"<th class='text'><a href='{escape(href)}'>{escape(label)}{arrow}</a></th>"


def _row(r: JobRecord) -> str:
    worst = f"<span class='sev-{escape(r.worst)}'>{escape(r.worst)}</span>" if r.worst else "–"
    tags = "".join(f"<span class='tag'>{escape(t)}</span>" for t in r.tags.split())
    cells = [
        f"<td><input type='checkbox' name='job' value='{escape(r.job)}'></td>",
        f"<td class='text'><a href='{escape(job_url(r.job))}'>{escape(r.job)}</a></td>",
        f"<td class='text'>{escape(r.owner or '?')}</td>",
        f"<td class='text'>{escape(r.name)}</td>",
        f"<td class='text'>{escape(r.state or '?')}</td>",
        f"<td>{escape(when(r.start_ns))}</td>",
        f"<td>{escape(duration(r))}</td>",
        f"<td>{r.nodes}</td>",
        f"<td class='text'>{worst}</td>",
        f"<td class='main'>{escape(r.main_finding)} {tags}</td>",
    ]
    return f"<tr data-job='{escape(r.job)}'>{''.join(cells)}</tr>"


def _pages(p: JobPage) -> str:
    q = p.query
    links = []
    for label, page in (("« first", 1), ("‹ previous", q.page - 1), ("next ›", q.page + 1),
                        ("last »", p.pages)):  # fmt: skip
        if 1 <= page <= p.pages and page != q.page:
            href = "/jobs?" + urlencode(query_pairs(q, page=page))
            links.append(f"<a href='{escape(href)}'>{escape(label)}</a>")
        else:
            links.append(f"<span class='meta'>{escape(label)}</span>")
    return f"<p class='pages'>{''.join(links)}</p>"


def jobs_html(p: JobPage, viewer: Viewer, factors: Sequence[str], live: bool) -> str:
    q = p.query
    page = Page("hushmon jobs")
    who = "every user's jobs (admin)" if viewer.admin else "your jobs only"
    name = viewer.user or "the operator's token"
    nav = "<a href='/'>live view</a> · " if live else ""
    json_href = "/jobs.json?" + urlencode(query_pairs(q))
    page.raw_html(
        _EXTRA_STYLE + f"<nav class='top'>{nav}<a href='{escape(json_href)}'>this page as "
        f"JSON</a> · signed in as <b>{escape(name)}</b>: {escape(who)}</nav>"
    )
    page.raw_html(_form(q, viewer, factors))
    first = (q.page - 1) * q.per_page + 1
    shown = f"{first}-{first + len(p.records) - 1} of {p.total}" if p.records else f"0 of {p.total}"
    page.paragraph(f"{p.total} job(s) found; showing {shown}, page {q.page} of {p.pages}.", "meta")
    heads = "".join(_header(q, key, label) for key, label in COLUMNS)
    rows = "".join(_row(r) for r in p.records)
    page.raw_html(
        "<form method='get' action='/compare'>"
        f"<table class='jobs'><tr><th>compare</th>{heads}<th class='text'>main finding, tags</th>"
        f"</tr>{rows}</table>"
        "<button type='submit'>compare the selected jobs</button> "
        "<span class='meta'>(two or more: <code>hushmon compare</code>; same node count: "
        "side by side, else by size)</span></form>"
    )
    page.raw_html(_pages(p))
    return page.render()


def message_html(title: str, text: str) -> str:
    page = Page(title)
    page.raw_html("<nav class='top'><a href='/jobs'>jobs</a></nav>")
    page.paragraph(text)
    return page.render()


def with_nav(document: str, extra: str = "") -> str:
    """A report of the data folder with a way back to the jobs list."""
    nav = (
        f"<nav style='font:14px sans-serif;margin:.5em 1em'><a href='/jobs'>← jobs</a>{extra}</nav>"
    )
    at = document.find("<body>")
    return document if at < 0 else document[: at + 6] + nav + document[at + 6 :]


assert set(k for k, _ in COLUMNS) <= set(SORTS)
