"""The live test bed for tests/testbed: one small bed per module that asks
for it, brought up through the CLI as a user would, and taken down after.

Skipped with the reason where the machine cannot build one (not root, no
network namespaces, no Slurm): the bed needs root, and CI runs as root."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator

import pytest
from bedlib import DATA_PARENT, LiveBed, bed_unavailable, hushmon


@pytest.fixture(scope="module")
def live_bed() -> Iterator[LiveBed]:
    reason = bed_unavailable()
    if reason:
        pytest.skip(reason)
    data = DATA_PARENT / f"hushmon-test-bed-{uuid.uuid4().hex[:8]}"
    up = hushmon(
        "testbed",
        "up",
        "--nodes",
        "3",
        "--racks",
        "2",
        "--uplink-rate",
        "100mbit",
        "--period-ms",
        "500",
        "--data-dir",
        str(data),
        "--json",
        "-",
    )
    if up.returncode != 0:
        hushmon("testbed", "down")
        pytest.fail(f"testbed up failed: {up.stderr.strip()}")
    try:
        yield LiveBed(json.loads(up.stdout), data)
    finally:
        hushmon("testbed", "down")
        shutil.rmtree(data, ignore_errors=True)
