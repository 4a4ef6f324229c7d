"""Tabular model: ``z_i = b_i + u_i``, ``p_i = sigmoid(z_i)``, ``b_i ~ N(logit_mean, logit_std^2)``.

Every problem has its own parameter and nothing is shared: no transfer, no
interference. It is the theory's null model, in which sequential steps beat
parallel samples and the compute-optimal n stays small.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from .base import ModelSection, PathScales, Problems, knob_names, two_outcome

NAME = "tabular"


class Knobs(ModelSection, Protocol):
    """The knobs of the tabular model (fields of :class:`isosim.sim.config.ModelConfig`)."""

    logit_mean: float
    logit_std: float


KNOBS = knob_names(Knobs)


def make_world(cfg: Knobs, rng: np.random.Generator) -> dict:
    return {}


def draw(cfg: Knobs, world: dict, rng: np.random.Generator, size: int) -> Problems:
    z = rng.normal(cfg.logit_mean, cfg.logit_std, size)
    return two_outcome(z, np.zeros((size, 0)))


def path_scales(cfg: Knobs) -> PathScales:
    return PathScales(beta=0.0, v=0.0, u=1.0)


def learn_mask(cfg: Knobs) -> np.ndarray:
    return np.array([1.0, 0.0])  # the correct response's logit learns, the reference 0 does not
