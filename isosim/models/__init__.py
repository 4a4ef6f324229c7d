"""Surrogate policies: one interface, three generators, one kernel.

Every model is a softmax policy over ``S`` response types per problem,

    logits_i = L0_i + beta_scale * beta + v_scale * z_i V + u_scale * u_i,

with a 0/1 reward ``Y[i, s]`` per response type, so the pass rate is
``p_i = sum_s softmax(logits_i)_s Y[i, s]``. The learned parameters ``beta`` (S),
``V`` (rank x S) and ``u`` (one row per training problem) start at zero, so the
reference policy is ``softmax(L0_i)``. Only columns with ``learn_mask[s] = 1`` learn:
a 2-outcome model (tabular, features) has logits ``[z_i, 0]`` and mask ``[1, 0]``,
which is exactly ``p_i = sigmoid(z_i)``.

A model module provides ``make_world(cfg, rng)`` (what all problems share) and
``draw(cfg, world, rng, size) -> Problems`` (fresh problems of the generator), and
``path_scales(cfg)``. The populations in :mod:`isosim.population` are made from them.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np

from ..config import ModelConfig


@dataclass(frozen=True)
class Problems:
    """Arrays describing a set of problems for the kernel (one row per problem)."""

    base_logits: np.ndarray  # (N, S) L0
    features: np.ndarray  # (N, r) z_i (r may be 0)
    rewards: np.ndarray  # (N, S) float 0/1 Y

    def __len__(self) -> int:
        return self.base_logits.shape[0]

    def take(self, idx: np.ndarray) -> "Problems":
        return Problems(self.base_logits[idx], self.features[idx], self.rewards[idx])

    @staticmethod
    def concat(parts: list["Problems"]) -> "Problems":
        return Problems(
            np.concatenate([p.base_logits for p in parts]),
            np.concatenate([p.features for p in parts]),
            np.concatenate([p.rewards for p in parts]),
        )

    def base_pass_rates(self) -> np.ndarray:
        return pass_rates_of_logits(self.base_logits, self.rewards)

    def with_pass_rates(self, target: np.ndarray) -> "Problems":
        """Shift the logits of correct responses so the base pass rates equal ``target``.

        Adding delta to every correct logit maps pass rate p to
        ``p e^delta / (p e^delta + 1 - p)``, so ``delta = logit(target) - logit(p)``.
        Problems with no correct response type keep pass rate 0.
        """
        target = np.clip(np.asarray(target, float), 1e-9, 1 - 1e-9)
        p = np.clip(self.base_pass_rates(), 1e-300, 1 - 1e-16)
        solvable = self.rewards.max(axis=1) > 0
        delta = np.where(solvable, np.log(target / (1 - target)) - np.log(p / (1 - p)), 0.0)
        logits = self.base_logits + delta[:, None] * self.rewards
        return Problems(logits, self.features, self.rewards)


@dataclass(frozen=True)
class PathScales:
    beta: float
    v: float
    u: float


def pass_rates_of_logits(logits: np.ndarray, rewards: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    w = np.exp(z)
    return (w * rewards).sum(axis=1) / w.sum(axis=1)


def model_module(cfg: ModelConfig) -> ModuleType:
    from . import features, strategies, tabular

    return {"tabular": tabular, "strategies": strategies, "features": features}[cfg.kind]


def learn_mask(cfg: ModelConfig) -> np.ndarray:
    if cfg.kind == "strategies":
        return np.ones(cfg.n_strategies)
    return np.array([1.0, 0.0])


def two_outcome(z: np.ndarray, features: np.ndarray) -> Problems:
    """Problems of a 2-outcome model with base logit ``z_i`` (response 0 is correct)."""
    n = z.shape[0]
    logits = np.stack([z, np.zeros(n)], axis=1)
    rewards = np.tile(np.array([1.0, 0.0]), (n, 1))
    return Problems(logits, features, rewards)
