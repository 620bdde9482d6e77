"""`hushmon collect`'s group size when --fetch-batch is not given: 8192 for a
--raw-only C collector only (DuckLake's fixed commit cost per group), 2048
for one that also takes the summaries, whose raw groups would wait unacked
behind summary work, and for the Python engine."""

from __future__ import annotations

import argparse

import pytest

from hushmon.transport import collect_cli


def _fetch_batch(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    collect_cli.register(parser.add_subparsers())
    args = parser.parse_args(["collect", "--url", "nats://localhost:1", *argv])
    if args.fetch_batch is not None:
        return int(args.fetch_batch)
    return collect_cli.default_fetch_batch(args.engine, args.raw_only)


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (("--engine", "c", "--raw-only"), 8192),
        (("--engine", "c"), 2048),  # takes collect-sum too
        (("--raw-only",), 2048),  # the Python engine: its parse costs ~300 us a batch
        ((), 2048),
        (("--summaries-only",), 2048),
        (("--engine", "c", "--raw-only", "--fetch-batch", "512"), 512),
    ],
)
def test_the_default_group_size(argv: tuple[str, ...], want: int) -> None:
    assert _fetch_batch(*argv) == want
