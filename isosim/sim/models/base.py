"""What every surrogate model is made of: the knobs it reads, the problem arrays the kernel
reads, the scales of the learning paths, and the 2-outcome helper of the sigmoid models."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


class ModelSection(Protocol):
    """What every model reads of a config's model section
    (:class:`isosim.sim.config.ModelConfig`): its kind and its learning paths. A model declares
    the knobs it reads besides as a protocol of its own that extends this one (its ``Knobs``),
    whose annotations name them (:func:`knob_names`); the config's dataclass has every field, so
    it is each model's ``Knobs``."""

    kind: str
    shared: float
    local: float
    local_share: bool


def knob_names(knobs: type) -> tuple[str, ...]:
    """The knobs a model's ``Knobs`` protocol declares, in order, beside :class:`ModelSection`'s."""
    return tuple(knobs.__dict__.get("__annotations__", {}))


@dataclass(frozen=True)
class Problems:
    """Arrays describing a set of problems for the kernel (one row per problem).

    ``execution`` holds each problem's execution logit ``a_i``: a rollout that takes a
    correct response type succeeds with probability ``e_i = sigmoid(a_i)``, so the pass rate is
    ``p_i = e_i sum_s pi_is Y_is``. ``+inf`` (every problem of a model without execution
    noise) is ``e_i = 1``. No shared parameter moves ``a_i``: it is the share of a problem's
    difficulty that transfer cannot reach; only the per-problem memorisation path does.
    """

    base_logits: np.ndarray  # (N, S) L0
    features: np.ndarray  # (N, r) z_i (r may be 0)
    rewards: np.ndarray  # (N, S) float 0/1 Y
    execution: np.ndarray | None = None  # (N,) a_i; None: +inf for every problem

    def __post_init__(self) -> None:
        if self.execution is None:
            object.__setattr__(self, "execution", np.full(self.base_logits.shape[0], np.inf))

    def __len__(self) -> int:
        return self.base_logits.shape[0]

    @property
    def has_execution(self) -> bool:
        """Whether any problem's execution can fail (``e_i < 1``)."""
        return bool(np.isfinite(self.execution).any())

    def take(self, idx: np.ndarray) -> "Problems":
        return Problems(self.base_logits[idx], self.features[idx], self.rewards[idx], self.execution[idx])

    @staticmethod
    def concat(parts: list["Problems"]) -> "Problems":
        return Problems(
            np.concatenate([p.base_logits for p in parts]),
            np.concatenate([p.features for p in parts]),
            np.concatenate([p.rewards for p in parts]),
            np.concatenate([p.execution for p in parts]),
        )

    def base_pass_rates(self) -> np.ndarray:
        return execution_rates(self.execution) * pass_rates_of_logits(self.base_logits, self.rewards)

    def with_pass_rates(self, target: np.ndarray) -> "Problems":
        """Shift the logits of correct responses so the base pass rates equal ``target``.

        Adding delta to every correct logit maps the strategy pass rate q to
        ``q e^delta / (q e^delta + 1 - q)``, so ``delta = logit(q*) - logit(q)`` for the
        strategy pass rate ``q* = target / e_i``. Where the execution rate is below
        ``sqrt(target)``, it is raised to ``sqrt(target)`` first (then ``q* <= sqrt(target) < 1``).
        Problems with no correct response type keep pass rate 0.
        """
        target = np.clip(np.asarray(target, float), 1e-9, 1 - 1e-9)
        e = execution_rates(self.execution)
        execution = self.execution
        if self.has_execution:
            e = np.maximum(e, np.sqrt(target))
            execution = np.log(e) - np.log1p(-e)
        q_target = target / e
        solvable = self.rewards.max(axis=1) > 0
        log_odds = np.clip(log_odds_of_logits(self.base_logits, self.rewards), -700.0, 700.0)
        delta = np.where(solvable, np.log(q_target / (1 - q_target)) - log_odds, 0.0)
        logits = self.base_logits + delta[:, None] * self.rewards
        return Problems(logits, self.features, self.rewards, execution)


@dataclass(frozen=True)
class PathScales:
    """How strongly ``beta``, ``V`` and ``u`` act on the logits, and how the per-problem rows
    learn. ``u_share``: the rows are the problem's own part of one shared network, so a visit
    steps them with its share ``lr / K`` of the batch's update, K the batch's groups with signal
    (the optimiser normalises the step those groups make: a problem is memorised per visit at a
    speed that does not grow with the batch, and faster when few groups carry signal); otherwise
    with ``lr``, as independent learners (the tabular model, whose rows are the whole model,
    always)."""

    beta: float
    v: float
    u: float
    u_share: bool = False


def execution_rates(execution: np.ndarray) -> np.ndarray:
    """``e_i = sigmoid(a_i)`` (exactly 1 at ``a_i = +inf``)."""
    return 1.0 / (1.0 + np.exp(-np.asarray(execution, float)))


def pass_rates_of_logits(logits: np.ndarray, rewards: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    w = np.exp(z)
    return (w * rewards).sum(axis=1) / w.sum(axis=1)


def log_odds_of_logits(logits: np.ndarray, rewards: np.ndarray) -> np.ndarray:
    """``logit q_i = logsumexp(correct logits) - logsumexp(wrong logits)``, exact where ``q_i`` is
    within rounding of 0 or 1 (a peaked base policy); ``-inf`` with no correct response, ``+inf``
    with no wrong one."""
    correct = rewards > 0
    with np.errstate(invalid="ignore"):
        return (_logsumexp(np.where(correct, logits, -np.inf))
                - _logsumexp(np.where(correct, -np.inf, logits)))


def _logsumexp(x: np.ndarray) -> np.ndarray:
    """``log sum_j e^x_ij`` per row, shifted by the row's maximum (``-inf`` for a row of
    ``-inf``); NumPy's, so that building a population does not import ``scipy.special``."""
    top = x.max(axis=1)
    shift = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(x - shift[:, None]).sum(axis=1)) + shift


def two_outcome(z: np.ndarray, features: np.ndarray) -> Problems:
    """Problems of a 2-outcome model with base logit ``z_i`` (response 0 is correct)."""
    n = z.shape[0]
    logits = np.stack([z, np.zeros(n)], axis=1)
    rewards = np.tile(np.array([1.0, 0.0]), (n, 1))
    return Problems(logits, features, rewards)
