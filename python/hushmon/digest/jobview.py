"""What the derived sensors and the scope description read of a job.

:class:`hushmon.digest.jobdata.JobData` has all of it; ``sensors`` and
``scope`` are typed against this protocol instead, so that ``jobdata``
may use them (a job's derived sensors are computed when first asked for)
without their importing ``jobdata`` back.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class JobView(Protocol):
    base_names: list[str]  # the sensors the store holds, as stored
    # The base sensors each derived sensor was computed from.
    derived_inputs: dict[str, list[str]]

    def has(self, sensor: str) -> bool: ...

    def matrix(self, sensor: str) -> np.ndarray | None:
        """hosts x periods values of a base or derived sensor, or None."""

    def base_sensors(self, prefix: str) -> list[str]:
        """Base sensors named ``prefix`` or ``prefix[tags]``."""

    def add_stats(self, sensor: str, m: np.ndarray) -> None:
        """Adds a derived sensor's across-node statistics to the job."""
