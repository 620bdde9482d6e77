"""What a long-lived hushmon process (commands.DAEMONS: collect, serve,
metrics, alert) puts in its own environment before anything imports Arrow.

Arrow picks its C++ default memory pool once, from ARROW_DEFAULT_MEMORY_POOL,
the first time any of its code asks for it, and pyarrow's import already
does. ``pyarrow.set_memory_pool`` later moves only pyarrow's own calls: the
Parquet writer's encoders still take their buffers from the C++ default,
mimalloc in the wheels, whose arena keeps what it once held (~30 MiB of a
raw collector that writes a Parquet file a second) and which no trim gives
back. With the variable set first, every Arrow buffer comes from glibc's
heap, tuned at start (transport/memdump.py: tune_malloc_for_a_daemon), whose
large blocks go back to the system at free. A site's own setting is kept.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


def set_for_a_daemon(environ: MutableMapping[str, str] = os.environ) -> None:
    environ.setdefault(ARROW_POOL_ENV, "system")
