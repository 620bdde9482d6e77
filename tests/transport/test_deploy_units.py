"""The services in deploy/nats/ (collector, reducers) run as no one's
root: a user of their own, no capabilities or new privileges, read-only
system, umask 077 for what they write. systemd's own audit
(``systemd-analyze security --offline``) rates each, and a unit above
3.0 on its 0-10 exposure scale (the collector as root was 9.6) fails."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hushmon.paths import REPO_ROOT

UNITS = sorted((REPO_ROOT / "deploy" / "nats").glob("*.service"))
MAX_EXPOSURE_TENTHS = 30  # systemd-analyze's --threshold is in tenths


def settings(unit: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in unit.read_text().splitlines():
        key, eq, value = line.partition("=")
        if eq and not line.startswith("#"):
            out[key.strip()] = value.strip()
    return out


@pytest.mark.parametrize("unit", UNITS, ids=[u.name for u in UNITS])
def test_service_runs_unprivileged(unit: Path) -> None:
    s = settings(unit)
    assert s.get("DynamicUser") == "true" and s.get("User", "") != "root", unit.name
    for key, value in (("NoNewPrivileges", "true"), ("ProtectSystem", "strict"),
                       ("CapabilityBoundingSet", ""), ("UMask", "0077")):  # fmt: skip
        assert s.get(key) == value, f"{unit.name}: {key}={s.get(key)!r}"


@pytest.mark.parametrize("unit", UNITS, ids=[u.name for u in UNITS])
def test_systemd_rates_the_service_exposure_low(unit: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze missing (Debian package systemd)")
    r = subprocess.run(
        [analyze, "security", "--offline=true", f"--threshold={MAX_EXPOSURE_TENTHS}", str(unit)],
        capture_output=True, text=True, timeout=60, check=False, cwd=unit.parent,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-1000:]
    assert "Overall exposure level" in r.stdout
