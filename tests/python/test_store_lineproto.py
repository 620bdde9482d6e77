"""The exact line-protocol parser: every valid form accepted, every invalid one explained."""

from __future__ import annotations

import pytest

from hushmon.store.lineproto import LineError, parse_key, parse_line


def test_plain_line() -> None:
    p = parse_line("cpu,host=n1,cpu=total user_pct=12.5,idle_pct=87i 1732270000000000000")
    assert p.measurement == "cpu"
    assert p.tags == {"host": "n1", "cpu": "total"}
    assert p.fields == {"user_pct": 12.5, "idle_pct": 87.0}
    assert p.time_ns == 1732270000000000000


def test_escapes_and_strings() -> None:
    p = parse_line(r'my\ meas,host=n\ 1,path=a\,b x=1,msg="a b, \"c\"",ok=t 5')
    assert p.measurement == "my meas"
    assert p.tags == {"host": "n 1", "path": "a,b"}
    assert p.fields == {"x": 1.0, "ok": 1.0}
    assert p.string_fields == ["msg"]


def test_unsigned_boolean_exponent() -> None:
    p = parse_line("m,host=h a=3u,b=false,c=-1.5e-3,d=+2 9")
    assert p.fields == {"a": 3.0, "b": 0.0, "c": -0.0015, "d": 2.0}


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("m,host=h a=1", "no timestamp"),
        ("garbage", "expected 'measurement,tags fields timestamp'"),
        ("m,host=h a=abc 1", "bad number 'abc'"),
        ("m,host=h a=1 12x", "bad timestamp"),
        ("m,host=h a 1", "bad field 'a'"),
        ("m,host=h a=nan 1", "non-finite"),
        ("m,host=h a=-1u 1", "negative unsigned"),
        ('m,host=h a="open 1', "unterminated"),
        ("m,host a=1 1", "bad tag"),
        (",host=h a=1 1", "empty measurement"),
    ],
)
def test_invalid_lines_say_why(line: str, reason: str) -> None:
    with pytest.raises(LineError, match=reason):
        parse_line(line)


def test_parse_key_sorts_nothing_and_keeps_values() -> None:
    assert parse_key("net,host=a,iface=eth0") == ("net", {"host": "a", "iface": "eth0"})
