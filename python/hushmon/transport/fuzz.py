"""The collector's fuzz run: valid messages mixed with mutated ones, stored
by the collector's own code, and checked for what a hostile or broken sender
must never achieve (docs/security.md, "The collector and the wire").

A mutated message is what a node, a reducer or the network could send: raw
batches with headers above int64, digits of other scripts, subjects with
empty parts, bodies with flipped bytes, huge numbers and control bytes;
summaries whose JSON has values of the wrong type, numbers out of range,
NaN, deep nesting or cut bytes. The run fails if any exception escapes the
collector's write calls, or if a valid batch is not stored whole.

Used by ``bench/bench_collect_fuzz.py`` (100,000 messages, figures printed)
and ``tests/transport/test_collect_fuzz.py`` (a short run in ``make test``).
"""

from __future__ import annotations

import copy
import json
import random
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hushmon.transport.collect_records import Message
from hushmon.transport.collect_store import CollectorStore
from hushmon.transport.summary import Summary
from hushmon.transport.wire import (
    H_DROPPED,
    H_EPOCH,
    H_HOST,
    H_LINES,
    H_MSG_ID,
    H_REPLAY,
    H_SEQ,
    SUM_JOB_PREFIX,
    SUM_RACK_PREFIX,
    batch_headers,
    raw_subject,
)

T0_NS = 1_795_000_000_000_000_000
PERIOD_NS = 1_000_000_000
VALID_EPOCH = 7
# Valid batches come from hosts no mutation produces (mutations start from
# "node<N>"), so a mutated batch cannot take a valid batch's (host, epoch, seq).
VALID_HOST_PREFIX = "keep"

_NUMBERS = [
    "0",
    "-1",
    "1",
    str(2**63 - 1),
    str(2**63),
    str(2**64),
    str(10**30),
    "-" + str(2**63 + 1),
    "1e3",
    "0x10",
    " 12",
    "12 ",
    "+5",
    "\u0661\u0662",  # Arabic-Indic digits: int() takes them
    "\uff11",  # fullwidth one
    "",
    "nan",
    "inf",
]
_TOKENS = [
    b"99999999999999999999999",
    b"1e999",
    b"-1e999",
    b"nan",
    b"inf",
    b"NaN",
    b"9223372036854775808i",
    b"-9223372036854775809i",
    b"18446744073709551616u",
    b"\x00",
    b"\\",
    b'"',
    b"=",
    b",",
    b" ",
    b"\n",
    b"\r",
    b"\x1b[31m",
    b"\xff\xfe",
    b"\xc3\x28",
    "\u202e".encode(),
    b"host=other",
    b"job=../../..",
    b"#",
    b"t",
    b"x" * 5000,
]
_JSON_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1.5,
    2**63,
    2**64,
    -(2**63) - 1,
    10**400,
    float("nan"),
    float("inf"),
    -float("inf"),
    "",
    "x",
    "../../..",
    "\x1b[2J",
    "constructor",
    [],
    {},
    [1, 2],
    ["h", 1, 2],
    ["h", 2**64, 1],
    {"a": 1},
    "x" * 2000,
]


def valid_batch(host: str, seq: int, rack: str = "r1", job: str = "j1") -> Message:
    """A contract batch of three lines (cpu, mem, job) at period seq."""
    t = T0_NS + seq * PERIOD_NS
    lines = [
        f"cpu,host={host},cpu=total user_pct={seq % 97}.5,system_pct=1.25 {t}",
        f"mem,host={host} used_pct={seq % 89}.0 {t}",
        f"job,host={host},job={job} active=1i {t}",
    ]
    data = ("\n".join(lines) + "\n").encode()
    return Message(raw_subject(rack, host), batch_headers(host, VALID_EPOCH, seq, 3), data)


def valid_summary(rack: str, job: str, seq: int, hosts: list[str]) -> Message:
    """A rack partial of the contract for (job, period seq)."""
    t = T0_NS + seq * PERIOD_NS
    sensors = {
        "cpu,cpu=total user_pct": Summary.of([1.0 + seq % 7, 2.0]).to_json(),
        "mem used_pct": Summary.of([3.0 * (seq % 5)]).to_json(),
    }
    payload = {
        "v": 1,
        "level": "rack",
        "rack": rack,
        "job": job,
        "time_ns": t,
        "sources": [[h, VALID_EPOCH, seq] for h in hosts],
        "sensors": sensors,
    }
    msg_id = f"{rack}:{job}:{t}"
    return Message(SUM_RACK_PREFIX + rack, {H_MSG_ID: msg_id}, json.dumps(payload).encode())


# ---- mutations -------------------------------------------------------------


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        pos = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(pos, len(b) - 1)] = rng.randrange(256)
        elif op == 1:
            b[pos:pos] = rng.choice(_TOKENS)
        elif op == 2:
            del b[pos : pos + rng.randint(1, 40)]
        elif op == 3:
            b = b[:pos]
        elif op == 4 and b:
            # a number replaced by an extreme one
            start = rng.randrange(len(b))
            end = start
            while end < len(b) and chr(b[end]).isdigit():
                end += 1
            b[start:end] = rng.choice(_TOKENS[:9])
        else:
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return bytes(b)


def _mutate_batch(rng: random.Random, msg: Message) -> Message:
    headers: dict[str, str] = dict(msg.headers or {})
    subject = msg.subject
    data = msg.data
    kind = rng.randrange(5)
    if kind == 2:
        return Message(subject, None if rng.random() < 0.5 else {}, data)
    if kind == 0:
        name = rng.choice([H_EPOCH, H_SEQ, H_LINES, H_DROPPED, H_REPLAY, H_HOST, H_MSG_ID])
        if rng.random() < 0.2:
            headers.pop(name, None)
        elif name == H_HOST:
            headers[name] = rng.choice(["", "a.b", "n*", "n>", "\x1b[31mx", "x" * 300, "n 1"])
        else:
            headers[name] = rng.choice(_NUMBERS)
    elif kind == 1:
        subject = rng.choice(
            [
                "hm.raw..x",
                "hm.raw.r1",
                "hm.raw.r1.x.y",
                "hm.raw.r1." + "y" * 300,
                "hm.raw.\u00e9.n1",
                subject + ".",
                subject.replace("hm.raw.", "hm.raw.*."),
            ]
        )
    else:
        data = _mutate_bytes(rng, data)
    return Message(subject, headers, data)


def _json_paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _json_paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _json_paths(v, (*prefix, i))


def _set_path(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = obj
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = value
    return obj


def _mutate_summary(rng: random.Random, msg: Message) -> Message:
    kind = rng.randrange(6)
    if kind == 0:
        return Message(msg.subject, msg.headers, _mutate_bytes(rng, msg.data))
    obj = json.loads(msg.data)
    if kind == 1:
        nest = rng.choice([10, 1000, 100_000])
        data = ("[" * nest + "]" * nest).encode()
        obj = _set_path(obj, rng.choice(list(_json_paths(obj))), "NEST")
        return Message(msg.subject, msg.headers, json.dumps(obj).encode().replace(b'"NEST"', data))
    for _ in range(rng.randint(1, 3)):
        paths = list(_json_paths(obj))
        path = rng.choice(paths)
        if kind == 5 and path and isinstance(path[-1], str):
            parent = obj
            for p in path[:-1]:
                parent = parent[p]
            del parent[path[-1]]
        else:
            obj = _set_path(obj, path, copy.deepcopy(rng.choice(_JSON_VALUES)))
    subject = msg.subject
    if kind == 4 and isinstance(obj, dict):
        subject = SUM_JOB_PREFIX + str(obj.get("job", ""))
        obj["level"] = "job"
    return Message(subject, msg.headers, json.dumps(obj).encode())


# ---- the run ---------------------------------------------------------------


@dataclass
class FuzzReport:
    messages: int = 0
    mutated_batches: int = 0
    mutated_summaries: int = 0
    valid_batches: int = 0
    valid_summaries: int = 0
    valid_batches_stored: int = 0
    valid_lines_expected: int = 0
    valid_lines_stored: int = 0
    rejected_batches: int = 0
    malformed_lines: int = 0
    rejected_summaries: int = 0
    seconds: float = 0.0
    escaped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            not self.escaped
            and self.valid_batches_stored == self.valid_batches
            and self.valid_lines_stored == self.valid_lines_expected
        )

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "ok": self.ok}


def _groups(
    rng: random.Random, count: int, group: int, valid_share: float
) -> Iterator[tuple[list[Message], list[Message], int, int]]:
    """(raw group, summary group, valid batches in it, valid summaries in it)."""
    valid_seq = 0
    pool = [valid_batch(f"node{i}", i + 1, f"r{i % 3}") for i in range(32)]
    sum_pool = [valid_summary(f"r{i % 3}", f"j{i % 4}", i + 1, [f"node{i}"]) for i in range(16)]
    made = 0
    while made < count:
        raw: list[Message] = []
        sums: list[Message] = []
        n_valid = n_valid_sum = 0
        for _ in range(min(group, count - made)):
            made += 1
            if rng.random() < valid_share:
                valid_seq += 1
                host = f"{VALID_HOST_PREFIX}{valid_seq % 50}"
                if rng.random() < 0.8:
                    raw.append(valid_batch(host, valid_seq, f"r{valid_seq % 3}"))
                    n_valid += 1
                else:
                    sums.append(valid_summary(f"r{valid_seq % 3}", "jv", valid_seq, [host]))
                    n_valid_sum += 1
            elif rng.random() < 0.6:
                raw.append(_mutate_batch(rng, rng.choice(pool)))
            else:
                sums.append(_mutate_summary(rng, rng.choice(sum_pool)))
        rng.shuffle(raw)
        rng.shuffle(sums)
        for i, m in enumerate(raw):
            m.stream_seq = made * 2 + i
        yield raw, sums, n_valid, n_valid_sum


def fuzz_collector(
    db: Path,
    count: int,
    seed: int = 1,
    group: int = 256,
    valid_share: float = 0.1,
    progress: Callable[[int], None] | None = None,
) -> FuzzReport:
    """Stores ``count`` messages (a ``valid_share`` of them valid) into a new
    store at ``db`` with the collector's write calls, a group at a time."""
    rng = random.Random(seed)
    report = FuzzReport()
    store = CollectorStore(db)
    valid_keys: set[tuple[str, int, int]] = set()
    started = time.perf_counter()
    try:
        for raw, sums, n_valid, n_valid_sum in _groups(rng, count, group, valid_share):
            report.messages += len(raw) + len(sums)
            report.valid_batches += n_valid
            report.valid_summaries += n_valid_sum
            report.mutated_batches += len(raw) - n_valid
            report.mutated_summaries += len(sums) - n_valid_sum
            for m in raw:
                h = m.headers or {}
                host = h.get(H_HOST, "")
                if host.startswith(VALID_HOST_PREFIX) and h == batch_headers(
                    host, VALID_EPOCH, int(h[H_SEQ]), 3
                ):
                    valid_keys.add((host, VALID_EPOCH, int(h[H_SEQ])))
                    report.valid_lines_expected += 3
            for write, group_msgs in ((store.write_raw, raw), (store.write_summaries, sums)):
                if not group_msgs:
                    continue
                try:
                    write(group_msgs)
                except Exception as exc:  # noqa: BLE001 - the fuzz run counts what escapes
                    report.escaped.append(
                        f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
                    )
            if progress is not None:
                progress(report.messages)
        rows = store.con.execute(
            f"""SELECT count(*), coalesce(sum(lines), 0) FROM transport_batches
                WHERE host LIKE '{VALID_HOST_PREFIX}%' AND epoch = {VALID_EPOCH}"""
        ).fetchall()[0]
        report.valid_batches_stored, report.valid_lines_stored = int(rows[0]), int(rows[1])
        s = store.stats
        report.rejected_batches = s.rejected_batches
        report.malformed_lines = s.malformed_lines
        report.rejected_summaries = s.rejected_summaries
    finally:
        store.close()
        report.seconds = time.perf_counter() - started
    if len(valid_keys) != report.valid_batches:
        report.escaped.append(f"fuzz run made {report.valid_batches} valid batches, keys differ")
    return report
