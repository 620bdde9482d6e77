"""Entry point of the ``hushmon`` command: dispatches to the subcommand table."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from hushmon import __version__
from hushmon.commands import COMMANDS
from hushmon.errors import HushmonError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hushmon",
        description="HPC monitoring that measures its own impact on the jobs it watches.",
    )
    parser.add_argument("--version", action="version", version=f"hushmon {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only a missing command module is tolerated; a missing dependency
            # inside a present module is a real error and must surface.
            if exc.name is not None and module_name.startswith(exc.name):
                continue
            raise
        module.register(subparsers)
        if name not in subparsers.choices:
            raise RuntimeError(f"{module_name}.register did not add the '{name}' command")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except HushmonError as exc:
        print(f"hushmon: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("hushmon: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
