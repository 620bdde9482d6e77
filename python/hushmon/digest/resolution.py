"""At what time resolution a digest read its job, and what each factor needs.

A job with up to ``max_bins`` periods is read at full resolution, as it
always was: one value per sensor, node and period. A longer job is read as
per-node *bins*: each node's mean of each sensor over ``bin_periods``
consecutive periods, computed inside DuckDB (from the raw samples, or from
the lake's 1-minute rollups ``samples_1m`` when bins are a minute or more),
so only sensors x nodes x bins values cross into numpy and the factors'
cost stops growing with the periods. A digest from the job-wide summaries
alone (``hushmon digest --from-summaries``) has no per-node values at all.

Each factor declares in its own file which of these it can run on
(``resolution``): ``PER_NODE`` factors need each node's series over time
(they run on bins, and their findings say so; from summaries they are
skipped), ``ACROSS_NODES`` factors need only what the across-node
statistics per period hold (min / average / max over nodes: the
summaries).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

# The factors' parameters.toml holds the [resolution] section too (one file of
# digest thresholds); read here directly: the factors package imports JobData.
_PARAMETERS = Path(__file__).with_name("factors") / "parameters.toml"

# A factor's needs (the ``resolution`` attribute of each factor's file).
PER_NODE = "per_node"  # each node's series over time
ACROSS_NODES = "across_nodes"  # per-period min / average / max over nodes suffice

# Where a JobData's values came from.
RAW = "raw"  # every sample, full resolution
RAW_BINS = "raw_bins"  # samples averaged per node into bins inside DuckDB
ROLLUPS = "rollups"  # the lake's per-series 1-minute rollups (samples_1m)
SUMMARIES = "summaries"  # job_summaries: per period, across nodes only


@dataclass(frozen=True)
class Limits:
    """How far a digest may read at full resolution, and DuckDB's bounds."""

    max_bins: int  # a job with more periods is binned
    max_cells: int  # sensors x nodes x bins bound of the cube binned from raw samples
    max_rollup_cells: int  # the same, binned from 1-minute rollups
    max_raw_values: int  # a longer raw scan reads the rollups instead, when they cover the job
    values_per_cell: int  # a long raw scan may fill one cell per this many values
    memory_limit: str  # DuckDB's memory_limit while reading (it spills beyond)
    threads: int


@cache
def _section() -> dict[str, Any]:
    with _PARAMETERS.open("rb") as f:
        return dict(tomllib.load(f)["resolution"])


def limits(max_bins: int | None = None) -> Limits:
    p = _section()
    return Limits(
        max_bins=int(max_bins if max_bins is not None else p["max_bins"]),
        max_cells=int(p["max_cells"]),
        max_rollup_cells=int(p["max_rollup_cells"]),
        max_raw_values=int(p["max_raw_values"]),
        values_per_cell=int(p["values_per_cell"]),
        memory_limit=str(p["duckdb_memory_limit"]),
        threads=int(p["duckdb_threads"]),
    )


@dataclass(frozen=True)
class Resolution:
    source: str  # RAW, RAW_BINS, ROLLUPS or SUMMARIES
    periods: int  # the job's periods
    period_s: float  # the job's sampling period
    bin_s: float  # width of one time step the analyzers saw (= period_s at full resolution)
    steps: int  # time steps the analyzers saw (periods, or bins)

    @property
    def binned(self) -> bool:
        return self.source in (RAW_BINS, ROLLUPS)

    @property
    def per_node(self) -> bool:
        return self.source != SUMMARIES

    def note(self) -> str:
        """What a finding computed at this resolution says about it ('' at full)."""
        if self.source == RAW_BINS:
            return (
                f"computed on {self.bin_s:g}-s bins (each node's mean over "
                f"{round(self.bin_s / self.period_s)} periods); raw per-period data not read"
            )
        if self.source == ROLLUPS:
            return (
                f"computed on {self.bin_s:g}-s bins from the store's 1-minute rollups; "
                "raw per-period data not read"
            )
        if self.source == SUMMARIES:
            return "computed from the across-node summaries per period; no per-node data"
        return ""

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "periods": self.periods,
            "period_s": self.period_s,
            "step_s": self.bin_s,
            "steps": self.steps,
            "note": self.note() or "every period of every node (full resolution)",
        }
