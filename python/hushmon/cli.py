"""Entry point of the ``hushmon`` command: dispatches to the subcommand table."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from hushmon import __version__
from hushmon.commands import COMMANDS, DAEMONS
from hushmon.daemon_env import set_for_a_daemon
from hushmon.errors import HushmonError


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with just ``only``.

    Each command module is imported only when its command is used (or for
    ``--help``): a ``hushmon run`` should not pay for importing the plotting
    and statistics stacks of every other command before the job starts.
    """
    parser = argparse.ArgumentParser(
        prog="hushmon",
        description="HPC monitoring that measures its own impact on the jobs it watches.",
    )
    parser.add_argument("--version", action="version", version=f"hushmon {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS:
        if only is not None and name != only:
            continue
        importlib.import_module(module_name).register(subparsers)
        if name not in subparsers.choices:
            raise RuntimeError(f"{module_name}.register did not add the '{name}' command")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = {name for name, _module in COMMANDS}
    if argv and argv[0] in DAEMONS:
        set_for_a_daemon()
    parser = build_parser(only=argv[0] if argv and argv[0] in names else None)
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
    except BrokenPipeError:
        # The reader went away (`hushmon ... | head`): as any Unix tool, stop
        # quietly; stdout is pointed at /dev/null so the interpreter's final
        # flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
