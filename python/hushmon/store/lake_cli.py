"""``hushmon store``: the cluster store's upkeep (compact, status, policy)."""

from __future__ import annotations

import argparse
import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.datadir import DataDir, add_data_dir_options, data_dir, writes_job_data
from hushmon.display import printable
from hushmon.errors import HushmonError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "store",
        help="the cluster store (lake): compact, status, retention policy",
        description="Upkeep of the cluster store, a DuckLake folder (docs/store.md, "
        "'The cluster store (lake)'). Safe while collectors write.",
    )
    sub = p.add_subparsers(dest="store_command", metavar="SUBCOMMAND", required=True)

    c = sub.add_parser(
        "compact",
        help="flush, roll up, apply retention and the budget, merge files, delete old files",
        description="One compaction: inlined rows to Parquet, 1-minute rollups of raw data "
        "older than --settle, retention (raw, then rollups, under the budget), rewrite and "
        "merge small files, expire snapshots and delete files unreferenced for --grace.",
    )
    _common(c, "the lake (default <data>/hushmon.lake)")
    c.add_argument(
        "--grace",
        type=float,
        default=None,
        metavar="S",
        help="keep unreferenced files this long for running readers (default 600 s)",
    )
    c.add_argument(
        "--settle",
        type=float,
        default=None,
        metavar="S",
        help="roll up only minutes older than this (default 300 s)",
    )
    c.add_argument(
        "--now",
        metavar="TIME",
        help="act as if it were TIME (UTC, ISO 8601): for a lake copied from elsewhere",
    )
    c.add_argument(
        "--memory-mib",
        type=int,
        default=None,
        metavar="N",
        help="DuckDB's memory bound in MiB (default 2048); beyond it the compaction spills to "
        "<lake>/spill instead of taking the collectors' memory",
    )
    c.set_defaults(func=run_compact)

    s = sub.add_parser(
        "status",
        help="bytes per tier, oldest/newest data, files, what the next compaction frees",
        description="Read-only: works while collectors write. On the embedded DuckDB file: "
        "its size and oldest/newest sample.",
    )
    _common(s, "the store (default the lake if there is one, else <data>/hushmon.duckdb)")
    s.add_argument("--now", metavar="TIME", help="plan as if it were TIME (UTC, ISO 8601)")
    s.set_defaults(func=run_status)

    pol = sub.add_parser(
        "policy",
        help="set or show retention: raw days, rollup days, byte budget",
        description="Without options: show the policy. Options not given keep their value. "
        "Sizes: K, M, G, T (powers of 1000) or KiB, MiB, GiB, TiB; 'none' removes the budget.",
    )
    _common(pol, "the lake (default <data>/hushmon.lake)")
    pol.add_argument("--raw-days", type=float, metavar="N", help="keep raw samples N days")
    pol.add_argument(
        "--rollup-days",
        type=float,
        metavar="M",
        help="keep 1-minute rollups and the job summaries M days",
    )
    pol.add_argument(
        "--budget", metavar="SIZE", help="bytes the lake and digests may use, e.g. 500G"
    )
    pol.add_argument(
        "--min-raw-hours",
        type=float,
        metavar="H",
        help="the budget never deletes raw data newer than H hours (default 24)",
    )
    pol.set_defaults(func=run_policy)


def _common(p: argparse.ArgumentParser, db_help: str) -> None:
    add_data_dir_options(p, with_db=False)
    p.add_argument("--db", type=Path, metavar="LAKE", help=db_help)
    p.add_argument("--json", metavar="FILE|-", help="write the result as JSON ('-' = stdout)")


def _one_line_exit_1(
    command: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """Every refusal of ``hushmon store`` exits 1 with its one line."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except HushmonError as exc:
            raise HushmonError(str(exc), exit_code=1) from exc

    run.__doc__ = command.__doc__
    return run


def _lake_arg(args: argparse.Namespace) -> tuple[Path, Path]:
    """The lake asked for and the reports folder; refuses what is not a lake."""
    from hushmon.store.lake import CATALOG_NAME, is_lake

    dd = data_dir(args.data_dir)
    lake = args.db or dd.lake
    if not lake.exists():
        raise HushmonError(f"lake {lake} does not exist: run 'hushmon collect' first")
    if not lake.is_dir():
        raise HushmonError(
            f"{lake} is not a lake (a folder with {CATALOG_NAME}): compaction "
            "and policy are for the cluster store"
        )
    if not is_lake(lake) or not (lake / CATALOG_NAME).is_file():
        raise HushmonError(f"{lake} is not a lake: it holds no {CATALOG_NAME}")
    return lake, _reports(args, dd)


def _reports(args: argparse.Namespace, dd: DataDir) -> Path:
    """The digests' folder counted in the budget: the data folder's, or, for
    a --db given without --data-dir or $HUSHMON_DATA, the one beside it (a
    data folder holds hushmon.lake and reports/ side by side)."""
    if args.db is not None and args.data_dir is None and not os.environ.get("HUSHMON_DATA"):
        return Path(args.db).parent / "reports"
    return dd.reports_root


def _parse_now(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise HushmonError(f"bad --now {text!r}: a UTC time such as 2026-11-20T06:00:00") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000


def _utc(t_ns: int | None) -> str:
    if t_ns is None:
        return "-"
    return dt.datetime.fromtimestamp(t_ns / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


@_one_line_exit_1
@writes_job_data
def run_compact(args: argparse.Namespace) -> int:
    from hushmon.store.lake_bytes import human_bytes
    from hushmon.store.lake_compact import (
        DEFAULT_GRACE_S,
        DEFAULT_MEMORY_MIB,
        DEFAULT_SETTLE_S,
        compact,
    )

    for name in ("grace", "settle"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            raise HushmonError(f"bad --{name} {getattr(args, name)}: seconds >= 0")
    if args.memory_mib is not None and args.memory_mib < 64:
        raise HushmonError(f"bad --memory-mib {args.memory_mib}: at least 64 (MiB)")
    now_ns = _parse_now(args.now)
    lake, reports = _lake_arg(args)
    report = compact(
        lake,
        reports=reports,
        now_ns=now_ns,
        grace_s=DEFAULT_GRACE_S if args.grace is None else args.grace,
        settle_s=DEFAULT_SETTLE_S if args.settle is None else args.settle,
        memory_mib=DEFAULT_MEMORY_MIB if args.memory_mib is None else args.memory_mib,
    )
    out = jsonio.human_stream(args.json)
    print(
        printable(
            f"compacted {lake} in {report.seconds:.1f} s, peak {report.peak_rss_mib:,.0f} MiB "
            f"resident (DuckDB held to {report.memory_limit_mib:,} MiB)"
        ),
        file=out,
    )
    print(
        f"  inlined rows flushed from {report.flushed_tables} table(s); "
        f"{report.rollup_rows_added:,} rollup rows added",
        file=out,
    )
    print(
        f"  summaries: {report.summary_periods_stored:,} closed periods stored merged "
        f"({report.summary_partial_rows_deleted:,} partial rows deleted), "
        f"{report.summary_late_periods_merged:,} stored periods took late partials, "
        f"{report.summary_periods_rebuilt:,} overlapped periods rebuilt from raw data",
        file=out,
    )
    for cut in report.plan.get("cuts", []):
        print(
            f"  {cut['table']}: rows before {_utc(cut['cut_ns'])} deleted ({cut['reason']}), "
            f"about {human_bytes(cut['freed_bytes'])}",
            file=out,
        )
    print(
        f"  raw rows deleted {report.raw_rows_deleted:,}, rollup rows deleted "
        f"{report.rollup_rows_deleted:,}, minutes rolled up again {report.rollup_minutes_redone}",
        file=out,
    )
    print(
        f"  files rewritten {report.files_rewritten}, merged {report.files_merged}; "
        f"snapshots expired {report.snapshots_expired}",
        file=out,
    )
    print(
        f"  freed now: {report.files_deleted} files, {human_bytes(report.bytes_deleted)}; "
        f"left the current snapshot: {human_bytes(report.live_bytes_dropped)}; waiting for "
        f"the grace period: {report.pending_files} files, {human_bytes(report.pending_bytes)}",
        file=out,
    )
    if report.over_budget_bytes:
        print(
            f"  still over budget by {human_bytes(report.over_budget_bytes)}: nothing newer "
            "than the policy's --min-raw-hours may go (hushmon store policy)",
            file=out,
        )
    if args.json:
        jsonio.emit(args.json, report.to_json())
    return 0


@_one_line_exit_1
def run_status(args: argparse.Namespace) -> int:
    from hushmon.store.lake_status import store_status

    dd = data_dir(args.data_dir)
    path = args.db or dd.store
    if not path.exists():
        raise HushmonError(
            f"store {path} does not exist: run 'hushmon collect' or 'hushmon ingest'"
        )
    if path.is_dir() and not (path / "catalog.sqlite").is_file():
        raise HushmonError(f"{path} is not a lake: it holds no catalog.sqlite")
    status = store_status(path, _reports(args, dd), _parse_now(args.now))
    _print_status(status, jsonio.human_stream(args.json))
    if args.json:
        jsonio.emit(args.json, status)
    return 0


def _print_status(st: dict[str, Any], out: Any) -> None:
    from hushmon.store.lake_bytes import human_bytes

    print(printable(f"{st['store']} ({st['kind']}): {human_bytes(st['total_bytes'])}"), file=out)
    if st["kind"] != "lake":
        print(
            f"  {st['samples']:,} samples of {st['series']:,} series, {st['jobs']} jobs; "
            f"oldest {_utc(st['oldest_ns'])}, newest {_utc(st['newest_ns'])} UTC",
            file=out,
        )
        return
    tiers = st["tiers"]
    for name in ("raw", "rollups", "summaries"):
        t = tiers[name]
        print(
            f"  {name:8} {human_bytes(t['bytes']):>10}  {t['files']} files (mean "
            f"{human_bytes(t['mean_file_bytes'])}), {t['rows']:,} rows, "
            f"{_utc(t['oldest_ns'])} .. {_utc(t['newest_ns'])} UTC",
            file=out,
        )
    print(
        f"  {'other':8} {human_bytes(tiers['other_tables']['bytes']):>10}  "
        f"{tiers['other_tables']['files']} files (series, jobs, transport)",
        file=out,
    )
    print(f"  {'catalog':8} {human_bytes(tiers['catalog']['bytes']):>10}", file=out)
    print(
        printable(
            f"  {'digests':8} {human_bytes(tiers['digests']['bytes']):>10}  "
            f"{tiers['digests']['jobs']} jobs in {tiers['digests']['folder']}"
        ),
        file=out,
    )
    pol = st["policy"]
    budget = st["budget_bytes"]
    used = f", {st['budget_used'] * 100:.1f} % used" if budget else ""
    print(
        f"  policy: raw {pol['raw_days']:g} days, rollups and summaries {pol['rollup_days']:g} "
        "days, budget "
        f"{human_bytes(budget) if budget else 'none'}{used}, raw kept at least "
        f"{pol['min_raw_hours']:g} h",
        file=out,
    )
    nxt = st["next_compaction"]
    print(f"  next compaction frees about {human_bytes(nxt['frees_bytes_estimate'])}", file=out)
    print(
        f"    and stores {nxt['summary_periods_to_store']:,} closed summary periods merged",
        file=out,
    )
    for cut in nxt["cuts"]:
        print(f"    {cut['table']}: before {_utc(cut['cut_ns'])} UTC ({cut['reason']})", file=out)
    if nxt["over_budget_after_bytes"]:
        print(f"    and stays {human_bytes(nxt['over_budget_after_bytes'])} over budget", file=out)
    pend = st["pending_deletion"]
    print(
        f"  waiting for deletion: {pend['files']} files, {human_bytes(pend['bytes'])}; "
        f"{st['snapshots']} snapshots",
        file=out,
    )


@_one_line_exit_1
@writes_job_data
def run_policy(args: argparse.Namespace) -> int:
    from dataclasses import asdict, replace

    from hushmon.store.lake import lake_commit, open_lake
    from hushmon.store.lake_bytes import human_bytes, parse_bytes
    from hushmon.store.lake_retention import read_policy, write_policy

    budget: int | str | None = "keep"
    if args.budget is not None:
        budget = None if args.budget.strip().lower() == "none" else parse_bytes(args.budget)
    lake, _reports = _lake_arg(args)
    changes: dict[str, Any] = {}
    for name in ("raw_days", "rollup_days", "min_raw_hours"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if budget != "keep":
        changes["budget_bytes"] = budget
    con = open_lake(lake, create=False)
    try:
        policy = read_policy(con)
        if changes:
            policy = replace(policy, **changes).check()

            def body(c: Any) -> None:
                write_policy(c, policy)

            lake_commit(con, body)
    finally:
        con.close()
    out = jsonio.human_stream(args.json)
    verb = "set" if changes else "is"
    print(
        f"policy {verb}: raw {policy.raw_days:g} days, rollups {policy.rollup_days:g} days, "
        f"budget {human_bytes(policy.budget_bytes) if policy.budget_bytes else 'none'}, "
        f"raw kept at least {policy.min_raw_hours:g} h",
        file=out,
    )
    if args.json:
        jsonio.emit(args.json, asdict(policy))
    return 0
