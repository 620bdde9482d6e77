"""Retention tiers under a byte budget: the policy stored in the lake and the
plan that says what the next compaction deletes.

Tiers, newest to oldest: raw ``samples`` for ``raw_days``, then 1-minute
rollups ``samples_1m`` and the summaries for ``rollup_days``, then only the
job digests (the reports folder), which are kept for good. The summaries
(job summaries, rack partials, rebuilds and their messages' records:
lake_files.SUMMARY_TABLES) are what a digest is built from, so they belong
to the rollup tier: they outlive the raw data and go with the rollups of
the same days. Over the budget, the oldest raw data goes first, a UTC day at
a time (its rollups are made before it is deleted), then the oldest rollups
and summaries together, a day at a time; none ever newer than
``min_raw_hours`` before now: the newest hours are what running jobs'
digests read. What cannot be freed is reported, never silently exceeded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import duckdb

from hushmon.errors import HushmonError
from hushmon.store.lake_files import RAW_TABLE, ROLLUP_TABLE, SUMMARY_TABLES, DataFile

NS_PER_S = 1_000_000_000
NS_PER_MINUTE = 60 * NS_PER_S
NS_PER_HOUR = 3600 * NS_PER_S
NS_PER_DAY = 86_400 * NS_PER_S
# The summaries' tier in a plan: one cut for all of SUMMARY_TABLES.
SUMMARY_TIER = "summaries"


@dataclass(frozen=True)
class Policy:
    raw_days: float = 30.0
    rollup_days: float = 400.0
    budget_bytes: int | None = None  # None: no budget, only the ages
    min_raw_hours: float = 24.0

    def check(self) -> Policy:
        if not (self.raw_days > 0 and self.rollup_days > 0 and self.min_raw_hours >= 0):
            raise HushmonError(
                "bad policy: --raw-days and --rollup-days must be > 0, --min-raw-hours >= 0",
                exit_code=1,
            )
        if self.rollup_days < self.raw_days:
            raise HushmonError(
                f"bad policy: --rollup-days ({self.rollup_days:g}) shorter than --raw-days "
                f"({self.raw_days:g}): rollups replace raw data when it expires",
                exit_code=1,
            )
        if self.min_raw_hours > self.raw_days * 24:
            raise HushmonError(
                f"bad policy: --min-raw-hours ({self.min_raw_hours:g}) beyond --raw-days "
                f"({self.raw_days:g} = {self.raw_days * 24:g} h)",
                exit_code=1,
            )
        return self


def read_policy(con: duckdb.DuckDBPyConnection) -> Policy:
    """The newest policy row, or the defaults when none was set (or when a
    schema-1 lake, read before any writer of this version migrated it, has
    no policy table)."""
    has_table = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake' "
        "AND table_name = 'lake_policy'"
    ).fetchone()
    if not has_table or not has_table[0]:
        return Policy()
    row = con.execute(
        "SELECT raw_days, rollup_days, budget_bytes, min_raw_hours FROM lake_policy "
        "ORDER BY set_at DESC LIMIT 1"
    ).fetchone()
    if row is None:
        return Policy()
    return Policy(
        float(row[0]), float(row[1]), None if row[2] is None else int(row[2]), float(row[3])
    )


def write_policy(con: duckdb.DuckDBPyConnection, policy: Policy) -> None:
    """Append the policy (inside the caller's transaction); older rows stay as history."""
    con.execute(
        "INSERT INTO lake_policy VALUES (?, ?, ?, ?, current_timestamp)",
        [policy.raw_days, policy.rollup_days, policy.budget_bytes, policy.min_raw_hours],
    ).fetchall()


def floor_minute(t_ns: int) -> int:
    return t_ns - t_ns % NS_PER_MINUTE


@dataclass
class TierCut:
    """Delete a table's rows older than ``cut_ns``; ``freed_bytes`` estimated
    from the files' time ranges (whole files below the cut, a straddling file
    in proportion)."""

    table: str
    cut_ns: int
    reason: str  # "age" or "budget"
    freed_bytes: int


@dataclass
class RetentionPlan:
    now_ns: int
    policy: Policy
    floor_ns: int  # nothing at or after this is deleted for the budget
    total_bytes: int  # every tier now (raw, rollups, other tables, catalog, digests)
    cuts: list[TierCut] = field(default_factory=list)
    over_budget_after_bytes: int = 0  # > 0: what the budget still lacks after the cuts

    @property
    def freed_bytes(self) -> int:
        return sum(c.freed_bytes for c in self.cuts)


def _freed_below(files: list[DataFile], cut_ns: int) -> int:
    freed = 0.0
    for f in files:
        if f.max_time_ns is None or f.min_time_ns is None or f.min_time_ns >= cut_ns:
            continue
        if f.max_time_ns < cut_ns:
            freed += f.size_bytes
        else:  # straddles: rewritten without its old rows, about in proportion
            span = max(1, f.max_time_ns - f.min_time_ns)
            freed += f.size_bytes * (cut_ns - f.min_time_ns) / span
    return int(freed)


def _day_cuts(files: list[DataFile], start_ns: int, floor_ns: int) -> list[int]:
    """Cut points for a budget: each UTC midnight after the oldest row still
    kept (and at or after ``start_ns``), then ``floor_ns`` itself."""
    oldest = min((f.min_time_ns for f in files if f.min_time_ns is not None), default=None)
    if oldest is None:
        return []
    oldest = max(oldest, start_ns)
    cuts = []
    day = (oldest // NS_PER_DAY + 1) * NS_PER_DAY
    while day < floor_ns:
        cuts.append(day)
        day += NS_PER_DAY
    if floor_ns > oldest:
        cuts.append(floor_minute(floor_ns))
    return cuts


def plan_retention(
    files: list[DataFile],
    policy: Policy,
    fixed_bytes: int,
    now_ns: int | None = None,
) -> RetentionPlan:
    """What to delete now: the age limits, then, over the budget, whole UTC
    days of raw data and then of rollups, oldest first. ``fixed_bytes`` is what
    retention cannot shrink (other tables, catalog, digests)."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    floor_ns = floor_minute(now_ns - int(policy.min_raw_hours * NS_PER_HOUR))
    by_table: dict[str, list[DataFile]] = {RAW_TABLE: [], ROLLUP_TABLE: [], SUMMARY_TIER: []}
    for f in files:
        tier = SUMMARY_TIER if f.table in SUMMARY_TABLES else f.table
        if tier in by_table:
            by_table[tier].append(f)
    tier_bytes = {t: sum(f.size_bytes for f in fs) for t, fs in by_table.items()}
    total = fixed_bytes + sum(tier_bytes.values())
    plan = RetentionPlan(now_ns, policy, floor_ns, total)
    rollup_age = floor_minute(now_ns - int(policy.rollup_days * NS_PER_DAY))
    ages = {
        RAW_TABLE: floor_minute(now_ns - int(policy.raw_days * NS_PER_DAY)),
        ROLLUP_TABLE: rollup_age,
        SUMMARY_TIER: rollup_age,
    }
    cuts = {t: TierCut(t, cut, "age", _freed_below(by_table[t], cut)) for t, cut in ages.items()}
    remaining = total - sum(c.freed_bytes for c in cuts.values())
    if policy.budget_bytes is not None:
        # raw days first; then the rollups and summaries of a day together
        for tables in ((RAW_TABLE,), (ROLLUP_TABLE, SUMMARY_TIER)):
            both = [f for t in tables for f in by_table[t]]
            start = min(cuts[t].cut_ns for t in tables)
            for cut in _day_cuts(both, start, floor_ns):
                if remaining <= policy.budget_bytes:
                    break
                for table in tables:
                    if cut <= cuts[table].cut_ns:
                        continue
                    freed = _freed_below(by_table[table], cut)
                    remaining -= freed - cuts[table].freed_bytes
                    cuts[table] = TierCut(table, cut, "budget", freed)
        plan.over_budget_after_bytes = max(0, remaining - policy.budget_bytes)
    plan.cuts = [c for c in cuts.values() if _has_rows_below(by_table[c.table], c.cut_ns)]
    return plan


def _has_rows_below(files: list[DataFile], cut_ns: int) -> bool:
    return any(f.min_time_ns is not None and f.min_time_ns < cut_ns for f in files)
