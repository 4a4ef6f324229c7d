"""The registry of group-relative advantage estimators.

Every estimator here scores a rollout with reward ``r`` in {0, 1} in a group of ``n``
rollouts of which ``c`` are correct, and its advantages sum to zero over the group, so a
group's logit gradient is ``(1/n) sum_s c_s A(Y_s, c) e_s`` (see :mod:`isosim.sim.kernels`).
An estimator is one decorated function giving ``A+(c)`` and ``A-(c)``, the advantage of a
correct and of a wrong rollout for ``c = 0..n``; the registry gives it a name, the integer
code the Numba kernel dispatches on, the name :mod:`isosim.theory` uses for it, and the
names other trainers give it:

=========  ===========================================  ========  ======================================
name       advantage of a rollout with reward r         theory    aliases (TRL / verl / common)
=========  ===========================================  ========  ======================================
grpo       ``(r - c/n) / (sqrt(c/n (1 - c/n)) + eps)``  ``std``   ``scale_rewards="group"`` (or True),
                                                                  ``norm_adv_by_std_in_grpo=True``
drgrpo     ``r - c/n``                                  ``mean``  ``scale_rewards="none"`` (or False),
                                                                  ``norm_adv_by_std_in_grpo=False``,
                                                                  ``scale_rewards="batch"`` (approximate)
rloo       ``r - (c - r) / (n - 1)``                    ``rloo``  ``leave-one-out``
=========  ===========================================  ========  ======================================

TRL's ``scale_rewards="batch"`` divides by one standard deviation for the whole batch: a
single positive number per step, which Adam's scale invariance removes, so the surrogate
runs it as ``drgrpo``. The group std of ``grpo`` is the population std (no Bessel
correction), as in the kernel and in :mod:`isosim.theory`.

Adding an estimator: one decorated function here, one branch in the kernel's
``advantage`` (:mod:`isosim.sim.kernels`) and one in the NumPy twin
(:mod:`isosim.sim.twin`, written independently on purpose so that the twin test checks
the kernel); the config, the command line, the mean field and the theory's name lookup
follow from the registry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import IsosimInputError

Table = Callable[[int, float], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Advantage:
    """One registered estimator.

    ``code``: the kernel's integer for it; ``min_n``: the smallest group it is defined for;
    ``theory``: its name in :mod:`isosim.theory` (``None`` where the theory has no closed form); ``aliases``: other names it answers to;
    ``table(n, std_eps)``: ``(A+(c), A-(c))`` for c = 0..n.
    """

    name: str
    code: int
    formula: str
    min_n: int
    theory: str | None
    aliases: tuple[str, ...]
    table: Table


ADVANTAGES: dict[str, Advantage] = {}


def register(name: str, formula: str, theory: str | None, aliases: tuple[str, ...] = (), min_n: int = 1):
    """Decorator: add ``table`` to the registry under ``name`` with the next kernel code."""

    def deco(table: Table) -> Table:
        if name in ADVANTAGES:
            raise ValueError(f"advantage {name!r} is registered twice")
        ADVANTAGES[name] = Advantage(name, len(ADVANTAGES), formula, min_n, theory, tuple(aliases), table)
        return table

    return deco


@register("grpo", "(r - c/n) / (sqrt(c/n (1 - c/n)) + std_eps)", theory="std",
          aliases=("std", "group", "scale_rewards=group", "scale_rewards=true", "norm_adv_by_std_in_grpo=true"))
def _grpo(n: int, std_eps: float) -> tuple[np.ndarray, np.ndarray]:
    rbar = np.arange(n + 1, dtype=float) / n
    sd = np.sqrt(rbar * (1.0 - rbar)) + std_eps
    safe = np.where(sd > 0, sd, 1.0)
    return np.where(sd > 0, (1.0 - rbar) / safe, 0.0), np.where(sd > 0, -rbar / safe, 0.0)


@register("drgrpo", "r - c/n", theory="mean",
          aliases=("mean", "none", "dr_grpo", "scale_rewards=none", "scale_rewards=false", "scale_rewards=batch",
                   "norm_adv_by_std_in_grpo=false"))
def _drgrpo(n: int, std_eps: float) -> tuple[np.ndarray, np.ndarray]:
    rbar = np.arange(n + 1, dtype=float) / n
    return 1.0 - rbar, -rbar


@register("rloo", "r - (c - r) / (n - 1)", theory="rloo", aliases=("leave-one-out", "leave_one_out"), min_n=2)
def _rloo(n: int, std_eps: float) -> tuple[np.ndarray, np.ndarray]:
    if n < 2:
        return np.zeros(n + 1), np.zeros(n + 1)
    c = np.arange(n + 1, dtype=float)
    return (n - c) / (n - 1), -c / (n - 1)


NAMES: tuple[str, ...] = tuple(ADVANTAGES)
_ALIASES = {alias: adv for adv in ADVANTAGES.values() for alias in (adv.name, *adv.aliases)}


def get(name: str) -> Advantage:
    """The estimator called ``name`` (a registered name or an alias, case-insensitive)."""
    key = str(name).strip().lower()
    if key not in _ALIASES:
        raise IsosimInputError(f"unknown advantage {name!r}: choose from {', '.join(NAMES)} "
                               f"(or an alias: {', '.join(a for a in _ALIASES if a not in NAMES)})")
    return _ALIASES[key]


def from_trl(scale_rewards: str | bool) -> Advantage:
    """The estimator TRL's ``GRPOConfig(scale_rewards=...)`` computes (``"batch"`` approximately)."""
    return get(f"scale_rewards={str(scale_rewards).lower()}")


def from_verl(norm_adv_by_std_in_grpo: bool) -> Advantage:
    """The estimator verl's ``algorithm.norm_adv_by_std_in_grpo`` selects."""
    return get(f"norm_adv_by_std_in_grpo={str(bool(norm_adv_by_std_in_grpo)).lower()}")


def group_table(n: int, name: str, std_eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``(A+(c), A-(c))`` for c = 0..n of the estimator ``name``."""
    return get(name).table(int(n), float(std_eps))
