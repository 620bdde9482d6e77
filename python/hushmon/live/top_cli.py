"""``hushmon top`` (the command table imports one module per command)."""

from hushmon.live.cli import register_top as register

__all__ = ["register"]
