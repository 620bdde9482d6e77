"""What a study runs: kernels, configurations and modes, parsed strictly.

Every bad value is a HushmonError (one line, exit 2) naming the option."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hushmon.errors import HushmonError

# The kernels (c/apps/<name>.c), in the seed's order; a new kernel is a new
# file there and a line here.
KERNELS: dict[str, str] = {
    "ep": "Gaussian pairs, one reduction: compute-bound",
    "cg": "sparse products + small allreduces: latency-bound",
    "mg": "multigrid V-cycles, halo exchanges: bandwidth-bound",
    "ft": "3-D FFT, all-to-all transposes",
    "is": "integer sort, histogram + alltoallv",
    "lu": "pipelined SSOR wavefronts",
}
CLASSES = ("S", "W", "A")
_CONFIG = re.compile(r"^(\d+)-(\d+)-([A-Za-z])$")


@dataclass(frozen=True, order=True)
class Config:
    """The seed's notation: <nodes>-<processes per node>-<class>."""

    nodes: int
    ppn: int
    cls: str

    @property
    def ranks(self) -> int:
        return self.nodes * self.ppn

    def __str__(self) -> str:
        return f"{self.nodes}-{self.ppn}-{self.cls}"


def parse_config(text: str) -> Config:
    m = _CONFIG.match(text.strip())
    if not m:
        raise HushmonError(f"--config {text!r}: expected NODES-PPN-CLASS, e.g. 1-2-S")
    nodes, ppn, cls = int(m[1]), int(m[2]), m[3].upper()
    if cls not in CLASSES:
        raise HushmonError(f"--config {text}: class {cls} is not one of {', '.join(CLASSES)}")
    if nodes < 1 or ppn < 1 or ppn > 1024:
        raise HushmonError(f"--config {text}: nodes and processes per node must be 1 .. 1024")
    if nodes > 1:
        raise HushmonError(
            f"--config {text}: more than one node needs the multi-node test bed, which "
            "hushmon overhead does not drive yet (docs/overhead.md); use 1-PPN-CLASS"
        )
    return Config(nodes, ppn, cls)


def parse_list(text: str, known: list[str], option: str) -> list[str]:
    """A comma list of known names, in the order given, without repeats."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise HushmonError(f"{option}: empty list")
    for name in names:
        if name not in known:
            raise HushmonError(f"{option}: unknown {name!r} (known: {', '.join(known)})")
    if len(set(names)) != len(names):
        raise HushmonError(f"{option}: {text!r} names something twice")
    return names
