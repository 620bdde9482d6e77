"""Render a report in headless Chromium and save a PNG, to look at it (and
to check in tests that a browser with no network can show it)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from hushmon.errors import HushmonError

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(html_path: Path, png_path: Path, width: int = 1200, height: int = 2400) -> Path:
    browser = chromium_path()
    if browser is None:
        raise HushmonError("chromium not found: run scripts/install-deps.sh")
    with tempfile.TemporaryDirectory(prefix="hushmon-chromium-") as profile:
        cmd = [
            browser,
            *_FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={png_path}",
            html_path.resolve().as_uri(),
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        except subprocess.TimeoutExpired as exc:
            raise HushmonError(f"chromium timed out rendering {html_path}") from exc
    if proc.returncode != 0 or not png_path.is_file():
        raise HushmonError(
            f"chromium failed to render {html_path}: {proc.stderr.strip().splitlines()[-1:]}"
        )
    return png_path
