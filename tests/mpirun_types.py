"""The type of the ``mpirun`` fixture, importable by test modules.

It lives here, not in conftest.py, because each test folder may have a
conftest.py of its own and ``from conftest import`` would pick whichever
pytest loaded last."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

MpiRun = Callable[..., subprocess.CompletedProcess[str]]
