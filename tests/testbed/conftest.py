"""The live test bed for tests/testbed: one small bed per module that asks
for it, brought up through the CLI as a user would, and taken down after.

Skipped with the reason where the machine cannot build one (not root, no
network namespaces, no Slurm): the bed needs root, and CI runs as root."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bedlib import LiveBed, bed_unavailable, bed_up


@pytest.fixture(scope="module")
def live_bed() -> Iterator[LiveBed]:
    reason = bed_unavailable()
    if reason:
        pytest.skip(reason)
    options = ("--nodes", "3", "--racks", "2", "--uplink-rate", "100mbit", "--period-ms", "500")
    with bed_up(*options) as (info, data):
        yield LiveBed(info, data)
