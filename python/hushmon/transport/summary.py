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

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ALPHA = 0.01


def gamma_of(alpha: float) -> float:
    return (1.0 + alpha) / (1.0 - alpha)


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
        values = np.asarray(values, dtype=np.float64)
        log_gamma = math.log(gamma_of(self.alpha))
        self.zero += int(np.count_nonzero(values == 0.0))
        for sign, buckets in ((1.0, self.pos), (-1.0, self.neg)):
            part = values[values * sign > 0.0] * sign
            if len(part) == 0:
                continue
            index = np.ceil(np.log(part) / log_gamma).astype(np.int64)
            keys, counts = np.unique(index, return_counts=True)
            for k, c in zip(keys.tolist(), counts.tolist(), strict=True):
                buckets[k] = buckets.get(k, 0) + c

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
        alpha = float(obj.get("alpha", ALPHA))
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"sketch alpha {alpha} outside (0, 1)")

        def buckets(name: str) -> dict[int, int]:
            raw = obj.get(name, {})
            if not isinstance(raw, Mapping):
                raise ValueError(f"sketch {name} is not an object")
            out = {int(k): int(v) for k, v in raw.items()}
            if any(v < 0 for v in out.values()):
                raise ValueError(f"sketch {name} has a negative count")
            return out

        zero = int(obj.get("zero", 0))
        if zero < 0:
            raise ValueError("sketch zero count is negative")
        return cls(alpha, zero, buckets("pos"), buckets("neg"))


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
        if len(x) == 0:
            return out
        out.count = len(x)
        out.sum = float(x.sum())
        out.mean = out.sum / out.count
        out.m2 = float(np.sum((x - out.mean) ** 2))
        out.min = float(x.min())
        out.max = float(x.max())
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
        try:
            out = cls(
                count=int(obj["count"]),
                sum=float(obj["sum"]),
                mean=float(obj["mean"]),
                m2=float(obj["m2"]),
                min=float(obj["min"]),
                max=float(obj["max"]),
                sketch=Sketch.from_json(obj.get("sketch", {})) if with_sketch else Sketch(),
            )
        except KeyError as exc:
            raise ValueError(f"summary without {exc.args[0]!r}") from exc
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"summary has a value of the wrong type ({exc})") from exc
        if out.count <= 0:
            raise ValueError(f"summary count {out.count} is not positive")
        if out.sketch.count not in (0, out.count):
            raise ValueError(f"sketch holds {out.sketch.count} values, count is {out.count}")
        return out

    def sketch_text(self) -> str:
        return json.dumps(self.sketch.to_json(), separators=(",", ":"))


def merge_all(parts: Iterable[Summary]) -> Summary:
    out = Summary()
    for part in parts:
        out.merge(part)
    return out
