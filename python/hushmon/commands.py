"""The table of ``hushmon`` subcommands.

Each entry names a module that defines ``register(subparsers) -> None``; the
module adds its parser and sets ``func`` on it (a callable taking the parsed
arguments and returning an exit code). Adding a command is a new module and
one line here. A module is imported only when its command runs (or for
``--help``), so ``register`` must stay cheap: heavy imports belong inside
the command's function.
"""

COMMANDS: list[tuple[str, str]] = [
    ("bench", "hushmon.bench.cli"),
    ("noise", "hushmon.noise.cli"),
    ("ingest", "hushmon.store.cli"),
    ("store", "hushmon.store.lake_cli"),
    ("run", "hushmon.runcmd.cli"),
    ("digest", "hushmon.digest.cli"),
    ("compare", "hushmon.digest.compare_cli"),
    ("testbed", "hushmon.testbed.cli"),
    ("collect", "hushmon.transport.collect_cli"),
    ("transport", "hushmon.transport.cli"),
    ("ctl", "hushmon.transport.ctl_cli"),
    ("overhead", "hushmon.overhead.cli"),
    ("top", "hushmon.live.top_cli"),
    ("serve", "hushmon.live.serve_cli"),
    ("metrics", "hushmon.metrics.cli"),
    ("tag", "hushmon.tags.cli"),
    ("alert", "hushmon.tags.alert_cli"),
    ("job", "hushmon.jobsum.cli"),
    ("export", "hushmon.export.cli"),
    ("probe", "hushmon.probe.cli"),
]

# Commands that run for weeks as a site's services: hushmon.cli gives them a
# daemon's environment (daemon_env.py) before their module is imported.
DAEMONS: frozenset[str] = frozenset({"collect", "serve", "metrics", "alert"})
