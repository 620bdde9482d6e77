"""InfluxDB line protocol, parsed exactly, one line at a time.

The bulk of a spool file takes the vectorized path in :mod:`hushmon.store.ingest`;
lines that path cannot split safely (escapes, quoted strings, a missing
timestamp) come here, so the store accepts every valid line and rejects every
invalid one with a reason.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

# ASCII only: int() and float() also take other scripts' digits, '_' and
# surrounding spaces, and a timestamp above int64 cannot be stored.
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]{1,20}")
_TIMESTAMP = re.compile(r"[0-9]{1,19}")
TIME_NS_MAX = 2**63 - 1
_TRUE = frozenset(("t", "T", "true", "True", "TRUE"))
_FALSE = frozenset(("f", "F", "false", "False", "FALSE"))


class LineError(ValueError):
    """A line that is not valid line protocol; the message is the reason."""


@dataclass
class ParsedLine:
    measurement: str
    tags: dict[str, str]
    fields: dict[str, float]
    time_ns: int
    string_fields: list[str] = field(default_factory=list)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in ', =\\"':
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_key(key: str) -> tuple[str, dict[str, str]]:
    """``measurement,tag=v,...`` -> (measurement, tags)."""
    parts = _split_escaped(key, ",")
    measurement = _unescape(parts[0])
    if not measurement:
        raise LineError("empty measurement name")
    tags: dict[str, str] = {}
    for part in parts[1:]:
        kv = _split_escaped(part, "=")
        if len(kv) != 2 or not kv[0] or not kv[1]:
            raise LineError(f"bad tag {part!r} (expected key=value)")
        tags[_unescape(kv[0])] = _unescape(kv[1])
    return measurement, tags


def parse_value(raw: str) -> float | str:
    """A field value: float, integer (``i``/``u`` suffix), boolean or quoted string."""
    if not raw:
        raise LineError("empty field value")
    if raw[0] == '"':
        if len(raw) < 2 or raw[-1] != '"':
            raise LineError(f"unterminated string value {raw!r}")
        return _unescape(raw[1:-1])
    if raw in _TRUE:
        return 1.0
    if raw in _FALSE:
        return 0.0
    integer = raw[-1] in "iu"
    text = raw[:-1] if integer else raw
    if not (_INTEGER if integer else _FLOAT).fullmatch(text):
        non_finite = not integer and text.lower().lstrip("+-") in ("nan", "inf", "infinity")
        raise LineError(f"{'non-finite value' if non_finite else 'bad number'} {raw[:40]!r}")
    try:
        value = int(text) if integer else float(text)
    except (ValueError, OverflowError):
        raise LineError(f"bad number {raw[:40]!r}") from None
    if raw[-1] == "u" and value < 0:
        raise LineError(f"negative unsigned value {raw!r}")
    value = float(value)
    if not math.isfinite(value):
        raise LineError(f"non-finite value {raw!r}")
    return value


def _split_escaped(text: str, separator: str, quotes: bool = False) -> list[str]:
    """Split on ``separator`` where it is not escaped by a backslash (escapes
    kept) and, with ``quotes``, not inside a quoted string value: spaces
    separate a line's sections, commas its tags and fields, '=' a key from
    its value."""
    parts: list[str] = []
    start = 0
    in_string = False
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if quotes and c == '"':
            in_string = not in_string
        elif c == separator and not in_string:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    if in_string:
        raise LineError("unterminated string value")
    parts.append(text[start:])
    return parts


def parse_line(line: str) -> ParsedLine:
    """Parse one non-empty, non-comment line; :class:`LineError` if invalid."""
    sections = _split_escaped(line.rstrip("\r\n"), " ", quotes=True)
    if len(sections) == 2:
        raise LineError("no timestamp (spool lines carry the scheduled sampling time)")
    if len(sections) != 3:
        raise LineError(
            f"expected 'measurement,tags fields timestamp', found {len(sections)} sections"
        )
    key, field_text, time_text = sections
    measurement, tags = parse_key(key)
    if not _TIMESTAMP.fullmatch(time_text) or int(time_text) > TIME_NS_MAX:
        raise LineError(f"bad timestamp {time_text[:40]!r} (ns since 1970, below 2^63)")
    time_ns = int(time_text)
    fields: dict[str, float] = {}
    strings: list[str] = []
    for part in _split_escaped(field_text, ",", quotes=True):
        name, sep, raw = part.partition("=")
        if not sep or not name:
            raise LineError(f"bad field {part!r} (expected name=value)")
        value = parse_value(raw)
        if isinstance(value, str):
            strings.append(_unescape(name))
        else:
            fields[_unescape(name)] = value
    return ParsedLine(measurement, tags, fields, time_ns, strings)
