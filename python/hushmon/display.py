"""What may be shown to a person: names that came from the wire or the data,
and URLs that may carry a password.

A job id, host, rack or metric name reaches ``hushmon top`` from any node
that can publish; one holding ``ESC [ 2 J`` or ``ESC ] 0 ;`` would clear or
retitle the viewer's terminal, a bidi override would reorder the line. Every
such name goes through :func:`printable` on its way to a terminal. A URL
goes through :func:`without_credentials` before it is printed or put in a
page, so a password given in ``--url`` is never echoed.
"""

from __future__ import annotations

import unicodedata
from urllib.parse import urlsplit, urlunsplit

# Unicode categories that draw nothing and may steer a terminal: controls
# (C0, DEL, C1 such as the 8-bit CSI), format characters (bidi overrides,
# zero-width ones) and lone surrogates.
_HIDDEN = frozenset({"Cc", "Cf", "Cs"})


def printable(text: str) -> str:
    """``text`` with every control, format or surrogate character written
    as its Python escape (``\\x1b``, ``\\u202e``, ``\\n``): visible, never
    obeyed. A tab is kept: tables of lines use it, and it moves only to the
    next tab stop."""
    if text.isprintable():
        return text
    return "".join(
        ch.encode("unicode_escape").decode("ascii")
        if ch != "\t" and unicodedata.category(ch) in _HIDDEN
        else ch
        for ch in text
    )


def without_credentials(url: str) -> str:
    """``url`` (several, comma-separated, as ``--url`` takes them) with any
    user and password replaced by ``***``: a NATS token can be the user
    part alone (``nats://TOKEN@host``)."""
    shown = []
    for one in url.split(","):
        try:
            parts = urlsplit(one.strip())
        except ValueError:
            shown.append("***")  # unparsable: may hold anything
            continue
        if "@" in parts.netloc:
            host = parts.netloc.rpartition("@")[2]
            parts = parts._replace(netloc=f"***@{host}")
        shown.append(printable(urlunsplit(parts)))
    return ",".join(shown)
