"""The CLI's own contract: help, version, unknown commands, one-line errors."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from hushmon import cli
from hushmon.errors import HushmonError


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hushmon.cli", *args], capture_output=True, text=True, check=False
    )


def test_help_lists_commands() -> None:
    out = run_cli("--help")
    assert out.returncode == 0
    assert "COMMAND" in out.stdout


def test_unknown_command_fails_in_one_line() -> None:
    out = run_cli("no-such-command")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "invalid choice" in out.stderr


def test_no_command_prints_help_and_fails() -> None:
    out = run_cli()
    assert out.returncode == 2
    assert "usage" in out.stdout


def test_hushmon_error_becomes_exit_code(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    def failing(_args: argparse.Namespace) -> int:
        raise HushmonError("broken input", exit_code=3)

    parser = argparse.ArgumentParser(prog="hushmon")
    parser.set_defaults(func=failing)
    monkeypatch.setattr(cli, "build_parser", lambda only=None: parser)
    assert cli.main([]) == 3
    assert capsys.readouterr().err.strip() == "hushmon: broken input"


def test_a_reader_that_goes_away_ends_quietly(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """`hushmon ... | head`: no traceback, the shell's code for SIGPIPE."""
    from hushmon.testbed import cli as testbed_cli

    def closed_pipe() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(testbed_cli, "_bed", closed_pipe)
    assert cli.main(["testbed", "env"]) == 141
    assert "Traceback" not in capfd.readouterr().err
