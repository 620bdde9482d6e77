"""Reading the JSON that ``hushmon-bench --json`` writes into typed records.

The schema is the C program's contract (docs in c/bench/README.md): a ``meta``
object with provenance and a ``results`` list with one record per
(op, size, nprocs, method). Every problem in a file becomes one
:class:`HushmonError` that names the file and the field, so ``hushmon bench
report broken.json`` answers in one line. Fields the C program may leave out
(per-rank data, CI map, invalid-launch reasons) are optional here; the
statistics the report is built from are required.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hushmon.errors import HushmonError

PROGRAM_NAME = "hushmon-bench"
SYNC_METHOD = "sync"
# Methods compared against the synchronized one: hushmon's loops and the
# procedures of OSU 7.x and IMB-MPI1 (docs/bench.md).
LOOP_METHODS = ("loop", "loop_barrier", "osu", "imb")
TOOL_METHODS = ("osu", "imb")
# Causes of invalid launches, as hushmon-bench names them.
INVALID_CAUSES = (
    "stage_start_late",
    "previous_launch_late",
    "woke_late",
    "overrun",
    "wide_window",
)

# Statistics every result must carry (seconds or counts); null is allowed
# for the times (an operation with no valid launch has no mean).
_REQUIRED_COUNTS = ("n_total", "n_valid", "n_used")
_REQUIRED_TIMES_S = ("mean", "median", "se", "min", "max", "ci_low", "ci_high")


@dataclass(frozen=True)
class BenchMeta:
    """Provenance of one run; anything the program did not report is None."""

    program: str | None = None
    version: str | None = None
    mpi_library: str | None = None
    mpi_version: str | None = None
    timer: str | None = None
    timer_resolution_ns: float | None = None
    sync: str | None = None
    sync_rounds_without_improvement: int | None = None
    clock_offset_residual_max_s: float | None = None
    clock_offset_residual_end_max_s: float | None = None
    clock_drift_max_s: float | None = None
    # Largest disagreement between two ranks' clocks (after sync or at the
    # end), the share of a result's time it may reach, and the late
    # tolerance it may reach anyway: the program's clock check.
    clock_error_max_s: float | None = None
    clock_error_share: float | None = None
    late_tolerance_us: float | None = None
    results_clock_invalid: int | None = None
    sync_elapsed_s: float | None = None
    sync_nodes: int | None = None
    sync_ranks_pinged: int | None = None
    simulated_skew_s: float | None = None
    simulated_drift_ppm: float | None = None
    clock_offsets_s: tuple[float, ...] = ()
    hosts: tuple[str, ...] = ()
    nprocs: int | None = None
    methods: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    started_at: str | None = None


@dataclass(frozen=True)
class RawLaunches:
    """Every launch of one result (``--raw``), in the order they ran, seconds."""

    local_s: tuple[float, ...]
    global_s: tuple[float, ...]
    valid: tuple[bool, ...]


@dataclass(frozen=True)
class BenchResult:
    """The summary of one (op, size, nprocs, method) measurement, times in seconds."""

    op: str
    size: int
    nprocs: int
    method: str
    n_total: int
    n_valid: int
    n_used: int
    mean: float
    median: float
    se: float
    min: float
    max: float
    ci_level: float
    ci_low: float
    ci_high: float
    global_mean: float | None = None
    global_median: float | None = None
    root: int | None = None
    invalid_late_start: int | None = None
    invalid_overrun: int | None = None
    delta_final_s: float | None = None
    # The program's clock check (synchronized results): False means the
    # ranks' clocks disagreed by more than the result tolerates.
    clock_valid: bool | None = None
    clock_error_allowed_s: float | None = None
    ci: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    per_rank: tuple[Mapping[str, Any], ...] = ()
    raw: RawLaunches | None = None
    pass_index: int = 0
    buffers: str | None = None
    invalid_causes: Mapping[str, int] = field(default_factory=dict)
    # The tools' own columns (--method osu / imb), as the program wrote them.
    tool: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int, int]:
        """What a loop result and a synchronized result are matched on."""
        return (self.op, self.size, self.nprocs)

    @property
    def rse(self) -> float:
        """Relative standard error of the mean (the seed's stop criterion)."""
        if not self.mean or math.isnan(self.mean) or math.isnan(self.se):
            return math.nan
        return self.se / self.mean


@dataclass(frozen=True)
class BenchPoint:
    """One (op, size, nprocs, method) over its passes (``--passes``), seconds."""

    op: str
    size: int
    nprocs: int
    method: str
    pass_values: tuple[float, ...]
    median: float
    ci_low: float
    ci_high: float
    ci_level: float
    spread: float
    disagree: bool
    n_total: int
    n_valid: int
    invalid_causes: Mapping[str, int] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int, int, str]:
        return (self.op, self.size, self.nprocs, self.method)

    @property
    def invalid_rate(self) -> float:
        return 1.0 - self.n_valid / self.n_total if self.n_total else math.nan


@dataclass(frozen=True)
class BenchRun:
    """One ``hushmon-bench --json`` document.

    ``results`` holds one result per point: with several passes the pass
    closest to the point's median (so every table and plot shows one value
    per point); ``all_results`` holds every pass and ``points`` the summary
    over passes.
    """

    meta: BenchMeta
    results: tuple[BenchResult, ...]
    source: str = "<memory>"
    all_results: tuple[BenchResult, ...] = ()
    points: tuple[BenchPoint, ...] = ()

    @property
    def passes(self) -> int:
        return 1 + max((r.pass_index for r in self.all_results), default=0)

    def ops(self) -> list[str]:
        """Operations in the order the program measured them."""
        return list(dict.fromkeys(r.op for r in self.results))

    def methods(self) -> list[str]:
        return list(dict.fromkeys(r.method for r in self.results))

    def for_op(self, op: str) -> list[BenchResult]:
        return [r for r in self.results if r.op == op]


class _Reader:
    """Field access that turns every type problem into a message with its path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, message: str) -> HushmonError:
        return HushmonError(f"{self.source}: {where}: {message}")

    def number(
        self, obj: Mapping[str, Any], key: str, where: str, *, required: bool, nullable: bool
    ) -> float | None:
        if key not in obj:
            if required:
                raise self.fail(where, f"missing field '{key}'")
            return None
        value = obj[key]
        if value is None:
            if nullable or not required:
                return None
            raise self.fail(where, f"field '{key}' is null")
        # bool is an int in Python; a true/false here is a schema error.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(where, f"field '{key}' must be a number, got {value!r}")
        return float(value)

    def integer(
        self, obj: Mapping[str, Any], key: str, where: str, *, required: bool
    ) -> int | None:
        value = self.number(obj, key, where, required=required, nullable=False)
        if value is None:
            return None
        if not value.is_integer() or value < 0:
            raise self.fail(where, f"field '{key}' must be a non-negative integer, got {value!r}")
        return int(value)

    def text(self, obj: Mapping[str, Any], key: str, where: str, *, required: bool) -> str | None:
        if key not in obj or obj[key] is None:
            if required:
                raise self.fail(where, f"missing field '{key}'")
            return None
        value = obj[key]
        if not isinstance(value, str) or not value:
            raise self.fail(where, f"field '{key}' must be a non-empty string, got {value!r}")
        return value

    def flag(self, obj: Mapping[str, Any], key: str, where: str) -> bool | None:
        value = obj.get(key)
        if value is None or isinstance(value, bool):
            return value
        raise self.fail(where, f"field '{key}' must be true, false or null, got {value!r}")

    def text_list(self, obj: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
        value = obj.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(where, f"field '{key}' must be a list of strings")
        return tuple(value)


def _nan_if_none(value: float | None) -> float:
    return math.nan if value is None else value


def _number_list(
    reader: _Reader, obj: Mapping[str, Any], key: str, where: str
) -> tuple[float, ...]:
    value = obj.get(key)
    if value is None:
        return ()
    ok = isinstance(value, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value
    )
    if not ok:
        raise reader.fail(where, f"field '{key}' must be a list of numbers")
    return tuple(float(v) for v in value)


def _parse_meta(reader: _Reader, obj: Any) -> BenchMeta:
    if obj is None:
        return BenchMeta()
    if not isinstance(obj, dict):
        raise reader.fail("meta", "must be an object")
    w = "meta"
    program = reader.text(obj, "program", w, required=False)
    if program is not None and program != PROGRAM_NAME:
        raise reader.fail(w, f"written by '{program}', not by {PROGRAM_NAME}")
    params = obj.get("params") or {}
    if not isinstance(params, dict):
        raise reader.fail(w, "field 'params' must be an object")
    rounds = reader.integer(obj, "sync_rounds_without_improvement", w, required=False)
    nprocs = reader.integer(obj, "nprocs", w, required=False)
    return BenchMeta(
        program=program,
        version=reader.text(obj, "version", w, required=False),
        mpi_library=reader.text(obj, "mpi_library", w, required=False),
        mpi_version=reader.text(obj, "mpi_version", w, required=False),
        timer=reader.text(obj, "timer", w, required=False),
        timer_resolution_ns=reader.number(
            obj, "timer_resolution_ns", w, required=False, nullable=True
        ),
        sync=reader.text(obj, "sync", w, required=False),
        sync_rounds_without_improvement=rounds,
        clock_offset_residual_max_s=reader.number(
            obj, "clock_offset_residual_max_s", w, required=False, nullable=True
        ),
        clock_offset_residual_end_max_s=reader.number(
            obj, "clock_offset_residual_end_max_s", w, required=False, nullable=True
        ),
        clock_drift_max_s=reader.number(obj, "clock_drift_max_s", w, required=False, nullable=True),
        clock_error_max_s=reader.number(obj, "clock_error_max_s", w, required=False, nullable=True),
        clock_error_share=reader.number(obj, "clock_error_share", w, required=False, nullable=True),
        late_tolerance_us=reader.number(obj, "late_tolerance_us", w, required=False, nullable=True),
        results_clock_invalid=reader.integer(obj, "results_clock_invalid", w, required=False),
        sync_elapsed_s=reader.number(obj, "sync_elapsed_s", w, required=False, nullable=True),
        sync_nodes=reader.integer(obj, "sync_nodes", w, required=False),
        sync_ranks_pinged=reader.integer(obj, "sync_ranks_pinged", w, required=False),
        simulated_skew_s=reader.number(obj, "simulated_skew_s", w, required=False, nullable=True),
        simulated_drift_ppm=reader.number(
            obj, "simulated_drift_ppm", w, required=False, nullable=True
        ),
        clock_offsets_s=_number_list(reader, obj, "clock_offsets_s", w),
        hosts=reader.text_list(obj, "hosts", w),
        nprocs=nprocs,
        methods=reader.text_list(obj, "methods", w),
        params=params,
        started_at=reader.text(obj, "started_at", w, required=False),
    )


def _parse_ci_map(reader: _Reader, obj: Any, where: str) -> dict[str, tuple[float, float]]:
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise reader.fail(where, "field 'ci' must be an object of level: [low, high]")
    out: dict[str, tuple[float, float]] = {}
    for level, bounds in obj.items():
        ok = (
            isinstance(bounds, list)
            and len(bounds) == 2
            and all(
                b is None or (isinstance(b, int | float) and not isinstance(b, bool))
                for b in bounds
            )
        )
        if not ok:
            raise reader.fail(where, f"ci['{level}'] must be [low, high], got {bounds!r}")
        out[str(level)] = (_nan_if_none(bounds[0]), _nan_if_none(bounds[1]))
    return out


def _parse_raw(reader: _Reader, obj: Any, where: str) -> RawLaunches | None:
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise reader.fail(where, "field 'raw' must be an object")
    arrays: dict[str, list[Any]] = {}
    for key in ("local_s", "global_s", "valid"):
        value = obj.get(key, [])
        if not isinstance(value, list):
            raise reader.fail(where, f"raw['{key}'] must be a list")
        arrays[key] = value
    n = len(arrays["local_s"])
    if len(arrays["valid"]) != n or len(arrays["global_s"]) not in (0, n):
        raise reader.fail(where, "raw arrays local_s, global_s and valid differ in length")
    if not all(isinstance(v, bool) for v in arrays["valid"]):
        raise reader.fail(where, "raw['valid'] must hold true/false")
    for key in ("local_s", "global_s"):
        if not all(
            v is None or (isinstance(v, int | float) and not isinstance(v, bool))
            for v in arrays[key]
        ):
            raise reader.fail(where, f"raw['{key}'] must hold numbers")
    return RawLaunches(
        local_s=tuple(_nan_if_none(v) for v in arrays["local_s"]),
        global_s=tuple(_nan_if_none(v) for v in arrays["global_s"]),
        valid=tuple(arrays["valid"]),
    )


def _parse_result(reader: _Reader, obj: Any, index: int) -> BenchResult:
    where = f"results[{index}]"
    if not isinstance(obj, dict):
        raise reader.fail(where, "must be an object")
    op = reader.text(obj, "op", where, required=True)
    assert op is not None  # required=True guarantees it
    where = f"results[{index}] ({op})"
    counts = {k: reader.integer(obj, k, where, required=True) for k in _REQUIRED_COUNTS}
    times = {
        k: _nan_if_none(reader.number(obj, k, where, required=True, nullable=True))
        for k in _REQUIRED_TIMES_S
    }
    size = reader.integer(obj, "size", where, required=True)
    nprocs = reader.integer(obj, "nprocs", where, required=True)
    ci_level = reader.number(obj, "ci_level", where, required=True, nullable=False)
    assert size is not None and nprocs is not None and ci_level is not None
    if not 0.0 < ci_level < 1.0:
        raise reader.fail(where, f"ci_level must be in (0, 1), got {ci_level}")
    per_rank = obj.get("per_rank") or []
    if not isinstance(per_rank, list) or not all(isinstance(p, dict) for p in per_rank):
        raise reader.fail(where, "field 'per_rank' must be a list of objects")
    method = reader.text(obj, "method", where, required=False) or SYNC_METHOD
    tool = obj.get(method) if method in TOOL_METHODS else None
    if tool is not None and not isinstance(tool, dict):
        raise reader.fail(where, f"field '{method}' must be an object")
    return BenchResult(
        op=op,
        size=size,
        nprocs=nprocs,
        method=method,
        n_total=counts["n_total"] or 0,
        n_valid=counts["n_valid"] or 0,
        n_used=counts["n_used"] or 0,
        ci_level=ci_level,
        global_mean=reader.number(obj, "global_mean", where, required=False, nullable=True),
        global_median=reader.number(obj, "global_median", where, required=False, nullable=True),
        root=reader.integer(obj, "root", where, required=False),
        invalid_late_start=reader.integer(obj, "invalid_late_start", where, required=False),
        invalid_overrun=reader.integer(obj, "invalid_overrun", where, required=False),
        delta_final_s=reader.number(obj, "delta_final_s", where, required=False, nullable=True),
        clock_valid=reader.flag(obj, "clock_valid", where),
        clock_error_allowed_s=reader.number(
            obj, "clock_error_allowed_s", where, required=False, nullable=True
        ),
        ci=_parse_ci_map(reader, obj.get("ci"), where),
        per_rank=tuple(per_rank),
        raw=_parse_raw(reader, obj.get("raw"), where),
        pass_index=reader.integer(obj, "pass", where, required=False) or 0,
        buffers=reader.text(obj, "buffers", where, required=False),
        invalid_causes=_parse_causes(reader, obj.get("invalid_causes"), where),
        tool=tool or {},
        **times,
    )


def _parse_causes(reader: _Reader, obj: Any, where: str) -> dict[str, int]:
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise reader.fail(where, "field 'invalid_causes' must be an object")
    out: dict[str, int] = {}
    for key in obj:
        value = reader.integer(obj, key, f"{where} invalid_causes", required=True)
        out[str(key)] = value or 0
    return out


def _parse_point(reader: _Reader, obj: Any, index: int) -> BenchPoint:
    where = f"points[{index}]"
    if not isinstance(obj, dict):
        raise reader.fail(where, "must be an object")
    op = reader.text(obj, "op", where, required=True)
    method = reader.text(obj, "method", where, required=True)
    size = reader.integer(obj, "size", where, required=True)
    nprocs = reader.integer(obj, "nprocs", where, required=True)
    assert op is not None and method is not None and size is not None and nprocs is not None
    values = obj.get("pass_values", [])
    if not isinstance(values, list) or not all(
        v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in values
    ):
        raise reader.fail(where, "field 'pass_values' must be a list of numbers or nulls")

    def num(key: str) -> float:
        return _nan_if_none(reader.number(obj, key, where, required=False, nullable=True))

    return BenchPoint(
        op=op,
        size=size,
        nprocs=nprocs,
        method=method,
        pass_values=tuple(_nan_if_none(v) for v in values),
        median=num("median"),
        ci_low=num("ci_low"),
        ci_high=num("ci_high"),
        ci_level=num("ci_level"),
        spread=num("spread"),
        disagree=bool(reader.flag(obj, "disagree", where)),
        n_total=reader.integer(obj, "n_total", where, required=False) or 0,
        n_valid=reader.integer(obj, "n_valid", where, required=False) or 0,
        invalid_causes=_parse_causes(reader, obj.get("invalid_causes"), where),
    )


def representatives(
    results: tuple[BenchResult, ...], points: tuple[BenchPoint, ...]
) -> tuple[BenchResult, ...]:
    """One result per point: the pass nearest the point's median, in point order.

    With one pass (or no ``points``, older files) the results as they are.
    """
    if not points or all(r.pass_index == 0 for r in results):
        return results
    by_key: dict[tuple[str, int, int, str], list[BenchResult]] = {}
    for r in results:
        by_key.setdefault((r.op, r.size, r.nprocs, r.method), []).append(r)
    chosen = []
    for p in points:
        candidates = by_key.get(p.key, [])
        if not candidates:
            continue
        if math.isnan(p.median):
            chosen.append(candidates[0])
            continue
        chosen.append(
            min(
                candidates,
                key=lambda r: abs(r.mean - p.median) if not math.isnan(r.mean) else math.inf,
            )
        )
    return tuple(chosen)


def parse_run(document: Any, source: str = "<memory>") -> BenchRun:
    """A parsed JSON document as a :class:`BenchRun`, or a one-line error."""
    reader = _Reader(source)
    if not isinstance(document, dict):
        raise reader.fail("top level", "must be an object with 'meta' and 'results'")
    if "results" not in document:
        raise reader.fail("top level", "missing 'results' (is this hushmon-bench --json output?)")
    results = document["results"]
    if not isinstance(results, list):
        raise reader.fail("results", "must be a list")
    meta = _parse_meta(reader, document.get("meta"))
    points_doc = document.get("points") or []
    if not isinstance(points_doc, list):
        raise reader.fail("points", "must be a list")
    parsed = tuple(_parse_result(reader, r, i) for i, r in enumerate(results))
    points = tuple(_parse_point(reader, p, i) for i, p in enumerate(points_doc))
    return BenchRun(
        meta=meta,
        results=representatives(parsed, points),
        source=source,
        all_results=parsed,
        points=points,
    )


def loads_run(text: str, source: str = "<memory>") -> BenchRun:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HushmonError(
            f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc
    return parse_run(document, source)


def load_run(path: Path) -> BenchRun:
    """Read a results file written by ``hushmon-bench --json``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise HushmonError(f"{path}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise HushmonError(f"{path}: cannot read: {exc}") from exc
    return loads_run(text, str(path))
