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
(:mod:`isosim.calibrate.pilots`): ``s(C) - s(0) + y0``.
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
    """Mean-field pilot curves for knob values (``values``), with a small population cache."""

    def __init__(self, pilots: Pilots, train: np.ndarray, val: np.ndarray, base: SimConfig,
                 knobs: tuple[K.Knob, ...], seed: int = 0):
        self.pilots, self.knobs, self.seed = pilots, knobs, seed
        self.train, self.val = np.asarray(train, float), np.asarray(val, float)
        self.base = base_config(base, self.train, self.val, pilots.metric)
        self.rows = pilots.fitted
        self.y = self.rows["value"].to_numpy(float)

    def config(self, values) -> SimConfig:
        return K.apply(self.base, values)

    def population(self, config: SimConfig) -> Population:
        return population_for(config, self.train, self.val, self.seed)

    def values(self, values) -> np.ndarray:
        """The surrogate's metric at every compared pilot row, for knob values ``values``."""
        cfg = self.config(values)
        pop = self.population(cfg)
        out = np.empty(len(self.rows))
        metric, y0 = self.pilots.metric, self.pilots.base_level
        for (n, bp, steps) in self.pilots.groups:
            alloc = {"n": n, "b_problem": bp, "steps": steps, "budget": 0.0}
            curve = mean_field(cfg.replace(allocation=alloc), pop, max_train=MAX_TRAIN, seed=self.seed).curve(metric)
            x = curve["compute_rollouts"].to_numpy(float)
            v = curve["value"].to_numpy(float)
            sel = np.flatnonzero((self.rows["n"] == n).to_numpy() & (self.rows["B_problem"] == bp).to_numpy())
            c = self.rows["compute"].to_numpy(float)[sel]
            pred = np.interp(np.log(np.maximum(c, 1.0)), np.log(np.maximum(x, 1.0)), v)
            pred[c <= 0] = v[0]
            out[sel] = pred if y0 is None else pred - v[0] + y0
        return out


def population_for(config: SimConfig, train: np.ndarray, val: np.ndarray, seed: int) -> Population:
    """The population of ``config``'s model with these base pass rates (cached: the learning
    paths' scales do not shape problems)."""
    model = replace(config.model, shared=1.0, local=0.0)
    return _population(model, np.asarray(train, float).tobytes(), np.asarray(val, float).tobytes(), seed)


@functools.lru_cache(maxsize=16)
def _population(model, train: bytes, val: bytes, seed: int) -> Population:
    return population_from_pass_rates(np.frombuffer(train), np.frombuffer(val), model=model, seed=seed)
