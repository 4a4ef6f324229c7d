"""The surrogate's side of a calibration: its population for the user's pass rates and its
mean-field curves at the pilots' allocations, for any values of the knobs.

For knob values theta the surrogate is ``knobs.apply(base, theta)``; its population has the
user's base pass rates (:func:`isosim.sim.population.population_from_pass_rates`, data seed
``seed``; validation problems with the given validation pass rates, or up to 300 drawn from
the training ones), rebuilt only when a knob that shapes the problems changes. The
prediction at a pilot evaluation ``(n, B_problem, C)`` is the mean-field curve
(:func:`isosim.plan.meanfield.mean_field`) of that allocation, run to the pilots' last step
at that allocation, interpolated linearly in log compute at C (at compute 0 it is the base
value), and anchored on the pilots' base level when they have one
(:mod:`isosim.calibrate.pilots`): ``s(C) - s(0) + y0``. Where the pilots logged their training
reward, the surrogate's training reward at a bin's compute is the same run's mean avg@1 over
the training problems (a batch draws them uniformly, so its mean reward has that expectation),
on the pass-rate file's own level (no anchor: the file holds the training problems' pass rates).
"""
from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from ..plan.meanfield import mean_field
from ..sim.config import SimConfig
from ..sim.metrics import parse_metric
from ..sim.population import Population, population_from_pass_rates
from . import knobs as K
from .pilots import Pilots

#: training problems the mean field averages over, and validation problems it scores (as the planner)
MAX_TRAIN, MAX_VAL = 3000, 300


def validation_rates(train: np.ndarray, val: np.ndarray | None, seed: int) -> np.ndarray:
    """The validation pass rates: ``val`` if given, else up to :data:`MAX_VAL` of the training
    ones drawn without replacement (data seed ``seed``)."""
    if val is not None:
        return np.asarray(val, float)
    rng = np.random.default_rng(seed)
    return train if len(train) <= MAX_VAL else rng.choice(train, MAX_VAL, replace=False)


def base_config(base: SimConfig, train: np.ndarray, val: np.ndarray, metric: str) -> SimConfig:
    """``base`` sized to the user's problems and evaluated at k = 1, 4 and the metric's k."""
    ks = tuple(sorted({1, 4, parse_metric(metric)[1]}))
    return base.replace(population={"train_size": len(train), "val_size": len(val)},
                        eval={"ks": ks, "n_evals": 1, "at_steps": ()})


class Surrogate:
    """Mean-field pilot curves for knob values (``values``), with a small population cache.

    The compared points are the pilots' validation evaluations (``rows``) followed by their
    binned training reward (``train_rows``, when the pilots have one): ``y`` holds their
    values, ``weights`` one over their noise (the validation noise sd; each bin's standard
    error), so that ``(values - y) * weights`` are residuals in units of their own noise, and
    ``runs`` names the run of each point (training points apart from validation ones)."""

    def __init__(self, pilots: Pilots, train: np.ndarray, val: np.ndarray, base: SimConfig,
                 knobs: tuple[K.Knob, ...], seed: int = 0):
        self.pilots, self.knobs, self.seed = pilots, knobs, seed
        self.train, self.val = np.asarray(train, float), np.asarray(val, float)
        self.base = base_config(base, self.train, self.val, pilots.metric)
        self.rows = pilots.fitted
        self.train_rows = pilots.train
        self.n_val = len(self.rows)
        tr = self.train_rows
        noise = max(pilots.noise_sd, 1e-6)
        self.y = np.concatenate([self.rows["value"].to_numpy(float), [] if tr is None else tr["value"].to_numpy(float)])
        self.weights = np.concatenate([np.full(self.n_val, 1.0 / noise),
                                       [] if tr is None else 1.0 / tr["se"].to_numpy(float)])
        self.runs = np.concatenate([self.rows["run"].astype(str).to_numpy(),
                                    [] if tr is None else ("train:" + tr["run"].astype(str)).to_numpy()])

    def config(self, values) -> SimConfig:
        return K.apply(self.base, values)

    def population(self, config: SimConfig) -> Population:
        return population_for(config, self.train, self.val, self.seed)

    def values(self, values) -> np.ndarray:
        """The surrogate at every compared point, for knob values ``values``: the pilots' metric
        on the validation problems at each evaluation, then the training reward (the mean
        avg@1 of the training problems, what a step's batch averages in expectation) at each
        bin of the training reward."""
        cfg = self.config(values)
        pop = self.population(cfg)
        out = np.empty(self.y.size)
        metric, y0 = self.pilots.metric, self.pilots.base_level
        tr = self.train_rows
        for (n, bp, steps) in self.pilots.groups:
            alloc = {"n": n, "b_problem": bp, "steps": steps, "budget": 0.0}
            trace = mean_field(cfg.replace(allocation=alloc), pop, max_train=MAX_TRAIN, seed=self.seed)
            curve = trace.curve(metric)
            sel = _at_allocation(self.rows, n, bp)
            c = self.rows["compute"].to_numpy(float)[sel]
            pred, v0 = _in_log_compute(curve, c), float(curve["value"].iloc[0])
            pred[c <= 0] = v0
            out[sel] = pred if y0 is None else pred - v0 + y0
            if tr is not None:
                sel = _at_allocation(tr, n, bp)
                if sel.size:
                    out[self.n_val + sel] = _in_log_compute(trace.curve("avg@1", split="train"),
                                                            tr["compute"].to_numpy(float)[sel])
        return out


def _at_allocation(rows, n: int, bp: int) -> np.ndarray:
    """Indices of the rows at allocation ``(n, B_problem)``."""
    return np.flatnonzero((rows["n"] == n).to_numpy() & (rows["B_problem"] == bp).to_numpy())


def _in_log_compute(curve, compute: np.ndarray) -> np.ndarray:
    """A mean-field curve's values at ``compute`` rollouts, linear in log compute."""
    x = np.log(np.maximum(curve["compute_rollouts"].to_numpy(float), 1.0))
    return np.interp(np.log(np.maximum(compute, 1.0)), x, curve["value"].to_numpy(float))


def population_for(config: SimConfig, train: np.ndarray, val: np.ndarray, seed: int) -> Population:
    """The population of ``config``'s model with these base pass rates (cached: the learning
    paths' scales do not shape problems)."""
    model = replace(config.model, shared=1.0, local=0.0)
    return _population(model, np.asarray(train, float).tobytes(), np.asarray(val, float).tobytes(), seed)


@functools.lru_cache(maxsize=16)
def _population(model, train: bytes, val: bytes, seed: int) -> Population:
    return population_from_pass_rates(np.frombuffer(train), np.frombuffer(val), model=model, seed=seed)
