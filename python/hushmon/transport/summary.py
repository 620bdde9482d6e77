"""Mergeable summaries of docs/transport.md: moments and a DDSketch.

A :class:`Summary` holds count, sum, mean, M2 (sum of squared deviations
from the mean), min, max and a :class:`Sketch`. Two summaries merge exactly
for count/sum/min/max and for mean/M2 by Chan et al.'s pairwise formula;
sketches merge by adding bucket counts, so a quantile read from merged
sketches is within ``alpha`` relative error of the raw values' quantile.
The same math as the C reducer (c/transport/), so the store can check what
the reducers sent against its raw data.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hushmon.store.raw_summaries import ALPHA, buckets_of, gamma_of, moments_of
from hushmon.transport.wire import INT64_MAX, int64_reason

# A double's buckets at the smallest alpha the reducers use need ~10^5
# indices; a key beyond this or more buckets than this is not a sketch.
SKETCH_MAX_INDEX = 1 << 20
SKETCH_MAX_BUCKETS = 1 << 16
_BUCKET_KEY = re.compile(r"-?[0-9]{1,7}")


@dataclass
class Sketch:
    """DDSketch: a positive x goes to bucket ceil(log(x) / log(gamma)),
    a negative one likewise by -x in ``neg``, zeros are counted apart."""

    alpha: float = ALPHA
    zero: int = 0
    pos: dict[int, int] = field(default_factory=dict)
    neg: dict[int, int] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return self.zero + sum(self.pos.values()) + sum(self.neg.values())

    def add_values(self, values: np.ndarray) -> None:
        # the bucketing is the store's (store/raw_summaries.py), which
        # rebuilds summaries from raw data without this package
        added = buckets_of(values, self.alpha)
        self.zero += added.zero
        for mine, theirs in ((self.pos, added.pos), (self.neg, added.neg)):
            for k, c in theirs.items():
                mine[k] = mine.get(k, 0) + c

    def merge(self, other: Sketch) -> None:
        if not math.isclose(self.alpha, other.alpha, rel_tol=1e-12):
            raise ValueError(f"cannot merge sketches of alpha {self.alpha} and {other.alpha}")
        self.zero += other.zero
        for mine, theirs in ((self.pos, other.pos), (self.neg, other.neg)):
            for k, c in theirs.items():
                mine[k] = mine.get(k, 0) + c

    def quantile(self, q: float) -> float:
        """The value of rank floor(q (n - 1)) (numpy's 'lower'), within alpha."""
        n = self.count
        if n == 0 or not 0.0 <= q <= 1.0:
            return math.nan
        rank = math.floor(q * (n - 1))
        g = gamma_of(self.alpha)
        # ascending order: most negative first, zeros, then positives
        ordered = [(-k, c, -1.0) for k, c in self.neg.items()]
        ordered.sort(key=lambda t: t[0])
        seen = 0
        for neg_key, c, sign in ordered:
            seen += c
            if seen > rank:
                return sign * 2.0 * g ** (-neg_key) / (g + 1.0)
        seen += self.zero
        if seen > rank:
            return 0.0
        for k in sorted(self.pos):
            seen += self.pos[k]
            if seen > rank:
                return 2.0 * g**k / (g + 1.0)
        return math.nan  # unreachable: ranks stop at n - 1

    def to_json(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "zero": self.zero,
            "pos": {str(k): c for k, c in sorted(self.pos.items())},
            "neg": {str(k): c for k, c in sorted(self.neg.items())},
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Sketch:
        """A sketch from the contract's JSON; ValueError says what is wrong."""
        if not isinstance(obj, Mapping):
            raise ValueError("sketch is not an object")
        alpha = _finite("sketch alpha", obj.get("alpha", ALPHA))
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"sketch alpha {alpha} outside (0, 1)")

        def buckets(name: str) -> dict[int, int]:
            raw = obj.get(name, {})
            if not isinstance(raw, Mapping):
                raise ValueError(f"sketch {name} is not an object")
            if len(raw) > SKETCH_MAX_BUCKETS:
                raise ValueError(f"sketch {name} has {len(raw)} buckets (> {SKETCH_MAX_BUCKETS})")
            return _fast_buckets(raw) or _checked_buckets(name, raw)

        zero = obj.get("zero", 0)
        why = int64_reason("sketch zero count", zero)
        if why:
            raise ValueError(why)
        sketch = cls(alpha, zero, buckets("pos"), buckets("neg"))
        if sketch.count > INT64_MAX:
            raise ValueError("sketch counts add up beyond 2^63-1")
        return sketch


# A sketch's bucket keys joined by commas: one match checks them all.
_BUCKET_KEYS = re.compile(r"-?[0-9]{1,7}(?:,-?[0-9]{1,7})*")


def _fast_buckets(raw: Mapping[Any, Any]) -> dict[int, int] | None:
    """The buckets when every key and count is valid, checked by a few
    C-level passes (a rack partial has ~100 sketches of ~15-40 buckets);
    None when any is not, for :func:`_checked_buckets` to say which."""
    if not raw:
        return {}
    keys = list(raw)
    if not set(map(type, keys)) <= {str}:
        return None
    joined = ",".join(keys)
    if joined.count(",") != len(keys) - 1 or not _BUCKET_KEYS.fullmatch(joined):
        return None
    indices = list(map(int, keys))
    counts = list(raw.values())
    if (
        min(indices) < -SKETCH_MAX_INDEX
        or max(indices) > SKETCH_MAX_INDEX
        or not set(map(type, counts)) <= {int}
        or min(counts) < 0
        or max(counts) > INT64_MAX
    ):
        return None
    return dict(zip(indices, counts, strict=True))


def _checked_buckets(name: str, raw: Mapping[Any, Any]) -> dict[int, int]:
    """The buckets checked one by one: ValueError names the first bad one."""
    out: dict[int, int] = {}
    for k, v in raw.items():
        if not isinstance(k, str) or not _BUCKET_KEY.fullmatch(k):
            raise ValueError(f"sketch {name} bucket {str(k)[:20]!r} is not an index")
        index = int(k)
        if abs(index) > SKETCH_MAX_INDEX:
            raise ValueError(f"sketch {name} bucket {index} beyond {SKETCH_MAX_INDEX}")
        why = int64_reason(f"sketch {name} count", v)
        if why:
            raise ValueError(why)
        out[index] = v
    return out


def _finite(what: str, value: object) -> float:
    """A JSON number as a finite float (no bool, no string, no NaN or infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} is not a number")
    out = float(value) if not isinstance(value, int) or abs(value) < 2**1000 else math.inf
    if not math.isfinite(out):
        raise ValueError(f"{what} is not finite")
    return out


@dataclass
class Summary:
    count: int = 0
    sum: float = 0.0
    mean: float = 0.0
    m2: float = 0.0
    min: float = math.inf
    max: float = -math.inf
    sketch: Sketch = field(default_factory=Sketch)

    @classmethod
    def of(cls, values: Iterable[float] | np.ndarray, alpha: float = ALPHA) -> Summary:
        x = np.asarray(values if isinstance(values, np.ndarray) else list(values), np.float64)
        out = cls(sketch=Sketch(alpha))
        m = moments_of(x)
        if m is None:
            return out
        out.count, out.sum, out.mean, out.m2, out.min, out.max = (
            m.count, m.sum, m.mean, m.m2, m.min, m.max
        )  # fmt: skip
        out.sketch.add_values(x)
        return out

    def merge(self, other: Summary) -> Summary:
        """Adds ``other`` into this summary (Chan et al.) and returns it."""
        if other.count == 0:
            return self
        if self.count == 0:
            self.mean, self.m2 = other.mean, other.m2
        else:
            n = self.count + other.count
            delta = other.mean - self.mean
            self.mean += delta * other.count / n
            self.m2 += other.m2 + delta * delta * self.count * other.count / n
        self.count += other.count
        self.sum += other.sum
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)
        self.sketch.merge(other.sketch)
        return self

    @property
    def variance(self) -> float:
        """Population variance (numpy's var with ddof=0)."""
        return self.m2 / self.count if self.count else math.nan

    def quantile(self, q: float) -> float:
        return self.sketch.quantile(q)

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "sum": self.sum,
            "mean": self.mean,
            "m2": self.m2,
            "min": self.min,
            "max": self.max,
            "sketch": self.sketch.to_json(),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], with_sketch: bool = True) -> Summary:
        """A summary from the contract's JSON; ValueError says what is wrong.
        ``with_sketch=False`` reads the moments only (an empty sketch): views
        that show no quantiles skip 3/4 of the time per message."""
        if not isinstance(obj, Mapping):
            raise ValueError("a sensor's summary is not an object")
        missing = [k for k in ("count", "sum", "mean", "m2", "min", "max") if k not in obj]
        if missing:
            raise ValueError(f"summary without {missing[0]!r}")
        count = obj["count"]
        why = int64_reason("summary count", count, 1)
        if why:
            raise ValueError(why)
        out = cls(
            count=count,
            sum=_finite("summary sum", obj["sum"]),
            mean=_finite("summary mean", obj["mean"]),
            m2=_finite("summary m2", obj["m2"]),
            min=_finite("summary min", obj["min"]),
            max=_finite("summary max", obj["max"]),
            sketch=Sketch.from_json(obj.get("sketch", {})) if with_sketch else Sketch(),
        )
        if out.min > out.max:
            raise ValueError(f"summary min {out.min} > max {out.max}")
        if out.sketch.count not in (0, out.count):
            raise ValueError(f"sketch holds {out.sketch.count} values, count is {out.count}")
        return out


def merge_all(parts: Iterable[Summary]) -> Summary:
    out = Summary()
    for part in parts:
        out.merge(part)
    return out
