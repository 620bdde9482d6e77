"""Slurm host lists (``n[1-3,7],gpu[01-02]``) expanded to host names.

Low in the package: the digest's fabric (topology.conf), the control
channel and the Slurm job lookups of the transport all read host lists.
"""

from __future__ import annotations

import re

from hushmon.errors import HushmonError

# A host list names at most this many hosts (Slurm's own hostlist limit is
# 64 Ki): 'n[1-99999999]' is a typo or an attack, not a cluster, and would
# take minutes and gigabytes to expand.
MAX_HOSTLIST_HOSTS = 65_536
_MAX_INDEX_DIGITS = 9


def expand_hostlist(text: str, limit: int = MAX_HOSTLIST_HOSTS) -> list[str]:
    """Slurm host lists: ``n[1-3,7],gpu[01-02],x`` -> n1 n2 n3 n7 gpu01 gpu02 x.
    More than ``limit`` hosts is refused before any is made."""
    out: list[str] = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text):
        item = item.strip()
        if not item:
            continue
        m = re.fullmatch(r"([^\[]*)\[([^\]]+)\](.*)", item)
        if not m:
            _room(text, out, 1, limit)
            out.append(item)
            continue
        prefix, ranges, rest = m.groups()
        tails = expand_hostlist(rest, limit) if rest else [""]
        for part in ranges.split(","):
            lo, dash, hi = part.partition("-")
            if not lo.isdigit() or (dash and not hi.isdigit()):
                raise HushmonError(f"bad host list {text!r}: range {part!r}")
            if max(len(lo), len(hi)) > _MAX_INDEX_DIGITS:
                raise HushmonError(
                    f"bad host list {text!r}: range {part!r} (at most {_MAX_INDEX_DIGITS} digits)"
                )
            first, last = int(lo), int(hi if dash else lo)
            _room(text, out, max(0, last - first + 1) * len(tails), limit)
            width = len(lo)
            out += [f"{prefix}{i:0{width}d}{t}" for i in range(first, last + 1) for t in tails]
    return out


def _room(text: str, out: list[str], more: int, limit: int) -> None:
    if len(out) + more > limit:
        raise HushmonError(f"host list {text[:60]!r} names more than {limit:,} hosts")
