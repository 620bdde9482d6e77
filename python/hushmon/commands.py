"""The table of ``hushmon`` subcommands.

Each entry names a module that defines ``register(subparsers) -> None``; the
module adds its parser and sets ``func`` on it (a callable taking the parsed
arguments and returning an exit code). Adding a command is a new module and
one line here. Modules are imported only when present, so a part still under
construction does not break the others.
"""

COMMANDS: list[tuple[str, str]] = [
    ("bench", "hushmon.bench.cli"),
    ("noise", "hushmon.noise.cli"),
    ("ingest", "hushmon.store.cli"),
    ("run", "hushmon.run.cli"),
    ("digest", "hushmon.digest.cli"),
    ("compare", "hushmon.digest.compare_cli"),
]
