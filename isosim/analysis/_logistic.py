"""Robust least squares for the four-parameter logistic y = c + a * expit(s * (x - m)), a >= 0.

Both the ScaleRL reward curve and the n*(C) scaling law are this curve. The fit runs in
standardised units u = (x - min x) / span x and v = (y - min y) / span y, where the bounds

    0 <= a <= 10,   |s| <= 100,   -1 <= m <= 2,   -10 <= c <= 1

hold whatever the units of the data. A slope of 100 standardised units is a transition over
1% of the observed x range: a step, which the data cannot tell from a steeper one.

The fit is ``scipy.optimize.least_squares`` (trust-region reflective, analytic Jacobian) in
two stages: ordinary least squares from every start, then the robust ``loss`` from the best
of them with ``f_scale`` = 1.4826 * median |residual| of stage one (the MAD estimate of the
noise scale) unless given.
"""
from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from ..errors import IsosimInputError

LOSSES = ("linear", "soft_l1", "huber", "cauchy", "arctan")
_LOWER = np.array([0.0, -100.0, -1.0, -10.0])
_UPPER = np.array([10.0, 100.0, 2.0, 1.0])
_MIN_SLOPE = 1e-6
_MAX_NFEV = 100
#: fits kept per process (:func:`fit_logistic`): a bootstrap refits the same points many times
MEMO_SIZE = 4096
_memo: OrderedDict = OrderedDict()
_memo_lock = threading.Lock()


def expit(x):
    """The logistic function ``1 / (1 + e^-x)`` (SciPy's ``expit``, in NumPy: the planner and the
    frontier use it without importing ``scipy.special``, about 0.1 s of a plan's start-up)."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=float)))


@dataclass(frozen=True)
class Logistic:
    """y = c + a * expit(s * (x - m)) in data units, with its R^2 on the fitted points."""

    a: float
    s: float
    m: float
    c: float
    r2: float
    n_points: int

    def __call__(self, x) -> np.ndarray:
        return logistic(np.asarray(x, dtype=float), self.a, self.s, self.m, self.c)


def logistic(x: np.ndarray, a: float, s: float, m: float, c: float) -> np.ndarray:
    return c + a * expit(s * (x - m))


def _residuals(p, u, v):
    return logistic(u, *p) - v


def _jacobian(p, u, v):
    a, s, m, _ = p
    e = expit(s * (u - m))
    de = e * (1.0 - e)
    return np.column_stack([e, a * de * (u - m), -a * de * s, np.ones_like(u)])


def _as_1d(values, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise IsosimInputError(f"{name} must be numbers") from None
    if arr.ndim != 1:
        raise IsosimInputError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def _bounds(slope_sign: int) -> tuple[np.ndarray, np.ndarray]:
    lower, upper = _LOWER.copy(), _UPPER.copy()
    if slope_sign > 0:
        lower[1] = _MIN_SLOPE
    return lower, upper


def _default_starts(slope_sign: int) -> list[np.ndarray]:
    signs = (1.0,) if slope_sign > 0 else (1.0, -1.0)
    return [
        np.array([1.0, sign * s, m, 0.0])
        for sign in signs
        for s in (4.0, 12.0, 40.0)
        for m in (0.25, 0.5, 0.75)
    ]


def fit_logistic(
    x,
    y,
    *,
    slope_sign: int = 0,
    starts: Iterable[Sequence[float]] | None = None,
    loss: str = "soft_l1",
    f_scale: float | None = None,
    x_name: str = "x",
    y_name: str = "y",
    c_fixed: float | None = None,
) -> Logistic:
    """Fit y = c + a expit(s (x - m)) with a >= 0 (and s > 0 when ``slope_sign`` > 0).

    ``starts`` are (a, s, m, c) in data units; the default is a grid of 9 (or 18 with
    both slope signs). ``c_fixed``: the lower level c is this number, not fitted (the
    other three are). Raises :class:`IsosimInputError` on data that cannot be fitted.

    The fit is a function of its arguments alone, so a call with the same points in the same
    order (bit for bit), starts and options returns the fit (or raises the error) of the first
    such call, kept in a memo of :data:`MEMO_SIZE` fits. A seed bootstrap refits each n's curve on
    every resample, and with few seeds most resamples give one of a few sets of points (with two
    seeds per n, four orderings of two runs).
    """
    if starts is not None and not isinstance(starts, (list, tuple)):
        starts = list(starts)  # read once: the memo's key and the fit both read it
    key = _memo_key(x, y, slope_sign, starts, loss, f_scale, x_name, y_name, c_fixed)
    if key is None:
        return _fit_logistic(x, y, slope_sign, starts, loss, f_scale, x_name, y_name, c_fixed)
    with _memo_lock:
        out = _memo.get(key)
        if out is not None:
            _memo.move_to_end(key)
    if out is None:
        try:
            out = _fit_logistic(x, y, slope_sign, starts, loss, f_scale, x_name, y_name, c_fixed)
        except IsosimInputError as exc:
            out = _Failed(exc.args)  # its message only: the exception's traceback would hold the frames
        with _memo_lock:
            _memo[key] = out
            while len(_memo) > MEMO_SIZE:
                _memo.popitem(last=False)
    if isinstance(out, _Failed):
        raise IsosimInputError(*out.args)
    return out


@dataclass(frozen=True)
class _Failed:
    """A fit that raised :class:`IsosimInputError`, as the memo keeps it."""

    args: tuple


def _memo_key(x, y, slope_sign, starts, loss, f_scale, x_name, y_name, c_fixed):
    """The exact identity of a call to :func:`fit_logistic`, or None when an argument cannot be
    read as floats (the fit itself then says why)."""
    try:
        xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        st = None if starts is None else tuple(tuple(float(p) for p in s) for s in starts)
        extra = (slope_sign, st, loss, None if f_scale is None else float(f_scale), x_name, y_name,
                 None if c_fixed is None else float(c_fixed))
        hash(extra)
    except (TypeError, ValueError):
        return None
    return xa.shape, ya.shape, xa.tobytes(), ya.tobytes(), extra


def _fit_logistic(x, y, slope_sign, starts, loss, f_scale, x_name, y_name, c_fixed) -> Logistic:
    if loss not in LOSSES:
        raise IsosimInputError(f"unknown loss {loss!r}: expected one of {', '.join(LOSSES)}")
    x, y = _as_1d(x, x_name), _as_1d(y, y_name)
    if x.shape != y.shape:
        raise IsosimInputError(f"{x_name} and {y_name} differ in length ({x.size} vs {y.size})")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise IsosimInputError(f"{x_name} and {y_name} must be finite (found NaN or infinity)")
    n_distinct = np.unique(x).size
    if n_distinct < 4:
        raise IsosimInputError(
            f"a sigmoid fit needs at least 4 distinct {x_name} values, got {n_distinct}"
        )
    with np.errstate(all="ignore"):  # the span of huge finite values overflows: checked below
        x0, xs, y0, ys = x.min(), np.ptp(x), y.min(), np.ptp(y)
        u, v = (x - x0) / xs, (y - y0) / ys
    if ys == 0:
        raise IsosimInputError(f"{y_name} is constant ({y[0]:g}): there is no curve to fit")
    if not (np.isfinite(xs) and np.isfinite(ys) and xs > 0 and ys > 0):
        raise IsosimInputError(f"{x_name} or {y_name} spans a range too large or small to fit")
    if not (np.all(np.isfinite(u)) and np.all(np.isfinite(v))):
        raise IsosimInputError(f"{x_name} or {y_name} is out of range for a fit")
    lower, upper = _bounds(slope_sign)
    if starts is None:
        p0s = _default_starts(slope_sign)
    else:
        p0s = [np.array([a / ys, s * xs, (m - x0) / xs, (c - y0) / ys]) for a, s, m, c in starts]
    fixed = None
    if c_fixed is not None:
        fixed = (float(c_fixed) - y0) / ys
        if np.isfinite(fixed) and fixed > upper[3]:
            raise IsosimInputError(f"{y_name} never rises above its fixed lower level {c_fixed:g}: no rising curve")
        if not (np.isfinite(fixed) and fixed >= lower[3]):
            raise IsosimInputError(f"the fixed lower level {c_fixed!r} lies too far below the {y_name} values to fit")
        for p0 in p0s:
            p0[3] = fixed
    p = _two_stage(u, v, p0s, lower, upper, loss, None if f_scale is None else f_scale / ys, fixed)
    with np.errstate(all="ignore"):
        a, s, m, c = p[0] * ys, p[1] / xs, x0 + p[2] * xs, y0 + p[3] * ys
        resid = logistic(x, a, s, m, c) - y
        r2 = 1.0 - float(np.sum(resid**2) / np.sum((y - y.mean()) ** 2))
    if not np.all(np.isfinite([a, s, m, c, r2])):
        raise IsosimInputError(f"the sigmoid fit of {y_name} on {x_name} did not converge")
    return Logistic(float(a), float(s), float(m), float(c), r2, int(x.size))


def _solve(u, v, p0, lower, upper, loss, f_scale, fixed=None):
    """One least-squares fit from ``p0``; with ``fixed`` (standardised units) c is held there
    and only (a, s, m) move. The result's ``x`` is always the four parameters."""
    from scipy.optimize import least_squares  # here: importing it costs a planner's start-up 0.2 s

    free = slice(0, 3) if fixed is not None else slice(0, 4)

    def full(q):
        return q if fixed is None else np.append(q, fixed)

    span = upper - lower
    p0 = np.clip(np.nan_to_num(p0), lower + 1e-9 * span, upper - 1e-9 * span)[free]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = least_squares(
                lambda q: _residuals(full(q), u, v), p0, jac=lambda q: _jacobian(full(q), u, v)[:, free],
                bounds=(lower[free], upper[free]), loss=loss, f_scale=f_scale, method="trf", x_scale="jac",
                max_nfev=_MAX_NFEV,
            )
    except (ValueError, np.linalg.LinAlgError, FloatingPointError):
        return None
    res.x = full(res.x)
    return res if np.all(np.isfinite(res.x)) and np.isfinite(res.cost) else None


def _two_stage(u, v, p0s, lower, upper, loss, f_scale, fixed=None):
    results = [r for r in (_solve(u, v, p0, lower, upper, "linear", 1.0, fixed) for p0 in p0s) if r is not None]
    if not results:
        raise IsosimInputError("the sigmoid fit did not converge from any start")
    best = min(results, key=lambda r: r.cost)
    if loss == "linear":
        return best.x
    if f_scale is None:
        f_scale = 1.4826 * float(np.median(np.abs(best.fun)))
    robust = _solve(u, v, best.x, lower, upper, loss, max(f_scale, 1e-3), fixed)
    return (best if robust is None else robust).x
