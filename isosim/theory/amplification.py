"""KL-regularised iterated GRPO on one problem: success amplification.

KL-regularised optimum. For a 2-outcome policy with success probability p and reference
p_0, max_pi E_pi[r] - beta KL(pi || pi_ref) is attained at pi*(y) ∝ pi_ref(y) e^{r(y)/beta}:

    p*_KL = p_0 e^{1/beta} / (p_0 e^{1/beta} + 1 - p_0) = sigmoid(logit p_0 + 1/beta).

Iterated GRPO (Mroueh 2025, "Reinforcement learning with verifiable rewards: GRPO's
effective loss, dynamics, and success amplification"). Replacing r by the std-normalised
advantage of the current policy p_t, A+ = (1-p)/s, A- = -p/s with s = sqrt(p (1-p) + eps),
and solving the KL-regularised problem exactly each iteration gives

    p_{t+1} = h(p_t) = p_0 e^{A+(p_t)/beta} / (p_0 e^{A+(p_t)/beta} + (1-p_0) e^{A-(p_t)/beta})
            = sigmoid(logit p_0 + 1 / (beta s(p_t)))

(for eps = 0: A+ = sqrt((1-p)/p), A- = -sqrt(p/(1-p)), A+ - A- = 1/sqrt(p (1-p))). Because
1/s is smallest at p = 1/2, h(p) >= h(1/2) = sigmoid(logit p_0 + 1/(beta sqrt(1/4 + eps)))
for every p, so every fixed point p* = h(p*) satisfies p* >= h(1/2) > p_0; for eps = 0,
h(1/2) = sigmoid(logit p_0 + 2/beta) > p*_KL: the std normalisation amplifies success beyond
the reward-regularised optimum. Without std scaling (A+ - A- = 1) the iteration reaches
p*_KL in one step. With eps > 0, h(1) < 1 so a fixed point in (0, 1) always exists; with
eps = 0 and small beta there may be none (the iteration tends to 1). The fixed point is
stable, and the iteration converges to it from nearby, when |h'(p*)| < 1, where
h'(p) = h (1 - h) (2p - 1) / (2 beta s^3).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special as sps
import sympy as sp
from scipy.optimize import brentq

from ..errors import IsosimInputError
from ._core import ClosedForm, beta, eps, p, p0, register


def _check(p0_, beta_, eps_=0.0):
    if not (0 < p0_ < 1):
        raise IsosimInputError(f"p0 must lie in (0, 1), got {p0_!r}")
    if not (beta_ > 0 and math.isfinite(beta_)):
        raise IsosimInputError(f"beta must be > 0, got {beta_!r}")
    if not (eps_ >= 0 and math.isfinite(eps_)):
        raise IsosimInputError(f"eps must be >= 0, got {eps_!r}")
    return float(p0_), float(beta_), float(eps_)


def kl_regularised_optimum(p0, beta):
    """argmax_p p - beta KL(Bern(p) || Bern(p0)) = p0 e^{1/beta} / (p0 e^{1/beta} + 1 - p0)."""
    pp = np.asarray(p0, dtype=float)
    return sps.expit(sps.logit(pp) + 1.0 / np.asarray(beta, dtype=float))


def grpo_advantages(p, eps: float = 0.0):
    """(A+, A-) = ((1-p)/s, -p/s), s = sqrt(p (1-p) + eps): std-normalised GRPO advantages."""
    pp = np.asarray(p, dtype=float)
    s = np.sqrt(pp * (1 - pp) + eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (1 - pp) / s, -pp / s


def grpo_amplification_map(p, p0: float, beta: float, eps: float = 0.0):
    """h(p) = sigmoid(logit p0 + 1/(beta sqrt(p (1-p) + eps))) (p_{t+1} = h(p_t))."""
    p0, beta, eps = _check(p0, beta, eps)
    pp = np.asarray(p, dtype=float)
    s = np.sqrt(pp * (1 - pp) + eps)
    with np.errstate(divide="ignore"):
        return sps.expit(sps.logit(p0) + 1.0 / (beta * s))


def grpo_amplification_map_derivative(p, p0: float, beta: float, eps: float = 0.0):
    """h'(p) = h (1 - h) (2p - 1) / (2 beta s^3), s = sqrt(p (1-p) + eps)."""
    p0, beta, eps = _check(p0, beta, eps)
    pp = np.asarray(p, dtype=float)
    h = grpo_amplification_map(pp, p0, beta, eps)
    s = np.sqrt(pp * (1 - pp) + eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        return h * (1 - h) * (2 * pp - 1) / (2 * beta * s**3)


def grpo_amplification_lower_bound(p0, beta, eps: float = 0.0):
    """h(1/2) = sigmoid(logit p0 + 1/(beta sqrt(1/4 + eps))): a lower bound on every fixed point."""
    return sps.expit(sps.logit(np.asarray(p0, float)) + 1.0 / (np.asarray(beta, float)
                                                              * math.sqrt(0.25 + eps)))


def _sig(x):
    """(sigmoid(x), sigmoid(-x)) without underflow to 0 before |x| ~ 745 (numpy arrays ok)."""
    e = np.exp(-np.abs(x))
    big = 1.0 / (1.0 + e)
    small = e / (1.0 + e)
    return np.where(x >= 0, big, small), np.where(x >= 0, small, big)


def _gap(x, lp0: float, beta_: float, eps_: float):
    """(1 - p) - (1 - h(p)) at p = sigmoid(x): zero at fixed points, accurate near p = 1."""
    pp, qq = _sig(x)
    sd = np.sqrt(pp * qq + eps_)
    with np.errstate(divide="ignore"):
        y = lp0 + 1.0 / (beta_ * sd)
    return qq - _sig(y)[1]


def _fixed_point_logits(p0: float, beta: float, eps: float) -> list[tuple[float, float]]:
    """(logit p*, h'(p*)) for every fixed point, ascending (see fixed_points)."""
    lp0 = float(sps.logit(p0))
    xs = np.concatenate([np.linspace(-40.0, 40.0, 8001), np.linspace(40.0, 700.0, 1321)[1:]])
    g = _gap(xs, lp0, beta, eps)
    roots = [brentq(lambda x: float(_gap(x, lp0, beta, eps)), xs[j], xs[j + 1], xtol=1e-13,
                    rtol=1e-15)
             for j in np.nonzero(np.sign(g[:-1]) * np.sign(g[1:]) < 0)[0]]
    roots += [float(xs[j]) for j in np.nonzero(g == 0)[0]]  # grid points that are roots
    out = []
    for x in sorted(roots):
        pp, qq = (float(v) for v in _sig(x))
        sd = math.sqrt(pp * qq + eps)
        hh, one_minus_h = (float(v) for v in _sig(lp0 + 1.0 / (beta * sd)))
        out.append((float(x), hh * one_minus_h * (pp - qq) / (2 * beta * sd**3)))
    return out


def grpo_amplification_fixed_points(p0: float, beta: float, eps: float = 0.0):
    """All fixed points of h in (0, 1), ascending, as a list of (p*, stable) pairs.

    Found by a sign scan of p - h(p) on a grid in logit space (logit p in [-40, 700],
    finer below 40) and refined with ``scipy.optimize.brentq``; stable means |h'(p*)| < 1.
    Points within 1e-16 of 1 print as 1.0 (``grpo_amplification_fixed_point(..., logit=True)``
    keeps them apart); fixed points closer to 1 than e^-700 are not reported.
    """
    p0, beta, eps = _check(p0, beta, eps)
    return [(float(sps.expit(x)), abs(d) < 1) for x, d in _fixed_point_logits(p0, beta, eps)]


def grpo_amplification_fixed_point(p0: float, beta: float, eps: float = 0.0,
                                   logit: bool = False) -> float:
    """The smallest fixed point p* = h(p*) in (0, 1) (1.0 if none: then p_t -> 1).

    p* >= h(1/2) > p0 always (see the module docstring). With ``logit=True`` returns
    logit p* (inf if none), which resolves fixed points within 1e-16 of 1.
    """
    p0, beta, eps = _check(p0, beta, eps)
    pts = _fixed_point_logits(p0, beta, eps)
    if not pts:
        return math.inf if logit else 1.0
    return pts[0][0] if logit else float(sps.expit(pts[0][0]))


def grpo_amplification_iterate(p0: float, beta: float, eps: float = 0.0, steps: int = 100,
                               p_start: float | None = None) -> np.ndarray:
    """The trajectory p_0, h(p_0), h(h(p_0)), ... (``steps`` + 1 values), from p_start or p0."""
    p0, beta, eps = _check(p0, beta, eps)
    traj = [p0 if p_start is None else float(p_start)]
    for _ in range(int(steps)):
        traj.append(float(grpo_amplification_map(traj[-1], p0, beta, eps)))
    return np.array(traj)


# --------------------------------------------------------------------------- expressions
def kl_regularised_optimum_expr() -> sp.Expr:
    """p0 e^{1/beta} / (p0 e^{1/beta} + 1 - p0)."""
    return p0 * sp.exp(1 / beta) / (p0 * sp.exp(1 / beta) + 1 - p0)


def kl_regularised_optimum_derived() -> sp.Expr:
    """Solve d/dp [p - beta (p log(p/p0) + (1-p) log((1-p)/(1-p0)))] = 0 for p."""
    q = sp.Symbol("q", positive=True)
    objective = q - beta * (q * sp.log(q / p0) + (1 - q) * sp.log((1 - q) / (1 - p0)))
    sol = sp.solve(sp.expand_log(sp.diff(objective, q), force=True), q)
    return sp.simplify(sol[0])


def grpo_amplification_map_expr() -> sp.Expr:
    """p0 e^{A+/beta} / (p0 e^{A+/beta} + (1-p0) e^{A-/beta}), A± std-normalised."""
    s = sp.sqrt(p * (1 - p) + eps)
    ap, am = (1 - p) / s, -p / s
    return p0 * sp.exp(ap / beta) / (p0 * sp.exp(ap / beta) + (1 - p0) * sp.exp(am / beta))


def grpo_amplification_lower_bound_expr() -> sp.Expr:
    """h(1/2) = p0 e^{1/(beta sqrt(1/4 + eps))} / (p0 e^{...} + 1 - p0)."""
    e = sp.exp(1 / (beta * sp.sqrt(sp.Rational(1, 4) + eps)))
    return p0 * e / (p0 * e + 1 - p0)


_S = "KL-regularised iterated GRPO (success amplification)"
register(ClosedForm(
    "kl_regularised_optimum", _S, "KL-regularised optimum", r"p^*_{\mathrm{KL}}", (p0, beta),
    kl_regularised_optimum_expr, kl_regularised_optimum,
    note=("$\\max_\\pi E_\\pi[r] - \\beta\\,\\mathrm{KL}(\\pi \\| \\pi_{ref})$ is attained at "
          "$\\pi^*(y) \\propto \\pi_{ref}(y) e^{r(y)/\\beta}$."),
))
register(ClosedForm(
    "grpo_amplification_map", _S, "Iterated-GRPO map", r"h(p)", (p, p0, beta, eps),
    grpo_amplification_map_expr, lambda p_, p0_, b_, e_: grpo_amplification_map(p_, p0_, b_, e_),
    note=("$p_{t+1} = h(p_t)$ with $A_+ = (1-p)/s$, $A_- = -p/s$, $s = \\sqrt{p(1-p)+\\epsilon}$ "
          "(Mroueh 2025). Equivalently $h(p) = \\sigma(\\mathrm{logit}\\,p_0 + 1/(\\beta s))$; "
          "the fixed point $p^* = h(p^*)$ is found with brentq."),
))
register(ClosedForm(
    "grpo_amplification_lower_bound", _S, "Lower bound on the fixed point", r"p^* \ge h(1/2)",
    (p0, beta, eps), grpo_amplification_lower_bound_expr, grpo_amplification_lower_bound,
    note=("$1/s$ is minimal at $p = 1/2$, so $h(p) \\ge h(1/2) > p_0$ for all $p$; with "
          "$\\epsilon = 0$, "
          "$h(1/2) = \\sigma(\\mathrm{logit}\\,p_0 + 2/\\beta) > p^*_{\\mathrm{KL}}$."),
))
