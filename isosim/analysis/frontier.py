"""The IsoCompute frontier: record-breaking points, the frontier f(C), per-group ScaleRL
curves, the compute-optimal pipeline (:func:`compute_optimal`; its arg-max rule lives in
:mod:`isosim.analysis.n_star`) and the sensitivity of the final reward to n and B_problem.

Tables are tidy pandas DataFrames with one row per evaluation: a compute column (rollouts,
> 0 for the fits), a value column (a reward metric) and identifying columns among
``n``, ``B_problem`` and ``run``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import IsosimInputError
from ._logistic import expit, fit_logistic
from .n_star import n_star_envelope

ID_COLUMNS = ("n", "B_problem", "run")
LN10 = math.log(10.0)


def _require(df: pd.DataFrame, *cols: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise IsosimInputError(f"expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise IsosimInputError(f"missing column(s) {', '.join(map(repr, missing))}")


def _numeric(df: pd.DataFrame, *cols: str) -> pd.DataFrame:
    out = df.copy()
    for c in cols:
        try:
            out[c] = pd.to_numeric(out[c]).astype(float)
        except (TypeError, ValueError):
            raise IsosimInputError(f"column {c!r} must hold numbers") from None
    return out.dropna(subset=list(cols))


def _run_keys(df: pd.DataFrame) -> list[str]:
    return ["run"] if "run" in df.columns else [c for c in ("n", "B_problem") if c in df.columns]


def record_breaking(
    df: pd.DataFrame,
    value_col: str = "value",
    compute_col: str = "compute",
    bucket: float | None = 0.01,
) -> pd.DataFrame:
    """Rows that set a new reward bucket high within their run, in order of compute.

    Per run (the ``run`` column, else each (n, B_problem), else the whole table), rows are
    sorted by compute (stably) and row j is kept when floor(R_j / bucket) exceeds the
    largest floor(R_i / bucket) of the earlier rows; the first row always is. The quotient
    is rounded to 1e-9 first, so 0.12 / 0.01 lands in bucket 12. ``bucket`` 0 or None keeps
    every strict improvement, R_j > max_{i<j} R_i. Rows with NaN value or compute are dropped.
    """
    _require(df, value_col, compute_col)
    try:
        bucket = None if bucket is None else float(bucket)
    except (TypeError, ValueError):
        bucket = math.nan
    if bucket is not None and not (math.isfinite(bucket) and bucket >= 0):
        raise IsosimInputError(f"bucket width must be a number >= 0, got {bucket!r}")
    d = _numeric(df, value_col, compute_col)
    d = d.sort_values(compute_col, kind="stable").reset_index(drop=True)
    key = d[value_col].to_numpy()
    if bucket:
        with np.errstate(all="ignore"):
            key = np.floor(np.round(key / bucket, 9))
    key = pd.Series(key, index=d.index)
    by = [d[c] for c in _run_keys(d)]
    if by:
        best = key.groupby(by, sort=False, dropna=False).cummax()
        prev = best.groupby(by, sort=False, dropna=False).shift(1)
    else:
        prev = key.cummax().shift(1)
    return d[(key > prev.fillna(-np.inf)).to_numpy()].reset_index(drop=True)


def frontier(df: pd.DataFrame, value_col: str = "value", compute_col: str = "compute") -> pd.DataFrame:
    """The empirical frontier f(C) = max_{j : C_j <= C} R_j as a step-function table.

    One row per step, in increasing compute and strictly increasing value, with the
    identifying columns (n, B_problem, run, where present) of the point that attains it;
    f(C) is the value of the last row with compute <= C (undefined before the first).
    """
    _require(df, value_col, compute_col)
    d = _numeric(df, value_col, compute_col)
    d = d.sort_values([compute_col, value_col], ascending=[True, False], kind="stable")
    v = d[value_col].to_numpy()
    prev = np.concatenate([[-np.inf], np.maximum.accumulate(v)[:-1]]) if v.size else v
    ids = [c for c in ID_COLUMNS if c in d.columns]
    return d.loc[v > prev, [compute_col, value_col, *ids]].reset_index(drop=True)


def frontier_at(
    front: pd.DataFrame, compute, value_col: str = "value", compute_col: str = "compute"
) -> np.ndarray:
    """Evaluate the step function of :func:`frontier` at ``compute`` (NaN before its start)."""
    c = np.atleast_1d(np.asarray(compute, dtype=float))
    idx = np.searchsorted(front[compute_col].to_numpy(float), c, side="right") - 1
    vals = front[value_col].to_numpy(float)
    return np.where(idx >= 0, vals[np.maximum(idx, 0)] if vals.size else np.nan, np.nan)


@dataclass(frozen=True)
class ScaleRLFit:
    """R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B), B > 0, A >= R0, fitted on [c_min, c_max]."""

    R0: float
    A: float
    C_mid: float
    B: float
    c_min: float = 0.0
    c_max: float = math.inf
    r2: float = math.nan

    def predict(self, compute) -> np.ndarray:
        c = np.asarray(compute, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.R0 + (self.A - self.R0) * expit(self.B * np.log(c / self.C_mid))

    def as_start(self) -> tuple[float, float, float, float]:
        """The curve as logistic parameters (A - R0, B ln10, log10 C_mid, R0), for warm starts."""
        return (self.A - self.R0, self.B * LN10, math.log10(self.C_mid), self.R0)


def fit_reward_curve(
    compute,
    value,
    *,
    loss: str = "soft_l1",
    f_scale: float | None = None,
    starts: Iterable[ScaleRLFit] | None = None,
    r0: float | None = None,
) -> ScaleRLFit:
    """Fit the ScaleRL curve R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) by robust least squares.

    In x = log10 C the curve is R0 + (A - R0) expit(B ln10 (x - log10 C_mid)), a logistic
    with amplitude A - R0 >= 0 and slope B > 0, so the fit is monotone non-decreasing.
    Several starts (or the given ``starts``); ``loss`` is any of scipy's robust losses.
    ``r0``: R0, the reward before training (C -> 0), when it is measured; then only A,
    C_mid and B are fitted. Left free, R0 is whatever level the first points suggest, and
    a curve whose early points sit a little above the start can begin above it.
    """
    c = np.asarray(compute, dtype=float)
    if c.ndim == 1 and np.any(c[np.isfinite(c)] <= 0):
        raise IsosimInputError("compute must be positive for a fit on a log axis")
    with np.errstate(all="ignore"):
        x = np.log10(c)
    fit = fit_logistic(
        x, value, slope_sign=1, loss=loss, f_scale=f_scale,
        starts=None if starts is None else [s.as_start() for s in starts],
        x_name="log10 compute", y_name="reward", c_fixed=r0,
    )
    return ScaleRLFit(
        R0=fit.c, A=fit.c + fit.a, C_mid=float(10.0**fit.m), B=fit.s / LN10,
        c_min=float(c.min()), c_max=float(c.max()), r2=fit.r2,
    )


def _key(values) -> tuple:
    return tuple(v.item() if hasattr(v, "item") else v for v in values)


def fit_groups(
    records: pd.DataFrame,
    group: Sequence[str] = ("n",),
    *,
    value_col: str = "value",
    compute_col: str = "compute",
    ranges: Mapping[tuple, tuple[float, float]] | None = None,
    starts: Mapping[tuple, ScaleRLFit] | None = None,
    loss: str = "soft_l1",
    r0: Mapping[tuple, float] | None = None,
) -> dict[tuple, ScaleRLFit]:
    """One :func:`fit_reward_curve` per group of ``records`` (keys: tuples of group values).

    Each fit's [c_min, c_max] is the group's range in ``ranges`` (default: of ``records``).
    ``r0``: each group's reward before training where it is measured (:func:`initial_values`),
    which its curve then starts from. Groups that cannot be fitted (too few distinct points,
    constant) are left out; if none can be, :class:`IsosimInputError` says why.
    """
    group = list(group)
    _require(records, value_col, compute_col, *group)
    d = _numeric(records, value_col, compute_col)
    d = d[d[compute_col] > 0]
    fits, errors = {}, []
    for values, g in d.groupby(group, sort=True):
        key = _key(values if isinstance(values, tuple) else (values,))
        warm = None if starts is None or key not in starts else [starts[key]]
        try:
            fit = fit_reward_curve(g[compute_col], g[value_col], loss=loss, starts=warm,
                                   r0=None if r0 is None else r0.get(key))
        except IsosimInputError as exc:
            errors.append(f"{_label(group, key)}: {exc}")
            continue
        if ranges is not None and key in ranges:
            fit = replace(fit, c_min=float(ranges[key][0]), c_max=float(ranges[key][1]))
        fits[key] = fit
    if not fits:
        detail = errors[0] if errors else "no rows with positive compute"
        raise IsosimInputError(f"no group could be fitted ({detail})")
    return fits


def _label(group: Sequence[str], key: tuple) -> str:
    return ", ".join(f"{g}={k}" for g, k in zip(group, key))


def initial_values(
    df: pd.DataFrame, group: Sequence[str] = ("n",), value_col: str = "value", compute_col: str = "compute"
) -> dict[tuple, float]:
    """Each group's mean value at compute 0 (its runs' evaluations before training), for the
    groups that have one: the R0 their ScaleRL curves start from (:func:`fit_reward_curve`)."""
    _require(df, value_col, compute_col, *group)
    d = _numeric(df, value_col, compute_col)
    d = d[d[compute_col] == 0]
    means = d.groupby(list(group), sort=True)[value_col].mean()
    return {_key(k if isinstance(k, tuple) else (k,)): float(v) for k, v in means.items()}


def group_ranges(
    df: pd.DataFrame, group: Sequence[str] = ("n",), compute_col: str = "compute"
) -> dict[tuple, tuple[float, float]]:
    """(min, max) positive compute of each group: the range its curve may be used on."""
    d = _numeric(df, compute_col)
    d = d[d[compute_col] > 0]
    agg = d.groupby(list(group), sort=True)[compute_col].agg(["min", "max"])
    return {
        _key(k if isinstance(k, tuple) else (k,)): (float(r["min"]), float(r["max"]))
        for k, r in agg.iterrows()
    }


def log_grid(c_min: float, c_max: float, points_per_decade: int = 10) -> np.ndarray:
    """Log-spaced compute grid from c_min to c_max inclusive, ``points_per_decade`` per decade."""
    if not (0 < c_min <= c_max < math.inf):
        raise IsosimInputError(f"compute range [{c_min}, {c_max}] is not positive and finite")
    num = max(2, math.ceil(math.log10(c_max / c_min) * points_per_decade) + 1)
    grid = np.logspace(math.log10(c_min), math.log10(c_max), num)
    grid[0], grid[-1] = c_min, c_max
    return np.unique(grid)


def compute_optimal(
    df: pd.DataFrame,
    group: Sequence[str] = ("n",),
    grid=None,
    *,
    value_col: str = "value",
    compute_col: str = "compute",
    bucket: float | None = 0.01,
    points_per_decade: int = 10,
    slack_decades: float | None = None,
    starts: Mapping[tuple, ScaleRLFit] | None = None,
    min_groups: int = 1,
    r0: Mapping[tuple, float] | None = None,
) -> pd.DataFrame:
    """Compute-optimal allocation from evaluations: record-breaking points, one ScaleRL curve
    per group, then the fitted arg-max :func:`isosim.analysis.n_star.n_star_envelope`.
    Evaluations at compute 0 (before training) are not points of the curves: each group's
    mean there (:func:`initial_values`) is the R0 its curve starts from. ``r0`` gives those
    starts instead (a resample that holds no compute-0 rows); the starts used are returned in
    ``attrs["r0"]``.

    ``starts``: curves (by group key) that start the fits, one start each instead of the
    default grid (a bootstrap refit of similar data). The fitted curves are returned in the
    table's ``attrs["fits"]``.

    A group's curve is eligible only within its observed compute range (no extrapolation),
    compared at the grid's resolution: ``slack_decades`` defaults to half a grid step,
    0.5 / ``points_per_decade``. Returns the envelope table on ``grid`` (default:
    :func:`log_grid` over the union of the groups' ranges): compute, value, the arg-max
    group (n*, or n*, B_problem* and M* = C / (n* B_problem*)); ties and edges follow
    :mod:`isosim.analysis.n_star` (``min_groups``: leave out the grid points at which fewer
    groups' curves compete, listed in ``attrs["too_few_groups"]``).
    """
    group = list(group)
    _require(df, value_col, compute_col, *group)
    if r0 is None:
        r0 = initial_values(df, group, value_col, compute_col)
    df = df[pd.to_numeric(df[compute_col], errors="coerce") != 0]
    ranges = group_ranges(df, group, compute_col)
    records = record_breaking(df, value_col, compute_col, bucket)
    fits = fit_groups(records, group, value_col=value_col, compute_col=compute_col, ranges=ranges, starts=starts,
                      r0=r0)
    if grid is None:
        lo = min(f.c_min for f in fits.values())
        hi = max(f.c_max for f in fits.values())
        grid = log_grid(lo, hi, points_per_decade)
    slack = 0.5 / points_per_decade if slack_decades is None else slack_decades
    table = n_star_envelope(fits, grid, group, slack, min_groups=min_groups)
    table.attrs["fits"] = fits
    table.attrs["r0"] = r0
    return table


def final_values(
    df: pd.DataFrame, value_col: str = "value", compute_col: str = "compute"
) -> pd.DataFrame:
    """The last evaluation (largest compute) of each run: columns n, B_problem, run, value."""
    _require(df, value_col, compute_col)
    d = _numeric(df, value_col, compute_col).sort_values(compute_col, kind="stable")
    by = _run_keys(d)
    last = d.groupby(by, sort=False, dropna=False).tail(1) if by else d.tail(1)
    ids = [c for c in ID_COLUMNS if c in d.columns]
    return last[[*ids, value_col]].reset_index(drop=True)


@dataclass(frozen=True)
class Sensitivity:
    """Percent variation (max - min) / max * 100 of mean final reward along each axis."""

    over_n: float
    over_B_problem: float
    at_B_problem: int
    at_n: int


def _variation(values: pd.Series, axis: str) -> float:
    if values.size < 2:
        raise IsosimInputError(f"sensitivity over {axis} needs at least 2 values of {axis}")
    hi, lo = float(values.max()), float(values.min())
    if not hi > 0:
        raise IsosimInputError(f"sensitivity over {axis} needs a positive maximum reward")
    return (hi - lo) / hi * 100.0


def _most_covered(cells: pd.DataFrame, fixed: str, varied: str) -> int:
    counts = cells.groupby(fixed)[varied].nunique()
    return _key([counts[counts == counts.max()].index.min()])[0]


def sensitivity(
    final_df: pd.DataFrame,
    value_col: str = "value",
    *,
    at_B_problem: int | None = None,
    at_n: int | None = None,
) -> Sensitivity:
    """Sensitivity of the final validation reward to n versus B_problem.

    Rewards are averaged per (n, B_problem) cell (over seeds). ``over_n`` is the percent
    variation (max - min) / max * 100 of the cell means over n at B_problem =
    ``at_B_problem``; ``over_B_problem`` the same over B_problem at n = ``at_n``. The
    defaults are the B_problem with the most n values and the n with the most B_problem
    values (the smallest on ties). The study: 9.2% over n vs 1.9% over B_problem (easy).
    """
    _require(final_df, value_col, "n", "B_problem")
    cells = (
        _numeric(final_df, value_col, "n", "B_problem")
        .groupby(["n", "B_problem"], as_index=False)[value_col].mean()
    )
    if cells.empty:
        raise IsosimInputError("sensitivity needs final rewards, got none")
    bp = _most_covered(cells, "B_problem", "n") if at_B_problem is None else at_B_problem
    n = _most_covered(cells, "n", "B_problem") if at_n is None else at_n
    over_n = _variation(cells.loc[cells["B_problem"] == bp, value_col], "n")
    over_bp = _variation(cells.loc[cells["n"] == n, value_col], "B_problem")
    return Sensitivity(over_n, over_bp, int(bp), int(n))
