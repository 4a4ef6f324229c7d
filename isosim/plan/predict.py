"""Mean-field predictions over allocations: the curves of many ``(n, B_problem)``
(:func:`predict`), their values at given compute (:func:`curve_at`), the compute-optimal
allocation n*(C) of those curves (:func:`n_star`) and its scaling law (:func:`fit_n_star_law`).
"""
from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from ..analysis.n_star import n_star_raw
from ..errors import IsosimInputError
from ..experiments.executors import fork_context, fork_map
from ..sim.config import SimConfig
from ..sim.population import Population, build_population
from .meanfield import mean_field


def predict(base: SimConfig, allocations, budget: float, population: Population | None = None,
            threads: int = 1, **options) -> pd.DataFrame:
    """Mean-field curves of every ``(n, B_problem)`` in ``allocations``, each to ``budget``
    rollouts, as evaluations (one row per macro step and split; columns ``run, n,
    B_problem, split, step, compute`` and one per metric): the format of
    :func:`isosim.experiments.sweep.evaluations`, plus ``split``. ``threads`` > 1 integrates
    that many allocations at once: in forked worker processes where forking is safe
    (:func:`isosim.experiments.executors.fork_context`; the workers share no interpreter lock, so they run in parallel
    throughout), else in threads (the mean field's kernels release the lock, its Python steps
    do not). The result does not depend on it."""
    pop = population if population is not None else build_population(base.population, base.model)
    allocations = list(allocations)
    job = (base, float(budget), pop, options)
    if threads <= 1 or len(allocations) <= 1:
        return pd.concat([_curve(job, a) for a in allocations], ignore_index=True)
    # the longest runs (the smallest batches: most steps) first, so the workers finish together
    order = sorted(range(len(allocations)), key=lambda i: allocations[i][0] * allocations[i][1])
    todo = [allocations[i] for i in order]
    workers = min(threads, len(allocations))
    if fork_context() is None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as ex:
            done = list(ex.map(lambda a: _curve(job, a), todo))
    else:
        _warm(job)  # load the kernels here, once, so every forked worker starts with them
        done = fork_map(functools.partial(_curve, job), todo, workers)
    parts = dict(zip(order, done))
    return pd.concat([parts[i] for i in range(len(allocations))], ignore_index=True)


_WARM = False


def _curve(job, alloc) -> pd.DataFrame:
    base, budget, pop, options = job
    n, bp = alloc
    cfg = base.replace(allocation={"n": int(n), "b_problem": int(bp), "budget": budget, "steps": 0})
    wide = mean_field(cfg, pop, **options).wide.drop(columns="compute_tokens")
    wide.insert(0, "run", f"mf-n{n}-b{bp}")
    wide.insert(1, "n", int(n))
    wide.insert(2, "B_problem", int(bp))
    return wide.rename(columns={"compute_rollouts": "compute"})


def _warm(job) -> None:
    """Run a short mean field once per process, two steps past the warm-up (the policy-change
    bound starts after it): its kernels are then loaded (from Numba's cache, about 0.3 s) before
    any worker forks, instead of once in every worker. It uses n = 2 and B_problem = 1, which
    every training set allows."""
    global _WARM
    if not _WARM:
        base, _, pop, options = job
        _curve((base, 2.0 * (base.algo.warmup + 2), pop, options), (2, 1))
        _WARM = True


def curve_at(curves: pd.DataFrame, compute, metric: str, split: str = "val", hold: bool = False) -> pd.DataFrame:
    """Each run's ``metric`` at the given compute values, linear in log compute: one row per
    run, one column per compute value. Outside a run's range the value is NaN, except past its
    end with ``hold`` (a run that stops at C' < C is a valid plan for a budget C)."""
    c = np.atleast_1d(np.asarray(compute, float))
    d = curves[(curves["split"] == split) & (curves["compute"] > 0)]
    rows = {}
    for (run, n, bp), g in d.groupby(["run", "n", "B_problem"], sort=False):
        x, y = np.log(g["compute"].to_numpy(float)), g[metric].to_numpy(float)
        v = np.interp(np.log(c), x, y)
        ok = (np.log(c) >= x[0] - 1e-9) & ((np.log(c) <= x[-1] + 1e-9) | hold)
        rows[(run, n, bp)] = np.where(ok, v, np.nan)
    out = pd.DataFrame.from_dict(rows, orient="index", columns=list(c))
    out.index = pd.MultiIndex.from_tuples(out.index, names=["run", "n", "B_problem"])
    return out


def n_star(curves: pd.DataFrame, metric: str = "avg@4", grid=None, split: str = "val",
           points_per_decade: int = 10, hold: bool = False) -> pd.DataFrame:
    """The compute-optimal allocation of the mean-field curves on a log grid of compute:
    ``compute, value, n, B_problem, M``. The raw arg-max
    (:func:`isosim.analysis.n_star.n_star_raw`) over the :func:`curve_at` values: ties go to
    the smaller n, then the smaller B_problem; a curve competes from its first step on and,
    without ``hold``, up to its last; grid points no curve reaches are dropped.
    M = floor(C / (n B_problem)), or the run's last step with ``hold``."""
    from ..analysis.frontier import log_grid

    d = curves[(curves["split"] == split) & (curves["compute"] > 0)]
    if grid is None:
        grid = log_grid(float(d["compute"].min()), float(d["compute"].max()), points_per_decade)
    grid = np.asarray(grid, float)
    out = n_star_raw(curve_at(curves, grid, metric, split, hold), ["n", "B_problem"])
    steps = np.floor(out["compute"] / (out["n"] * out["B_problem"])).astype(int)
    if hold:
        last = d.groupby(["n", "B_problem"])["step"].max()
        steps = np.minimum(steps, [int(last[(n, bp)]) for n, bp in zip(out["n"], out["B_problem"])])
    out["M"] = steps
    return out


def fit_n_star_law(table: pd.DataFrame):
    """The sigmoid ``log2 n* = L / (1 + exp(-k (log10 C - log10 C0))) + b`` fitted to an
    :func:`n_star` table (:func:`isosim.analysis.fit.fit_scaling_law`); None when n* never changes."""
    from ..analysis.fit import fit_scaling_law

    if table["n"].nunique() < 2:
        return None
    try:
        return fit_scaling_law(np.log10(table["compute"]), np.log2(table["n"]))
    except IsosimInputError:
        return None
