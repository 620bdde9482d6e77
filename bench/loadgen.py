"""hushmon-loadgen (c/transport/loadgen.c) for the transport benchmarks: the
command line that publishes a rack's agents' batches, and its key=value
output read back as numbers."""

from __future__ import annotations

import contextlib
from pathlib import Path

from hushmon.paths import build_bin_dir

REPO = Path(__file__).resolve().parent.parent
# One real agent batch from the test bed's fixture spool: what every
# simulated host publishes, with its host name and time replaced.
TEMPLATE = REPO / "tests/fixtures/spool/testbed-4n2r/n1-3.lp"


def publish_argv(url: str, rack: str, hosts: int, batches: int, *extra: str) -> list[str]:
    """`hushmon-loadgen publish` of `batches` batches from `hosts` hosts of one rack."""
    return [
        str(build_bin_dir() / "hushmon-loadgen"),
        "publish",
        "--url",
        url,
        "--rack",
        rack,
        "--template",
        str(TEMPLATE),
        "--hosts",
        str(hosts),
        "--batches",
        str(batches),
        *extra,
    ]


def kv(text: str) -> dict[str, float]:
    """The numeric `key=value` words of hushmon-loadgen's or hushmon-reduce's output."""
    out = {}
    for word in text.split():
        key, _, value = word.partition("=")
        with contextlib.suppress(ValueError):
            out[key] = float(value)
    return out
