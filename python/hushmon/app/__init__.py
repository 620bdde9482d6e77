"""Application-side reporting into the node's hushmon-agent (libhushmon)."""

from hushmon.app.binding import Hushmon, HushmonStats, load

__all__ = ["Hushmon", "HushmonStats", "load"]
