"""What every surrogate model is made of: the problem arrays the kernel reads, the scales of
the learning paths, and the 2-outcome helper of the sigmoid models."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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



def two_outcome(z: np.ndarray, features: np.ndarray) -> Problems:
    """Problems of a 2-outcome model with base logit ``z_i`` (response 0 is correct)."""
    n = z.shape[0]
    logits = np.stack([z, np.zeros(n)], axis=1)
    rewards = np.tile(np.array([1.0, 0.0]), (n, 1))
    return Problems(logits, features, rewards)
