"""``hushmon serve`` (the command table imports one module per command)."""

from hushmon.live.cli import register_serve as register

__all__ = ["register"]
