"""A job's compact summary: what goes into Slurm's AdminComment at job end
and what ``hushmon job`` prints (seff-like).

In AdminComment it is ``hushmon1:`` and one line of compact JSON, at most
:data:`MAX_COMMENT_CHARS` (the hint is cut, then the tags, when it is
longer), with no space, ``|`` (``sacct -P``'s delimiter) or newline: JSON
writes them as ``\u0020`` / ``\u007c`` inside strings, so ``scontrol show
job -o`` (space-separated ``Key=Value``) and ``sacct -P`` keep it one field,
and a program parses it after the prefix (as jobstats' ``JS1:`` JSON, but
not compressed: the figures stay readable in ``sacct -o AdminComment``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

PREFIX = "hushmon1:"
MAX_COMMENT_CHARS = 1000


@dataclass
class JobSummary:
    job: str
    user: str = ""
    state: str = ""
    nodes: int = 0
    elapsed_s: float | None = None
    cpu_busy_pct: float | None = None  # of the allocated CPUs, over the run
    mem_peak_bytes: float | None = None  # the fullest node's peak in use
    mem_req_bytes: float | None = None  # Slurm's request per node (None: not known)
    gpu_busy_pct: float | None = None  # SMs busy, mean of the job's GPUs
    main_finding: str = ""  # "<title> (<severity>)"
    hint: str = ""  # the main finding's first sentence
    tags: list[str] = field(default_factory=list)
    report: str = ""  # a URL or path
    source: str = ""  # where hushmon job read it: sacct, scontrol, store

    @property
    def mem_share_pct(self) -> float | None:
        if self.mem_peak_bytes is None or not self.mem_req_bytes:
            return None
        return 100.0 * self.mem_peak_bytes / self.mem_req_bytes

    def to_comment(self) -> str:
        """The AdminComment text (bounded, one line, no '|')."""
        body = {
            "job": self.job, "state": self.state, "nodes": self.nodes,
            "elapsed_s": _round(self.elapsed_s), "cpu_pct": _round(self.cpu_busy_pct),
            "mem_peak_b": _round(self.mem_peak_bytes, 0),
            "mem_req_b": _round(self.mem_req_bytes, 0),
            "gpu_pct": _round(self.gpu_busy_pct), "main": self.main_finding, "hint": self.hint,
            "tags": self.tags, "report": self.report,
        }  # fmt: skip
        body = {k: v for k, v in body.items() if v not in (None, "", [])}
        text = _encode(body)
        for cut in ("hint", "tags", "main", "report"):
            if len(text) <= MAX_COMMENT_CHARS:
                break
            body.pop(cut, None)
            text = _encode(body)
        return text[:MAX_COMMENT_CHARS]

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["mem_share_pct"] = _round(self.mem_share_pct)
        return out


def _round(value: float | None, digits: int = 1) -> float | int | None:
    if value is None:
        return None
    return round(value) if digits == 0 else round(value, digits)


def _encode(body: dict[str, Any]) -> str:
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=True)
    # compact separators: a space is only inside a string, where an escape keeps it
    return PREFIX + text.replace(" ", "\\u0020").replace("|", "\\u007c")


def from_comment(text: str) -> JobSummary | None:
    """A summary from an AdminComment (None when it is not hushmon's)."""
    text = text.strip()
    if not text.startswith(PREFIX):
        return None
    try:
        body = json.loads(text[len(PREFIX) :])
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("job"), str):
        return None

    def num(key: str) -> float | None:
        v = body.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    tags = body.get("tags")
    return JobSummary(
        job=body["job"], state=str(body.get("state", "")), nodes=int(num("nodes") or 0),
        elapsed_s=num("elapsed_s"), cpu_busy_pct=num("cpu_pct"), mem_peak_bytes=num("mem_peak_b"),
        mem_req_bytes=num("mem_req_b"), gpu_busy_pct=num("gpu_pct"),
        main_finding=str(body.get("main", "")), hint=str(body.get("hint", "")),
        tags=[str(t) for t in tags] if isinstance(tags, list) else [],
        report=str(body.get("report", "")),
    )  # fmt: skip


def _duration(seconds: float) -> str:
    s = round(seconds)
    days, s = divmod(s, 86400)
    text = f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days}-{text}" if days else text


def _bytes(value: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if value >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value / 2**10:.2f} KiB"


def seff_lines(s: JobSummary) -> list[str]:
    """What ``hushmon job`` prints, in seff's order where it has the same figures."""
    lines = [f"Job ID: {s.job}"]
    if s.user:
        lines.append(f"User: {s.user}")
    if s.state:
        lines.append(f"State: {s.state}")
    if s.nodes:
        lines.append(f"Nodes: {s.nodes}")
    if s.elapsed_s is not None:
        lines.append(f"Job Wall-clock time: {_duration(s.elapsed_s)}")
    if s.cpu_busy_pct is not None:
        lines.append(f"CPU Efficiency: {s.cpu_busy_pct:.1f}% of the allocated CPUs busy")
    if s.mem_peak_bytes is not None:
        req = (f" of {_bytes(s.mem_req_bytes)} requested per node ({s.mem_share_pct:.1f}%)"
               if s.mem_req_bytes else " (request not known)")  # fmt: skip
        lines.append(f"Memory Utilized: {_bytes(s.mem_peak_bytes)} peak on a node{req}")
    if s.gpu_busy_pct is not None:
        lines.append(f"GPU Utilization: {s.gpu_busy_pct:.1f}% SM busy on average")
    lines.append(f"Main finding: {s.main_finding or 'none'}")
    if s.hint:
        lines.append(f"  {s.hint}")
    lines.append(f"Tags: {', '.join(s.tags) if s.tags else 'none'}")
    if s.report:
        lines.append(f"Report: {s.report}")
    if s.source:
        lines.append(f"(from {s.source})")
    return lines
