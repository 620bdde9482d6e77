"""Strict JSON output: what every command's --json and stored files rely on."""

from __future__ import annotations

import json
import math
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from hushmon import jsonio
from hushmon.errors import HushmonError


@dataclass
class Row:
    name: str
    value: float


def test_non_finite_numbers_become_null_and_numpy_becomes_plain() -> None:
    value = {
        "nan": math.nan,
        "inf": -math.inf,
        "np": np.float64("nan"),
        "int": np.int64(7),
        "array": np.array([1.5, np.nan]),
        "nested": [(1, math.inf)],
        "path": Path("/tmp/x"),
        "row": Row("a", math.nan),
    }
    text = jsonio.dumps(value)
    assert json.loads(text) == {
        "nan": None,
        "inf": None,
        "np": None,
        "int": 7,
        "array": [1.5, None],
        "nested": [[1, None]],
        "path": "/tmp/x",
        "row": {"name": "a", "value": None},
    }
    assert "NaN" not in text and "Infinity" not in text


def test_unknown_objects_are_refused() -> None:
    with pytest.raises(TypeError):
        jsonio.dumps({"x": object()})


def test_emit_to_stdout_and_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jsonio.emit("-", {"a": math.nan})
    assert json.loads(capsys.readouterr().out) == {"a": None}
    target = tmp_path / "out.json"
    jsonio.emit(str(target), {"b": 1})
    assert json.loads(target.read_text()) == {"b": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary left


def test_emit_unwritable_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(HushmonError, match="--json: cannot write"):
        jsonio.emit(str(tmp_path / "missing" / "out.json"), {"b": 1})


def test_write_atomic_keeps_the_old_file_when_the_value_is_bad(tmp_path: Path) -> None:
    target = tmp_path / "digest.json"
    jsonio.write_atomic(target, {"v": 1})
    with pytest.raises(TypeError):
        jsonio.write_atomic(target, {"v": object()})
    assert json.loads(target.read_text()) == {"v": 1}


def test_a_pipe_is_written_in_place_never_replaced(tmp_path: Path) -> None:
    """``--json`` naming a FIFO (or /dev/null) writes into it: a rename
    would leave a regular file in its place (as root, /dev/null itself)."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    jsonio.emit(fifo, {"a": 1})
    reader.join(timeout=10)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert json.loads(got[0]) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.fifo"]  # no temporary left
