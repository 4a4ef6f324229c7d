"""How well the mean field agrees with the simulator: curve errors against a simulated Q1
sweep and n*(C) from both (:func:`agreement`, :class:`Agreement`; docs/planner.md)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .predict import curve_at, n_star


@dataclass(frozen=True)
class Agreement:
    """How well mean-field curves match a simulated Q1 sweep on one metric.

    ``curve_rmse`` / ``curve_max``: mean-field minus the seed mean of the simulated runs,
    over every n and every grid compute inside the runs' range; ``seed_sd``: the pooled
    seed-to-seed standard deviation at the same points (NaN with one seed). ``n_star``:
    per grid compute, ``n_sim`` and ``n_mf`` from the same pipeline
    (:func:`isosim.analysis.frontier.compute_optimal`, ScaleRL curve per n) and ``n_mf_raw`` from
    the raw mean-field curves (:func:`n_star`); ``regret``: the largest loss, on the
    simulation's own fitted curves, of running the mean field's n* instead of the
    simulation's.
    """

    metric: str
    curve_rmse: float
    curve_max: float
    seed_sd: float
    n_star: pd.DataFrame

    @property
    def max_dlog2(self) -> float:
        return float(np.abs(np.log2(self.n_star["n_mf"]) - np.log2(self.n_star["n_sim"])).max())

    @property
    def within_one(self) -> float:
        return float((np.abs(np.log2(self.n_star["n_mf"]) - np.log2(self.n_star["n_sim"])) <= 1).mean())

    @property
    def regret(self) -> float:
        return float(self.n_star["regret"].max())


def agreement(sim: pd.DataFrame, curves: pd.DataFrame, metric: str = "avg@4", bucket: float = 0.005) -> Agreement:
    """Compare :func:`predict` curves with simulated evaluations (:func:`isosim.experiments.sweep.evaluations`)."""
    from ..analysis.frontier import compute_optimal, fit_groups, group_ranges, record_breaking

    d = sim.assign(value=sim[metric])[["run", "n", "B_problem", "compute", "value"]]
    d = d[d["compute"] > 0]
    ns = compute_optimal(d, group=("n",), bucket=bucket)
    grid = ns["compute"].to_numpy(float)
    val = curves[curves["split"] == "val"]
    m = val.assign(value=val[metric])[["run", "n", "B_problem", "compute", "value"]]
    mf = compute_optimal(m[m["compute"] > 0], group=("n",), bucket=bucket, grid=grid, slack_decades=0.0)
    raw = n_star(curves, metric, grid=grid)
    fits = fit_groups(record_breaking(d, bucket=bucket), ("n",), ranges=group_ranges(d))
    table = ns[["compute", "n", "value"]].rename(columns={"n": "n_sim", "value": "sim"})
    table = table.merge(mf[["compute", "n"]].rename(columns={"n": "n_mf"}), on="compute")
    table = table.merge(raw[["compute", "n"]].rename(columns={"n": "n_mf_raw"}), on="compute")
    table["regret"] = [float(fits[(s,)].predict(c) - fits[(m_,)].predict(c)) if (m_,) in fits else math.nan
                       for c, s, m_ in zip(table["compute"], table["n_sim"], table["n_mf"])]
    errs, sds = [], []
    at = curve_at(curves, grid, metric)
    for n, g in d.groupby("n"):
        if n not in at.index.get_level_values("n"):
            continue
        runs = [np.interp(np.log(grid), np.log(r["compute"]), r["value"], left=np.nan, right=np.nan)
                for _, r in g.sort_values("compute").groupby("run")]
        runs = np.array(runs)
        pred = at.xs(n, level="n").to_numpy(float)[0]
        ok = np.isfinite(runs).all(axis=0) & np.isfinite(pred)
        errs.append(pred[ok] - runs[:, ok].mean(axis=0))
        if len(runs) > 1:
            sds.append(runs[:, ok].std(axis=0, ddof=1))
    e = np.concatenate(errs)
    sd = float(np.sqrt(np.mean(np.concatenate(sds) ** 2))) if sds else math.nan
    return Agreement(metric, float(np.sqrt(np.mean(e**2))), float(np.abs(e).max()), sd, table)
