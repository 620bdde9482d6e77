"""What ``hushmon run`` tells people (stderr lines) and machines (JSON)."""

from __future__ import annotations

import signal
import sys
from typing import Any

from hushmon.run.session import RunOutcome


def say(message: str) -> None:
    print(f"hushmon: {message}", file=sys.stderr, flush=True)


def outcome_json(outcome: RunOutcome) -> dict[str, Any]:
    digest = outcome.digest
    return {
        "job": outcome.job,
        "command": outcome.command,
        "exit_code": outcome.exit_code,
        "interrupted_by": (
            signal.Signals(outcome.interrupted_by).name if outcome.interrupted_by else None
        ),
        "monitored": outcome.monitored,
        "agent": outcome.agent_mode,
        "started_ns": outcome.started_ns,
        "ended_ns": outcome.ended_ns,
        "duration_s": outcome.duration_s,
        "warnings": outcome.warnings,
        "ingest": outcome.ingest.to_json() if outcome.ingest is not None else None,
        "collected_store": outcome.collected_store,
        "digest": (
            {
                "report": str(digest.report_path),
                "json": str(digest.json_path),
                "findings": len(digest.findings),
            }
            if digest is not None
            else None
        ),
    }


def print_outcome(outcome: RunOutcome) -> None:
    ended = (
        f"stopped by {signal.Signals(outcome.interrupted_by).name}"
        if outcome.interrupted_by
        else "ended"
    )
    say(
        f"job {outcome.job} {ended} with exit code {outcome.exit_code} "
        f"after {outcome.duration_s:.1f} s"
    )
    if outcome.ingest is not None:
        for line in outcome.ingest.summary_lines():
            say(line)
    if outcome.collected_store is not None:
        say(f"data from the transport (NATS leaves, hub, collector): {outcome.collected_store}")
    digest = outcome.digest
    if digest is not None:
        say("diagnosis:")
        lines = digest.summary_lines()
        for line in lines:
            print(f"  {line}", file=sys.stderr)
        if not any(str(digest.report_path) in line for line in lines):
            say(f"report: {digest.report_path}")
        say(f"digest: {digest.json_path}")
    elif not outcome.monitored:
        say(f"job {outcome.job} ran unmonitored: no data, no digest")
