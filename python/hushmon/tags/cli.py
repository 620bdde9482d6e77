"""``hushmon tag JOB... | --all``: tag stored jobs by the rule files (tags/rules.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.datadir import add_data_dir_options, from_args, writes_job_data
from hushmon.display import printable
from hushmon.errors import HushmonError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "tag",
        help="tag stored jobs by rule files (low CPU load, idle GPU, imbalance, ...)",
        description="Evaluate the tag rules (one TOML file per rule, thresholds in "
        "parameters.toml: python/hushmon/tags/rules/README.md) on stored jobs' digests and "
        "write their tags to the store's job_tags table, which the job history searches. "
        "Idempotent: a job whose tags did not change is not written; after editing a rule, "
        "'hushmon tag --all' retags every job.",
    )
    p.add_argument("jobs", nargs="*", metavar="JOB", help="job IDs (or --all)")
    p.add_argument("--all", action="store_true", help="every job in the store")
    p.add_argument(
        "--rules",
        type=Path,
        metavar="DIR",
        help="a site's rule folder over the shipped rules (default $HUSHMON_TAG_RULES): "
        "a file with a shipped rule's name replaces it; its parameters.toml overrides thresholds",
    )
    p.add_argument(
        "--no-build",
        action="store_true",
        help="skip jobs without a digest instead of building it",
    )
    p.add_argument("--dry-run", action="store_true", help="evaluate and print, write nothing")
    p.add_argument(
        "--explain", action="store_true", help="also say why each rule did not tag a job"
    )
    add_data_dir_options(p)
    p.add_argument("--json", metavar="FILE|-", help="the tags as JSON ('-' = stdout)")
    p.set_defaults(func=run)


@writes_job_data
def run(args: argparse.Namespace) -> int:
    from hushmon.store.schema import open_store, open_store_readonly
    from hushmon.tags.rules import load_rules, site_folder
    from hushmon.tags.store import write_tags
    from hushmon.tags.tagger import new_tags, record_states, stored_jobs, tag_jobs

    if bool(args.jobs) == bool(args.all):
        raise HushmonError("name jobs or give --all (not both)")
    rules = load_rules(site_folder(args.rules))
    dd, db = from_args(args)
    con = open_store_readonly(db)
    try:
        jobs = stored_jobs(con) if args.all else list(dict.fromkeys(args.jobs))
        states = record_states(con, jobs)
    finally:
        con.close()
    human = jsonio.human_stream(args.json)
    tagged = tag_jobs(dd, db, jobs, states, rules, not args.no_build,
                      lambda line: print(printable(line), file=human))  # fmt: skip
    changed: list[str] = []
    if not args.dry_run and tagged.outcomes:
        con = open_store(db, create=False)
        try:
            changed = write_tags(con, db, new_tags(tagged))
        finally:
            con.close()
    for job, outcome in tagged.outcomes.items():
        names = ", ".join(t.tag for t in outcome.tags) or "no tags"
        print(printable(f"job {job}: {names}"), file=human)
        for t in outcome.tags:
            print(printable(f"  {t.tag} ({t.rule}): {t.hint}"), file=human)
        if args.explain:
            for rule, why in outcome.not_applied.items():
                print(printable(f"  - {rule}: {why}"), file=human)
    if args.dry_run:
        summary = f"{len(tagged.outcomes)} jobs evaluated (dry run: nothing written)"
    else:
        unchanged = len(tagged.outcomes) - len(changed)
        summary = (
            f"{len(tagged.outcomes)} jobs tagged, {len(changed)} written ({unchanged} unchanged)"
        )
    print(f"{len(rules.rules)} rules; {summary}; {len(tagged.skipped)} skipped", file=human)
    if args.json:
        jsonio.emit(args.json, {
            "rules": [r.name for r in rules.rules],
            "jobs": {job: {"tags": [{"tag": t.tag, "rule": t.rule, "hint": t.hint}
                                    for t in o.tags],
                           "not_applied": o.not_applied}
                     for job, o in tagged.outcomes.items()},
            "skipped": tagged.skipped,
            "changed": changed,
            "dry_run": bool(args.dry_run),
        })  # fmt: skip
    if tagged.skipped and not tagged.outcomes:
        return 1
    return 0
