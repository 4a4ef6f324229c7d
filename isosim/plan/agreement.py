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
    the raw mean-field curves (:func:`n_star`, the planner's arg-max); ``regret`` (``regret_raw``
    per budget for the raw curves' n*): the largest loss, on the
    simulation's own fitted curves, of running the mean field's n* instead of the
    simulation's. With a bootstrap (``agreement(..., n_boot=...)``) the table also has
    ``n_sim_low`` / ``n_sim_high``: the simulated n*'s percentile interval over resamples of
    the seeds within each n.
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
    def within_one_interval(self) -> float:
        """The share of budgets at which the mean field's n* is within one doubling of the
        simulated n*'s bootstrap interval ``[n_sim_low, n_sim_high]`` (NaN without one): a
        budget where the seeds cannot tell several n apart counts every one of them as the
        simulated n*."""
        return self.within_one_of_interval("n_mf")

    def within_one_of_interval(self, column: str = "n_mf") -> float:
        """:attr:`within_one_interval` for the n* in ``column`` (``n_mf_raw``: the raw curves')."""
        t = self.n_star
        if "n_sim_low" not in t.columns:
            return math.nan
        x = np.log2(t[column].to_numpy(float))
        lo, hi = np.log2(t["n_sim_low"].to_numpy(float)), np.log2(t["n_sim_high"].to_numpy(float))
        return float(((x >= lo - 1) & (x <= hi + 1)).mean())

    def within_one_or_close(self, column: str = "n_mf", tol: float = 0.003) -> float:
        """The share of budgets at which the n* in ``column`` is within one doubling of the
        simulated n*'s interval, or costs at most ``tol`` of the metric against the simulated
        n* on the simulation's fitted curves (its regret: ``regret`` for ``n_mf``,
        ``regret_raw`` for ``n_mf_raw``). NaN without an interval."""
        t = self.n_star
        if "n_sim_low" not in t.columns:
            return math.nan
        x = np.log2(t[column].to_numpy(float))
        lo, hi = np.log2(t["n_sim_low"].to_numpy(float)), np.log2(t["n_sim_high"].to_numpy(float))
        regret = t["regret" if column == "n_mf" else "regret_raw"].to_numpy(float)
        return float((((x >= lo - 1) & (x <= hi + 1)) | (regret <= tol)).mean())

    @property
    def resolved(self) -> float:
        """The share of budgets at which the simulated n*'s bootstrap interval is one n (NaN without one)."""
        t = self.n_star
        if "n_sim_low" not in t.columns:
            return math.nan
        return float((t["n_sim_low"] == t["n_sim_high"]).mean())

    @property
    def regret(self) -> float:
        return float(self.n_star["regret"].max())


def agreement(sim: pd.DataFrame, curves: pd.DataFrame, metric: str = "avg@4", bucket: float = 0.005,
              n_boot: int = 0, level: float = 0.9, seed: int = 0) -> Agreement:
    """Compare :func:`predict` curves with simulated evaluations (:func:`isosim.experiments.sweep.evaluations`).

    ``n_boot`` > 0 adds the simulated n*'s ``level`` percentile interval at each budget
    (:func:`sim_n_star_interval`)."""
    from ..analysis.frontier import compute_optimal

    d = sim.assign(value=sim[metric])[["run", "n", "B_problem", "compute", "value"]]
    ns = compute_optimal(d, group=("n",), bucket=bucket)
    fits, r0 = ns.attrs["fits"], ns.attrs["r0"]
    d = d[d["compute"] > 0]
    grid = ns["compute"].to_numpy(float)
    val = curves[curves["split"] == "val"]
    m = val.assign(value=val[metric])[["run", "n", "B_problem", "compute", "value"]]
    mf = compute_optimal(m, group=("n",), bucket=bucket, grid=grid, slack_decades=0.0)
    raw = n_star(curves, metric, grid=grid)
    table = ns[["compute", "n", "value"]].rename(columns={"n": "n_sim", "value": "sim"})
    table = table.merge(mf[["compute", "n"]].rename(columns={"n": "n_mf"}), on="compute")
    table = table.merge(raw[["compute", "n"]].rename(columns={"n": "n_mf_raw"}), on="compute")
    if n_boot > 0:
        lo, hi = sim_n_star_interval(d, grid, fits, bucket, n_boot, level, seed, r0)
        point = table["n_sim"].to_numpy(float)
        at = table["compute"].to_numpy(float)
        table["n_sim_low"] = np.fmin(pd.Series(lo, index=grid).reindex(at).to_numpy(float), point)
        table["n_sim_high"] = np.fmax(pd.Series(hi, index=grid).reindex(at).to_numpy(float), point)
    for col, mf_col in (("regret", "n_mf"), ("regret_raw", "n_mf_raw")):
        table[col] = [float(fits[(s,)].predict(c) - fits[(m_,)].predict(c)) if (m_,) in fits else math.nan
                      for c, s, m_ in zip(table["compute"], table["n_sim"], table[mf_col])]
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


def sim_n_star_interval(d: pd.DataFrame, grid: np.ndarray, fits, bucket: float, n_boot: int,
                        level: float = 0.9, seed: int = 0, r0=None) -> tuple[np.ndarray, np.ndarray]:
    """The ``level`` percentile interval of the simulated n* at each compute of ``grid``:
    :func:`isosim.analysis.fit.bootstrap_fit` resamples whole runs (seeds) with replacement
    within each n and refits the per-n curves (started from the all-seed ``fits``) and their
    arg-max on the same grid; each end of the interval is an n some resample picked. ``d``:
    evaluations with run, n, compute and value columns; ``r0``: each n's value before training,
    which its curves start from. NaN where fewer than two resamples reach a budget."""
    from ..analysis.fit import bootstrap_fit
    from ..analysis.frontier import compute_optimal

    def refit(r: pd.DataFrame) -> dict[str, float]:
        t = compute_optimal(r, group=("n",), bucket=bucket, grid=grid, starts=fits, r0=r0)
        got = t.set_index("compute")["n"].reindex(grid).to_numpy(float)
        return {str(i): float(np.log2(v)) for i, v in enumerate(got)}

    boot = bootstrap_fit(d, refit, unit="run", strata=("n",), mode="runs", n_boot=n_boot, seed=seed,
                         level=level, discrete=True)
    lo = np.array([2.0 ** boot.ci.get(str(i), (math.nan, math.nan))[0] for i in range(len(grid))])
    hi = np.array([2.0 ** boot.ci.get(str(i), (math.nan, math.nan))[1] for i in range(len(grid))])
    return lo, hi
