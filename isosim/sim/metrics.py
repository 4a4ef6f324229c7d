"""Validation metrics from pass rates, exact and estimated.

For a problem with pass rate p and k samples:

* avg@k   = p                      (mean pass rate)
* best@k  = 1 - (1 - p)^k          (pass@k: at least one of k correct; coverage)
* worst@k = p^k                    (all k correct; sharpening, "perfect solvability")

From c correct out of m samples the unbiased estimators are

* pass@k  = 1 - C(m - c, k) / C(m, k) = 1 - prod_{j=0}^{k-1} (m - c - j) / (m - j)
* worst@k = C(c, k) / C(m, k)         = prod_{j=0}^{k-1} (c - j) / (m - j)

written here in their numerically stable product forms.
"""
from __future__ import annotations

import re

import numpy as np

from ..errors import IsosimInputError

_METRIC_RE = re.compile(r"^(avg|best|worst)@([1-9][0-9]*)$")


def parse_metric(name: str) -> tuple[str, int]:
    """Split ``"best@4"`` into ``("best", 4)``; raise :class:`IsosimInputError` otherwise."""
    m = _METRIC_RE.match(str(name).strip())
    if not m:
        raise IsosimInputError(
            f"unknown metric {name!r}: expected avg@k, best@k or worst@k with k >= 1"
        )
    return m.group(1), int(m.group(2))


def exact_metric(p: np.ndarray, kind: str, k: int) -> np.ndarray:
    """Per-problem exact metric of pass rates ``p`` (any shape)."""
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    if kind == "avg":
        return p
    if kind == "best":
        with np.errstate(divide="ignore"):
            return -np.expm1(k * np.log1p(-p)) if k > 1 else p.copy()
    if kind == "worst":
        return p**k
    raise IsosimInputError(f"unknown metric kind {kind!r}")


def population_metric(p: np.ndarray, name: str) -> float:
    """Mean over problems of the exact metric ``name`` (e.g. ``"worst@4"``)."""
    kind, k = parse_metric(name)
    return float(np.mean(exact_metric(p, kind, k)))


def pass_at_k_unbiased(c: np.ndarray, m: int, k: int) -> np.ndarray:
    """Unbiased pass@k from ``c`` correct of ``m`` samples: 1 - C(m-c,k)/C(m,k)."""
    c = np.asarray(c, dtype=np.int64)
    if k > m:
        raise IsosimInputError(f"pass@{k} needs at least {k} samples, got {m}")
    j = np.arange(k, dtype=float)
    # C(m-c,k)/C(m,k) = prod_{j<k} (m-c-j)/(m-j); zero once m-c < k
    num = (m - c)[..., None].astype(float) - j
    ratio = np.where(num > 0, num / (m - j), 0.0)
    return 1.0 - np.prod(ratio, axis=-1)


def worst_at_k_unbiased(c: np.ndarray, m: int, k: int) -> np.ndarray:
    """Unbiased worst@k (all k correct) from ``c`` correct of ``m``: C(c,k)/C(m,k)."""
    c = np.asarray(c, dtype=np.int64)
    if k > m:
        raise IsosimInputError(f"worst@{k} needs at least {k} samples, got {m}")
    j = np.arange(k, dtype=float)
    num = c[..., None].astype(float) - j
    ratio = np.where(num > 0, num / (m - j), 0.0)
    return np.prod(ratio, axis=-1)


def estimated_metric(c: np.ndarray, m: int, kind: str, k: int) -> np.ndarray:
    """Per-problem unbiased estimate of ``kind@k`` from ``c`` correct of ``m`` samples."""
    if kind == "avg":
        return np.asarray(c, dtype=float) / m
    if kind == "best":
        return pass_at_k_unbiased(c, m, k)
    if kind == "worst":
        return worst_at_k_unbiased(c, m, k)
    raise IsosimInputError(f"unknown metric kind {kind!r}")


