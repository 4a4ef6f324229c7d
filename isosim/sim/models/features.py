"""Feature-logistic model: ``z_i = b_i + shared * phi_i . w + local * u_i``.

``phi_i = sqrt(common) c + sqrt(1 - common) e_i`` with a unit common direction ``c``
and idiosyncratic ``e_i ~ N(0, I/dim)``, so ``phi_i . phi_j ~ common`` for i != j.
An update of the shared ``w`` from problem i moves problem j's logit by
``phi_i . phi_j``: ``common`` sets transfer, ``dim`` the capacity (the random
cross-talk, interference, shrinks as ``(1 - common) / sqrt(dim)``), ``local`` lets
each training problem memorise.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from .base import ModelSection, PathScales, Problems, knob_names, two_outcome

NAME = "features"


class Knobs(ModelSection, Protocol):
    """The knobs of the features model (fields of :class:`isosim.sim.config.ModelConfig`)."""

    dim: int
    common: float
    logit_mean: float
    logit_std: float


KNOBS = knob_names(Knobs)


def make_world(cfg: Knobs, rng: np.random.Generator) -> dict:
    c = rng.normal(size=cfg.dim)
    return {"common": c / np.linalg.norm(c)}


def draw(cfg: Knobs, world: dict, rng: np.random.Generator, size: int) -> Problems:
    b = rng.normal(cfg.logit_mean, cfg.logit_std, size)
    e = rng.normal(0.0, 1.0 / np.sqrt(cfg.dim), (size, cfg.dim))
    phi = np.sqrt(cfg.common) * world["common"][None, :] + np.sqrt(1.0 - cfg.common) * e
    return two_outcome(b, phi)


def path_scales(cfg: Knobs) -> PathScales:
    return PathScales(beta=0.0, v=cfg.shared, u=cfg.local, u_share=cfg.local_share)


def learn_mask(cfg: Knobs) -> np.ndarray:
    return np.array([1.0, 0.0])  # the correct response's logit learns, the reference 0 does not
