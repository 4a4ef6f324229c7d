"""Pilot runs for a calibration: reading and checking them, their level anchor and their noise.

Pilots are short runs of the user's own model in the ``isosim fit`` format
(:mod:`isosim.analysis.runs`): one row per evaluation with ``run``, ``n``, ``B_problem``,
``compute`` (or ``step``) and a metric column, at two or more values of n.

**Level anchor.** When runs have an evaluation at compute 0 (the base model), their mean
``y0`` is the pilots' base level, and the surrogate's curves are compared as
``y0 + (s(C) - s(0))``: the surrogate's gain, put on the pilots' base. This removes a
difference between the base pass rates in the file and the level the pilots' evaluation
measures (a different validation set, a different estimator) that no knob should absorb.
Without such rows the surrogate's own level is used.

**Noise.** ``noise_sd`` is the standard deviation of one pilot evaluation around the
expected curve of its allocation, from one of two estimators:

* *between seeds*, when some (n, B_problem) has two or more runs: each run interpolated
  (linear in log compute) at the union of the group's evaluation points inside every run's
  range, the unbiased variance across runs at each point, pooled over the points and the
  groups with their degrees of freedom: ``s^2 = sum (k_j - 1) s_j^2 / sum (k_j - 1)``;
* *within runs*, otherwise: for each interior evaluation j of a run, the residual from the
  straight line (in log compute) through its two neighbours,
  ``r_j = y_j - (w y_(j-1) + (1 - w) y_(j+1))`` with ``w = (x_(j+1) - x_j) / (x_(j+1) - x_(j-1))``,
  has variance ``sigma^2 (1 + w^2 + (1 - w)^2)`` for white noise on a locally straight
  curve; ``sigma^2`` is the median of ``r_j^2 / (1 + w^2 + (1 - w)^2)`` divided by 0.4549,
  the median of a chi-square with one degree of freedom (robust to a few kinks).

The first includes each run's lasting deviation (a seed that is ahead stays ahead); the
second sees only evaluation noise and step-to-step jitter.

**Training reward** (optional, :func:`read_training`): the mean reward of each logged step's
batch, averaged in bins of half a doubling of compute, each with its standard error.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..analysis.runs import validate_runs
from ..errors import IsosimInputError, shown
from ..sim.metrics import parse_metric

#: the median of a chi-square variable with one degree of freedom
_CHI2_1_MEDIAN = 0.454936


@dataclass(frozen=True)
class Pilots:
    """Checked pilot runs. ``table``: ``run, n, B_problem, compute, value`` sorted by run and
    compute; ``base_level``: the mean value at compute 0 (None without such rows);
    ``noise_sd`` and how it was estimated (``noise_between_seeds``, ``noise_within_runs``,
    NaN where not estimable); ``train``: the training reward in bins with their standard
    errors, or None."""

    metric: str
    table: pd.DataFrame
    base_level: float | None
    noise_sd: float
    noise_between_seeds: float
    noise_within_runs: float
    #: the training reward, binned (:func:`read_training`): ``run, n, B_problem, compute, value, se``
    train: pd.DataFrame | None = None

    @property
    def budget(self) -> float:
        """The largest compute any pilot reached (rollouts)."""
        return float(self.table["compute"].max())

    @property
    def groups(self) -> list[tuple[int, int, int]]:
        """``(n, B_problem, M)`` of every pilot allocation, M its last step (rounded up)."""
        g = self.table.groupby(["n", "B_problem"])["compute"].max()
        return [(int(n), int(bp), max(1, math.ceil(c / (n * bp) - 1e-9))) for (n, bp), c in g.items()]

    @property
    def fitted(self) -> pd.DataFrame:
        """The rows the fit compares: every evaluation after compute 0 when a base level anchors
        the curves (the compute-0 rows then only set the anchor), every row otherwise."""
        t = self.table
        return t[t["compute"] > 0] if self.base_level is not None else t


def read_pilots(df: pd.DataFrame, metric: str = "avg@1", training: pd.DataFrame | bool | None = None) -> Pilots:
    """Check a pilot table (:func:`isosim.analysis.runs.validate_runs`, plus: no missing
    values of the metric, values in [0, 1], a metric the surrogate computes, at least two
    evaluations after compute 0 for each allocation, and a way to estimate the noise) and
    estimate its anchor and noise. ``training``: rows with the training reward
    (:func:`read_training`), or True for the table's own ``train_reward`` column. Every problem
    is one :class:`IsosimInputError` line."""
    parse_metric(metric)
    if isinstance(df, pd.DataFrame) and metric in df.columns:
        raw = pd.to_numeric(df[metric], errors="coerce").to_numpy(float)
        bad = ~np.isfinite(raw)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise IsosimInputError(f"metric {metric!r} must hold a finite number on every row (row {row + 1}: "
                                   f"{shown(df[metric].iloc[row])})")
    d = validate_runs(df, metric)
    v = d[metric].to_numpy(float)
    if np.any((v < 0) | (v > 1)):
        row = int(np.flatnonzero((v < 0) | (v > 1))[0])
        raise IsosimInputError(f"metric {metric!r} must lie in [0, 1] (row {row + 1}: {v[row]:g})")
    t = (d[["run", "n", "B_problem", "compute"]].assign(value=v, run=d["run"].astype(str))
         .sort_values(["run", "compute"], kind="stable").reset_index(drop=True))
    for (n, bp), g in t.groupby(["n", "B_problem"]):
        if (g["compute"] > 0).sum() < 2:
            raise IsosimInputError(f"the pilots at n = {n}, B_problem = {bp} need at least two evaluations after "
                                   "compute 0 to show a curve")
    zero = t.loc[t["compute"] == 0, "value"]
    between, within = noise_between_seeds(t), noise_within_runs(t)
    sd = between if math.isfinite(between) else within
    if not math.isfinite(sd):
        raise IsosimInputError("cannot estimate the pilots' noise: give two runs (seeds) at one n, or three "
                               "evaluations after compute 0 in a run")
    if training is True:
        if "train_reward" not in df.columns:
            raise IsosimInputError(f"fitting the training reward needs a train_reward column; have {', '.join(map(str, df.columns))}")
        training = df
    train = None
    if training is not None:
        train = read_training(training, {(int(n), int(bp)) for n, bp in zip(t["n"], t["B_problem"])})
    return Pilots(metric, t, float(zero.mean()) if len(zero) else None, float(sd), between, within, train)


def noise_between_seeds(t: pd.DataFrame) -> float:
    """Pooled seed-to-seed standard deviation of runs sharing an allocation (NaN if none)."""
    num = den = 0.0
    for _, g in t[t["compute"] > 0].groupby(["n", "B_problem"]):
        runs = [r for _, r in g.groupby("run")]
        if len(runs) < 2:
            continue
        lo = max(float(r["compute"].min()) for r in runs)
        hi = min(float(r["compute"].max()) for r in runs)
        x = np.unique(g["compute"].to_numpy(float))
        x = x[(x >= lo) & (x <= hi)]
        if x.size == 0:
            continue
        ys = np.array([_interp(r, x) for r in runs])
        k = len(runs)
        num += float(ys.var(axis=0, ddof=1).sum()) * (k - 1)
        den += x.size * (k - 1)
    return math.sqrt(num / den) if den else math.nan


def noise_within_runs(t: pd.DataFrame) -> float:
    """Robust white-noise standard deviation from each run's local second differences (NaN if
    no run has three evaluations after compute 0)."""
    scaled = []
    for _, r in t[t["compute"] > 0].groupby("run"):
        r = r.groupby("compute", as_index=False)["value"].mean()
        if len(r) < 3:
            continue
        x, y = np.log(r["compute"].to_numpy(float)), r["value"].to_numpy(float)
        w = (x[2:] - x[1:-1]) / (x[2:] - x[:-2])
        res = y[1:-1] - (w * y[:-2] + (1 - w) * y[2:])
        scaled.append(res**2 / (1 + w**2 + (1 - w) ** 2))
    if not scaled:
        return math.nan
    return math.sqrt(float(np.median(np.concatenate(scaled))) / _CHI2_1_MEDIAN)


def _interp(run: pd.DataFrame, x: np.ndarray) -> np.ndarray:
    r = run.groupby("compute", as_index=False)["value"].mean()
    return np.interp(np.log(x), np.log(r["compute"].to_numpy(float)), r["value"].to_numpy(float))


#: bins of the training reward per doubling of compute
TRAIN_BINS_PER_DOUBLING = 2


def read_training(df: pd.DataFrame, allocations=None) -> pd.DataFrame:
    """The training reward of the pilots (a ``train_reward`` column: the mean reward of each
    logged step's batch, which every trainer logs) in bins of equal log compute.

    Each run's rows after compute 0 are grouped into :data:`TRAIN_BINS_PER_DOUBLING` bins per
    doubling of compute; a bin's point is the geometric mean of its compute and the mean of its
    rewards, with standard error ``sd_step / sqrt(count)``, ``sd_step`` the run's step-to-step
    noise (:func:`noise_within_runs` on its unbinned rewards; the pooled value of the other runs
    where a run has fewer than three rows). A batch's reward averages other problems each step,
    so its noise is far larger than a validation evaluation's and the bins carry it. Returns
    ``run, n, B_problem, compute, value, se`` sorted by run and compute. ``allocations``: the
    ``(n, B_problem)`` of the validation pilots; training rows of another allocation are an
    :class:`IsosimInputError`, as are rewards outside [0, 1], no finite reward, or an
    allocation with fewer than two bins."""
    if not isinstance(df, pd.DataFrame) or "train_reward" not in df.columns:
        raise IsosimInputError("the training rows need a train_reward column")
    d = validate_runs(df.assign(train_reward=pd.to_numeric(df["train_reward"], errors="coerce")))
    d = d[np.isfinite(d["train_reward"].to_numpy(float)) & (d["compute"] > 0)]
    if d.empty:
        raise IsosimInputError("the training rows hold no finite train_reward after compute 0")
    v = d["train_reward"].to_numpy(float)
    if np.any((v < 0) | (v > 1)):
        raise IsosimInputError(f"train_reward must lie in [0, 1] (found {v[(v < 0) | (v > 1)][0]:g})")
    d = d.assign(run=d["run"].astype(str))
    if allocations is not None:
        have = {(int(n), int(bp)) for n, bp in allocations}
        other = sorted({(int(n), int(bp)) for n, bp in zip(d["n"], d["B_problem"])} - have)
        if other:
            raise IsosimInputError(f"training rows at n = {other[0][0]}, B_problem = {other[0][1]} have no validation "
                                   "pilot at that allocation")
    per_run = {r: noise_within_runs(g[["run", "compute"]].assign(value=g["train_reward"]))
               for r, g in d.groupby("run")}
    known = [x for x in per_run.values() if math.isfinite(x)]
    if not known:
        raise IsosimInputError("cannot estimate the training reward's noise: give three or more training rows in a run")
    pooled = math.sqrt(float(np.mean(np.square(known))))
    rows = []
    for (run, n, bp), g in d.groupby(["run", "n", "B_problem"], sort=True):
        sd = per_run[run] if math.isfinite(per_run[run]) else pooled
        sd = max(sd, 1e-4)
        c = g["compute"].to_numpy(float)
        key = np.floor(np.log2(c) * TRAIN_BINS_PER_DOUBLING + 1e-9)
        for b in np.unique(key):
            sel = key == b
            rows.append((run, int(n), int(bp), float(np.exp(np.mean(np.log(c[sel])))),
                         float(g["train_reward"].to_numpy(float)[sel].mean()), sd / math.sqrt(int(sel.sum()))))
    out = pd.DataFrame(rows, columns=["run", "n", "B_problem", "compute", "value", "se"])
    for (n, bp), g in out.groupby(["n", "B_problem"]):
        if g["compute"].round(6).nunique() < 2:
            raise IsosimInputError(f"the training reward at n = {n}, B_problem = {bp} needs rows in at least two "
                                   "bins of compute (half a doubling each)")
    return out.sort_values(["run", "compute"], kind="stable").reset_index(drop=True)
