"""Surrogate policies: one interface, a registry of generators, one kernel.

Every model is a softmax policy over ``S`` response types per problem,

    logits_i = L0_i + beta_scale * beta + v_scale * z_i V + u_scale * u_i,

with a 0/1 reward ``Y[i, s]`` per response type, so the pass rate is
``p_i = sum_s softmax(logits_i)_s Y[i, s]``. The learned parameters ``beta`` (S),
``V`` (rank x S) and ``u`` (one row per training problem) start at zero, so the
reference policy is ``softmax(L0_i)``. Only columns with ``learn_mask[s] = 1`` learn:
a 2-outcome model (tabular, features) has logits ``[z_i, 0]`` and mask ``[1, 0]``,
which is exactly ``p_i = sigmoid(z_i)``.

A model is one module that declares

* ``NAME``: the value of ``--model`` / ``ModelConfig.kind``;
* ``Knobs``: a protocol of the :class:`~isosim.sim.config.ModelConfig` fields it reads besides
  those of :class:`~isosim.sim.models.base.ModelSection` (``kind``, and ``shared``, ``local``
  and ``local_share``, which every model reads through ``path_scales``), and ``KNOBS``, their
  names (:func:`~isosim.sim.models.base.knob_names`);
* ``make_world(cfg, rng)``: what all its problems share;
* ``draw(cfg, world, rng, size) -> Problems``: fresh problems of the generator;
* ``path_scales(cfg) -> PathScales``: how strongly ``beta``, ``V`` and ``u`` act;
* ``learn_mask(cfg)``: which response types' logits learn;

and one line below registers it. The populations in :mod:`isosim.sim.population` are made
from these functions, the kernels read only the arrays they return.
"""
from __future__ import annotations

from types import ModuleType

import numpy as np

from . import features, strategies, tabular
from .base import ModelSection, PathScales, Problems, pass_rates_of_logits, two_outcome

#: the registered models by name; adding one is a new module and one entry here
MODELS: dict[str, ModuleType] = {m.NAME: m for m in (tabular, strategies, features)}

__all__ = ["MODELS", "ModelSection", "PathScales", "Problems", "learn_mask", "model_module", "pass_rates_of_logits",
           "two_outcome"]


def model_module(cfg: ModelSection) -> ModuleType:
    """The module of the model ``cfg.kind``."""
    return MODELS[cfg.kind]


def learn_mask(cfg: ModelSection) -> np.ndarray:
    """1.0 for the response types whose logits learn, 0.0 for the others."""
    return np.asarray(model_module(cfg).learn_mask(cfg), dtype=float)
