"""The ``scope=host`` tag in sensor names: an agent in node scope tags every
host-wide line with it (:mod:`hushmon.digest.scope` says what that means).

On its own, below both ``sensors`` (which reads a host-wide series where
the node has none of its own) and ``scope`` (which sorts the sensors).
"""

from __future__ import annotations

HOST_TAG = "scope=host"


def host_variant(name: str) -> str:
    """``cpu.user_pct[cpu=total]`` -> ``cpu.user_pct[cpu=total,scope=host]``."""
    if name.endswith("]"):
        return name[:-1] + "," + HOST_TAG + "]"
    return name + "[" + HOST_TAG + "]"


def is_host_wide(sensor: str) -> bool:
    tags = sensor[sensor.find("[") + 1 : -1] if sensor.endswith("]") else ""
    return HOST_TAG in tags.split(",")
