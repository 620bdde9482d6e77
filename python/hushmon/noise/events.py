"""Reading what one ``hushmon-detect`` run wrote: its JSON summary and the
binary event file (detours and blocks on the synchronized clock)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hushmon.errors import HushmonError

MAGIC = b"HMDETV1\0"
HEADER_BYTES = 64
EVENT_DTYPE = np.dtype(
    [("kind", "<i4"), ("rank", "<i4"), ("start_ns", "<i8"), ("duration_ns", "<i8")]
)
KIND_DETOUR = 0
KIND_BLOCK = 1


@dataclass(frozen=True)
class DetectorRun:
    """One detector run; times are CLOCK_REALTIME ns (the injector's clock)."""

    summary: dict[str, Any]
    nranks: int
    threshold_ns: int
    detours: np.ndarray  # EVENT_DTYPE, start_ns mapped to realtime
    blocks: np.ndarray  # EVENT_DTYPE, start_ns mapped to realtime

    @property
    def loop_time_s(self) -> float:
        return float(self.summary["loop_time_s"])

    def span_ns(self) -> tuple[int, int]:
        """Realtime interval the recorded iterations cover (from the blocks)."""
        if self.blocks.size == 0:
            return (0, 0)
        start = int(self.blocks["start_ns"].min())
        end = int((self.blocks["start_ns"] + self.blocks["duration_ns"]).max())
        return (start, end)


def read_events(path: Path) -> tuple[dict[str, int], np.ndarray]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise HushmonError(f"cannot read {path}: {exc.strerror}") from exc
    if len(raw) < HEADER_BYTES or raw[:8] != MAGIC:
        raise HushmonError(f"{path} is not a hushmon-detect event file")
    head = np.frombuffer(raw[8:HEADER_BYTES], dtype="<i8")
    record_bytes_nranks = np.frombuffer(raw[32:40], dtype="<i4")
    header = {
        "realtime_minus_clock_ns": int(head[0]),
        "threshold_ns": int(head[1]),
        "block_iters": int(head[2]),
        "nranks": int(record_bytes_nranks[0]),
        "record_bytes": int(record_bytes_nranks[1]),
        "record_count": int(head[4]),
    }
    if header["record_bytes"] != EVENT_DTYPE.itemsize:
        raise HushmonError(f"{path}: unexpected record size {header['record_bytes']}")
    body = raw[HEADER_BYTES:]
    if len(body) != header["record_count"] * EVENT_DTYPE.itemsize:
        raise HushmonError(f"{path} is truncated")
    return header, np.frombuffer(body, dtype=EVENT_DTYPE).copy()


def load_detector_run(json_path: Path, events_path: Path) -> DetectorRun:
    try:
        summary = json.loads(json_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise HushmonError(f"cannot read detector summary {json_path}: {exc}") from exc
    header, events = read_events(events_path)
    events["start_ns"] += header["realtime_minus_clock_ns"]
    return DetectorRun(
        summary=summary,
        nranks=header["nranks"],
        threshold_ns=header["threshold_ns"],
        detours=events[events["kind"] == KIND_DETOUR],
        blocks=events[events["kind"] == KIND_BLOCK],
    )
