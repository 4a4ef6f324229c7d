"""Shared-strategy softmax: ``logits_i = L0_i + shared * (beta + z_i V) + local * u_i``.

``S`` global response strategies; strategy s solves problem i with probability
``q_s ~ Beta(generality_a, generality_b)`` (a few general strategies, many niche
ones). The base model's logits are ``L0_i = beta0 + z_i V0`` with a shared
preference ``beta0 ~ N(0, prior_scale^2)`` and a problem-specific part from the
problem's embedding ``z_i ~ N(0, I_rank)``, ``V0 ~ N(0, embed_scale^2 / rank)``.

Learning the shared ``beta`` and low-rank ``V`` transfers to unseen problems that
share correct strategies and interferes where they do not: pushing mass onto
popular strategies removes coverage of problems only rare strategies solve. The
per-problem offsets ``u_i`` memorise and do not transfer.
"""
from __future__ import annotations

import numpy as np

from ..config import ModelConfig
from . import PathScales, Problems


def make_world(cfg: ModelConfig, rng: np.random.Generator) -> dict:
    s, r = cfg.n_strategies, cfg.rank
    return {
        "generality": rng.beta(cfg.generality_a, cfg.generality_b, s),
        "beta0": rng.normal(0.0, cfg.prior_scale, s),
        "V0": rng.normal(0.0, cfg.embed_scale / np.sqrt(max(r, 1)), (r, s)),
    }


def draw(cfg: ModelConfig, world: dict, rng: np.random.Generator, size: int) -> Problems:
    s, r = cfg.n_strategies, cfg.rank
    z = rng.normal(size=(size, r))
    y = (rng.random((size, s)) < world["generality"][None, :]).astype(float)
    logits = world["beta0"][None, :] + z @ world["V0"]
    return Problems(logits, z, y)


def path_scales(cfg: ModelConfig) -> PathScales:
    return PathScales(beta=cfg.shared, v=cfg.shared, u=cfg.local)
