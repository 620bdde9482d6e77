"""The factors' thresholds as read from ``parameters.toml``.

Its own module so that a factor can read another section (``[loss]``,
``[links]``) without importing the package, whose ``__init__`` imports every
factor: the registry checks that each registered factor has its section
(``factors.parameters``)."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

PARAMETERS_FILE = Path(__file__).with_name("parameters.toml")

# Sections that are no factor's own but several read.
SHARED_SECTIONS = ("loss", "links", "fabric")


@cache
def load_parameters() -> Mapping[str, Mapping[str, Any]]:
    with PARAMETERS_FILE.open("rb") as f:
        params = tomllib.load(f)
    missing = [s for s in SHARED_SECTIONS if s not in params]
    if missing:
        raise RuntimeError(f"{PARAMETERS_FILE} lacks sections for: {', '.join(missing)}")
    return params
