"""JSON output shared by every command: strict, atomic, ``-`` for stdout.

JSON has no NaN or infinity; Python's json module writes them anyway, and
the file then breaks every strict reader (jq, browsers, Go, DuckDB). Every
command therefore writes through :func:`dumps`, which turns non-finite
numbers into null and NumPy scalars and arrays into plain values, and
refuses anything else it cannot represent.

``--json -`` puts the document on stdout, and then stdout holds that one
document and nothing else (so ``| jq`` and ``json.loads`` work): every line
for people goes to :func:`human_stream`, which is stderr in that case.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import sys
from collections.abc import Mapping
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, TextIO, TypeAlias

import numpy as np

from hushmon.errors import HushmonError


def plain(value: Any) -> Any:
    """``value`` as plain JSON-ready Python: NaN/inf -> None, NumPy -> builtins."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if is_dataclass(value) and not isinstance(value, type):
        return plain(asdict(value))
    return value


def dumps(value: Any, indent: int | None = 2) -> str:
    return json.dumps(plain(value), indent=indent, allow_nan=False)


def write_atomic(path: Path, value: Any, indent: int | None = 2) -> Path:
    """Writes ``value`` to ``path`` via a temporary file and rename, so a
    reader never sees half a file and a crash never destroys the old one."""
    path = Path(path)
    text = dumps(value, indent) + "\n"
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(path.stat().st_mode) and not path.is_dir():
            # A device or a pipe (``--json /dev/null``, a FIFO a script
            # reads) is written in place: a rename would replace it with a
            # regular file, for every process on the machine when run as root.
            with path.open("w", encoding="utf-8") as out:
                out.write(text)
            return path
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


STDOUT = "-"

Target: TypeAlias = str | os.PathLike[str] | None


def to_stdout(target: Target) -> bool:
    """Whether ``--json`` asks for stdout: then stdout is the JSON's alone."""
    return target is not None and str(target) == STDOUT


def human_stream(target: Target) -> TextIO:
    """Where a command with ``--json target`` prints for people (verdicts,
    tables, paths): stderr when the JSON goes to stdout, else stdout.

    Looked up at each call, so a replaced sys.stdout/stderr is honoured."""
    return sys.stderr if to_stdout(target) else sys.stdout


def emit(target: Target, value: Any, option: str = "--json") -> None:
    """Writes the ``--json FILE|-`` output of a command; None writes nothing."""
    if target is None:
        return
    text = dumps(value) + "\n"
    if to_stdout(target):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        write_atomic(Path(target), value)
    except OSError as exc:
        raise HushmonError(f"{option}: cannot write {target}: {exc.strerror}", exit_code=1) from exc
