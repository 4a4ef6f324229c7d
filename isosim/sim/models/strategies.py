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

Confidence: with ``confidence_floor < 1`` the base logits of problem i are scaled by
``kappa_i`` (:func:`confidence`): the base model is less sure where it is wrong. A hard
problem is then one the base policy spreads over strategies that mostly fail, not one it is
certain of a wrong answer on, so its right strategies stay within reach.

Execution: with ``execution_a > 0`` a rollout that takes a correct strategy still fails
with probability ``1 - e_i``, ``e_i ~ Beta(execution_a, execution_b)`` drawn per problem
and independent of everything else (slips in carrying the strategy out on this problem).
The pass rate is ``p_i = e_i sum_s pi_is Y_is``: shared learning can at best put all mass
on correct strategies, so held-out problems stay below ``e_i``; the memorisation path
(scale ``local``) raises ``logit e_i`` of training problems only.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from .base import ModelSection, PathScales, Problems, knob_names, pass_rates_of_logits

NAME = "strategies"


class Knobs(ModelSection, Protocol):
    """The knobs of the strategies model (fields of :class:`isosim.sim.config.ModelConfig`)."""

    n_strategies: int
    rank: int
    generality_a: float
    generality_b: float
    prior_scale: float
    embed_scale: float
    skill_link: float
    execution_a: float
    execution_b: float
    confidence_floor: float
    confidence_knee: float
    world_draw: str


KNOBS = knob_names(Knobs)


def make_world(cfg: Knobs, rng: np.random.Generator) -> dict:
    s, r = cfg.n_strategies, cfg.rank
    world = {
        "generality": rng.beta(cfg.generality_a, cfg.generality_b, s),
        "beta0": rng.normal(0.0, cfg.prior_scale, s),
        "V0": rng.normal(0.0, cfg.embed_scale / np.sqrt(max(r, 1)), (r, s)),
    }
    if cfg.skill_link > 0 and r > 0:
        w = rng.normal(size=(r, s))
        world["W"] = w / np.linalg.norm(w, axis=0, keepdims=True)  # unit columns: (z W)_s ~ N(0, 1)
    if cfg.world_draw == "stratified":
        world["beta0"], world["generality"] = stratified_preferences(cfg, rng)
    return world


#: the golden ratio's fractional part: ``frac(k phi)``, k = 1, 2, ..., spreads any run of consecutive
#: k evenly over [0, 1) (Weyl's low-discrepancy sequence)
_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0


def stratified_preferences(cfg: Knobs, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(beta0, q)`` of a stratified world, the rest of the world drawn as in a random one.

    ``beta0`` takes the values ``prior_scale * Phi^-1((k + 1/2) / S)``, k = 0 ... S-1, in a random
    order over the strategies. The strategy the base policy ranks j-th (j = 0: the largest
    ``beta0``) gets the generality ``F^-1((m_j + 1/2) / S)``, ``F`` the ``Beta(generality_a,
    generality_b)`` distribution and ``m_j`` the rank of ``frac((j + 1) phi)`` among j = 0 ... S-1:
    any few consecutive preference ranks get generalities spread over the whole distribution. In a
    random world the few favourites that the base policy's mass sits on draw their generalities
    independently, and from one world to the next the hard band's levels move with them by more
    than they are held to; here the favourites' generalities are the same in every world.
    """
    from statistics import NormalDist

    from scipy.special import betaincinv

    s = cfg.n_strategies
    u = (np.arange(s) + 0.5) / s
    normal = NormalDist().inv_cdf
    beta0 = cfg.prior_scale * np.array([normal(x) for x in u])[rng.permutation(s)]
    order = np.argsort(np.argsort(-beta0, kind="stable"), kind="stable")  # preference rank of each strategy
    weyl = np.argsort(np.argsort(np.mod(np.arange(1, s + 1) * _GOLDEN, 1.0), kind="stable"), kind="stable")
    q = betaincinv(cfg.generality_a, cfg.generality_b, u)[weyl][order]
    return beta0, q


def solves(cfg: Knobs, world: dict, rng: np.random.Generator, z: np.ndarray) -> np.ndarray:
    """``Y[i, s] = 1`` with probability ``q_s`` for every problem.

    With ``skill_link`` rho > 0, ``Y[i, s] = 1{sqrt(rho) (z_i W)_s + sqrt(1 - rho) e_is >
    Phi^-1(1 - q_s)}``: the same marginal ``q_s``, but which strategies solve a problem is
    partly predictable from its embedding, so what the shared ``V`` learns on training
    problems can transfer to new ones (skills, not only sharpening of the base policy).
    """
    q = world["generality"][None, :]
    if "W" not in world:
        return (rng.random((z.shape[0], cfg.n_strategies)) < q).astype(float)
    from statistics import NormalDist

    rho = cfg.skill_link
    score = np.sqrt(rho) * (z @ world["W"]) + np.sqrt(1.0 - rho) * rng.normal(size=(z.shape[0], cfg.n_strategies))
    # the standard normal quantile of 1 - q (the standard library's: no scipy.special import in a plan)
    quantile = NormalDist().inv_cdf
    threshold = np.array([quantile(1.0 - x) for x in q.ravel()]).reshape(q.shape)
    return (score > threshold).astype(float)


def confidence(cfg: Knobs, q: np.ndarray) -> np.ndarray:
    """``kappa_i = floor + (1 - floor) (1 - exp(-q_i / knee))``: the inverse temperature of problem
    i's base policy, from ``q_i``, the mass its unscaled logits put on correct strategies.

    A base model is calibrated: where it rarely picks a right strategy it is also unsure, its
    logits flattened towards uniform (``kappa_i -> floor`` as ``q_i -> 0``), so a hard problem's
    right strategies sit a few nats below its favourites instead of tens of nats, within reach of
    a first success at large n and of what transfer teaches. Where it often picks one
    (``q_i >> knee``), ``kappa_i`` is 1 and the policy is unchanged.
    """
    return cfg.confidence_floor + (1.0 - cfg.confidence_floor) * -np.expm1(-q / cfg.confidence_knee)


def draw(cfg: Knobs, world: dict, rng: np.random.Generator, size: int) -> Problems:
    z = rng.normal(size=(size, cfg.rank))
    y = solves(cfg, world, rng, z)
    logits = world["beta0"][None, :] + z @ world["V0"]
    if cfg.confidence_floor < 1:
        logits = logits * confidence(cfg, pass_rates_of_logits(logits, y))[:, None]
    execution = None
    if cfg.execution_a > 0:
        e = np.clip(rng.beta(cfg.execution_a, cfg.execution_b, size), 1e-12, 1 - 1e-12)
        execution = np.log(e) - np.log1p(-e)
    return Problems(logits, z, y, execution)


def path_scales(cfg: Knobs) -> PathScales:
    return PathScales(beta=cfg.shared, v=cfg.shared, u=cfg.local, u_share=cfg.local_share)


def learn_mask(cfg: Knobs) -> np.ndarray:
    return np.ones(cfg.n_strategies)
