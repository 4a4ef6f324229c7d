"""Single problem, tabular 2-outcome softmax: the suboptimality rate and the compute-optimal n.

Model (the surrogate). One problem, logit z, p = sigmoid(z). Each step draws a group of n
rollouts, c ~ Binomial(n, p), and takes the group-averaged mean-baseline step (no std
scaling) with step size eta:

    z_{t+1} = z_t + eta * S(c_t) / n = z_t + eta c_t (n - c_t) / n^2.

Drift and noise. E[z_{t+1} - z_t] = eta (n-1)/n p (1-p) =: eta' p (1-p), and
Var[z_{t+1} - z_t] = eta^2 (n-1) p q [(n-1) - (4n-6) p q] / n^3 (q = 1 - p).

Mean-field ODE. dz/dt = eta' p (1-p). Since 1/(p (1-p)) = 2 + e^z + e^-z, it integrates to
F(z_t) = F(z_0) + eta' t with F(z) = 2 z + e^z - e^-z, so e^{z_t} = eta' t + O(log t) and

    1 - p_t ~ 1 / (eta' t) = n / ((n-1) eta t) = A / (n t) + B / t,
    A = n / ((n-1) eta)  (between 1/eta and 2/eta),   B = 1 / eta.

Noise. Near p = 1 the update is a Poisson stream: one failure in the group (probability
~ n (1-p)) moves z by h = eta (n-1)/n^2. The odds w = e^z then form a positive
self-similar Markov process whose Lamperti Levy process jumps by h at rate n, with mean
m = n h = eta'. For such processes E[1/w_t] ~ 1/(m t) (the entrance-law identity of Bertoin
and Yor, 2002); the diffusion approximation dw = (a + b) dt + sqrt(b w) dW (a squared Bessel
process, a = eta'(1 - h/2), b = eta' h) gives the same 1/((a + b/2) t) = 1/(eta' t) to first
order in h. This is a heuristic argument, not a proof: the conclusion is that sampling noise
adds no 1/t term and only moves the O(log t / t^2) corrections. The tests check E[1 - p_t]
from a Monte Carlo run of the recursion against the ODE (within 2 % + 5 standard errors)
and against A/(n t) + B/t.

Compute-optimal n. At fixed compute C = n t, E[1 - p] ~ (A + B n) / C = n^2 / ((n-1) eta C),
minimised over n >= 2 at n* = 2; the ODE solution depends on (n, t) only through
eta' t = eta (n-1) C / n^2, so n* = 2 at every budget, not only asymptotically. If the
step size grows with the group, eta(n) = eta n^gamma (gamma = 1/2: square-root LR scaling),
the rate is eta n^gamma (n-1) / n^2 and the continuous optimum is n* = (2 - gamma)/(1 - gamma)
for gamma < 1 (3 for gamma = 1/2), unbounded for gamma >= 1. Assumptions: a single problem,
exact tabular gradients, eta(n) small enough that one step changes p little (the ODE
regime), n >= 2 (n = 1 has no mean-baseline signal).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special as sps
import sympy as sp
from scipy.optimize import brentq

from ..errors import IsosimInputError
from ._core import C, ClosedForm, as_count, as_prob, eta, gamma_lr, n, p, register, t, z


def _check(n_, eta_):
    n_ = as_count(n_, "n", 2)
    if not (eta_ > 0 and math.isfinite(eta_)):
        raise IsosimInputError(f"step size eta must be > 0, got {eta_!r}")
    return n_, float(eta_)


def tabular_drift(p, n: int, eta: float):
    """E[z_{t+1} - z_t] = eta (n-1)/n p (1-p)."""
    n, eta = _check(n, eta)
    pr = as_prob(p)
    return eta * (n - 1) / n * pr * (1 - pr)


def tabular_step_variance(p, n: int, eta: float):
    """Var[z_{t+1} - z_t] = eta^2 (n-1) p q [(n-1) - (4n-6) p q] / n^3."""
    n, eta = _check(n, eta)
    pr = as_prob(p)
    pq = pr * (1 - pr)
    return eta**2 * (n - 1) * pq * ((n - 1) - (4 * n - 6) * pq) / n**3


def tabular_ode_potential(z):
    """F(z) = 2 z + e^z - e^-z = integral of dz / (p (1-p)), p = sigmoid(z)."""
    zz = np.asarray(z, dtype=float)
    return 2 * zz + 2 * np.sinh(zz)


def _solve_potential(target: float, lo: float) -> float:
    hi = max(math.asinh(target / 2.0), lo, 0.0) + 1.0
    return brentq(lambda x: 2 * x + 2 * math.sinh(x) - target, lo - 1e-12, hi, xtol=1e-14,
                  rtol=1e-14)


def tabular_ode_suboptimality(t, n: int, eta: float, z0: float = 0.0):
    """1 - p_t of the mean-field ODE: 1 - sigmoid(z_t), F(z_t) = F(z_0) + eta (n-1)/n t."""
    n, eta = _check(n, eta)
    tt = np.asarray(t, dtype=float)
    if np.any(tt < 0):
        raise IsosimInputError("t must be >= 0")
    f0 = float(tabular_ode_potential(z0))
    rate = eta * (n - 1) / n
    zt = np.vectorize(lambda s: _solve_potential(f0 + rate * s, z0), otypes=[float])(tt)
    return sps.expit(-zt)


def tabular_bound_constants(n: int, eta: float) -> tuple[float, float]:
    """(A, B) of E[1 - p_t] ~ A/(n t) + B/t: A = n / ((n-1) eta), B = 1/eta."""
    n, eta = _check(n, eta)
    return n / ((n - 1) * eta), 1.0 / eta


def tabular_suboptimality_bound(t, n: int, eta: float):
    """Leading-order E[1 - p_t] = A/(n t) + B/t = n / ((n-1) eta t)."""
    A, B = tabular_bound_constants(n, eta)
    tt = np.asarray(t, dtype=float)
    return A / (n * tt) + B / tt


def tabular_optimal_n(lr_exponent: float = 0.0, n_min: int = 2, n_max: int | None = None) -> int:
    """Integer n maximising eta n^gamma (n-1)/n^2 (continuous optimum (2-gamma)/(1-gamma))."""
    n_min = as_count(n_min, "n_min", 2)
    if n_max is not None:
        n_max = as_count(n_max, "n_max", n_min)
    g = float(lr_exponent)
    if g < 0:
        raise IsosimInputError("lr_exponent must be >= 0")
    if g >= 1:
        if n_max is None:
            raise IsosimInputError("with lr_exponent >= 1 the optimum is unbounded: give n_max")
        return n_max
    cont = (2 - g) / (1 - g)
    cands = {n_min, max(n_min, math.floor(cont)), max(n_min, math.ceil(cont))}
    if n_max is not None:
        cands = {min(x, n_max) for x in cands}

    def rate(x):
        return x**g * (x - 1) / x**2

    return max(sorted(cands), key=rate)


def tabular_compute_optimal_n(compute: float, eta: float, z0: float = 0.0, n_min: int = 2,
                              n_max: int | None = None, lr_exponent: float = 0.0) -> int:
    """Compute-optimal group size at budget C = n t (rollouts) under the mean-field ODE.

    Minimises 1 - p_{C/n} over integers n in [n_min, min(n_max, C)] with step size
    eta n^lr_exponent; the ODE depends on n only through eta(n) (n-1) C / n^2, so the answer
    is ``tabular_optimal_n`` capped by the budget.
    """
    if not (compute > 0 and math.isfinite(compute)):
        raise IsosimInputError(f"compute must be > 0, got {compute!r}")
    n_min = as_count(n_min, "n_min", 2)
    _check(n_min, eta)
    cap = int(compute) if n_max is None else min(int(compute), as_count(n_max, "n_max", n_min))
    if cap < n_min:
        raise IsosimInputError(f"compute {compute} is below one group of n_min={n_min} rollouts")
    best = tabular_optimal_n(lr_exponent, n_min, cap)
    # the ODE value is monotone in eta(n) (n-1) C / n^2: confirm on the neighbours
    cand = sorted({n_min, best, min(best + 1, cap), max(best - 1, n_min), cap})
    vals = [float(tabular_ode_suboptimality(compute / x, x, eta * x**lr_exponent, z0))
            for x in cand]
    return cand[int(np.argmin(vals))]


# --------------------------------------------------------------------------- expressions
def tabular_drift_expr() -> sp.Expr:
    """eta (n-1)/n p (1-p)."""
    return eta * (n - 1) / n * p * (1 - p)


def tabular_step_variance_expr() -> sp.Expr:
    """eta^2 (n-1) p q [(n-1) - (4n-6) p q] / n^3."""
    pq = p * (1 - p)
    return eta**2 * (n - 1) * pq * ((n - 1) - (4 * n - 6) * pq) / n**3


def tabular_ode_potential_expr() -> sp.Expr:
    """F(z) = integral (2 + e^z + e^-z) dz = 2 z + e^z - e^-z."""
    return sp.integrate(2 + sp.exp(z) + sp.exp(-z), z)


def tabular_bound_expr() -> sp.Expr:
    """A/(n t) + B/t with A = n/((n-1) eta), B = 1/eta."""
    A = n / ((n - 1) * eta)
    B = 1 / eta
    return A / (n * t) + B / t


def tabular_optimal_n_expr() -> sp.Expr:
    """(2 - gamma)/(1 - gamma): stationary point of log(eta n^gamma (n-1)/n^2) in n."""
    sol = sp.solve(sp.diff(gamma_lr * sp.log(n) + sp.log(n - 1) - 2 * sp.log(n), n), n)
    return sp.simplify(sol[0])


def tabular_fixed_compute_expr() -> sp.Expr:
    """E[1 - p] at t = C/n: n^2 / ((n-1) eta C)."""
    return sp.simplify(tabular_bound_expr().subs(t, C / n))


_S = "Tabular single-problem bound"
register(ClosedForm(
    "tabular_drift", _S, "Expected logit step", r"E[z_{t+1} - z_t]", (p, n, eta),
    tabular_drift_expr, tabular_drift,
    note=("Step $z_{t+1} = z_t + \\eta\\, c_t (n - c_t)/n^2$ (group-averaged mean-baseline "
          "signal), $c_t \\sim \\mathrm{Bin}(n, p_t)$."),
))
register(ClosedForm(
    "tabular_step_variance", _S, "Variance of the logit step", r"\mathrm{Var}[z_{t+1} - z_t]",
    (p, n, eta), tabular_step_variance_expr, tabular_step_variance,
))
register(ClosedForm(
    "tabular_ode_potential", _S, "Integral of the mean-field ODE", r"F(z)", (z,),
    tabular_ode_potential_expr, tabular_ode_potential,
    note=("$dz/dt = \\eta' p(1-p)$ with $\\eta' = \\eta (n-1)/n$ and "
          "$1/(p(1-p)) = 2 + e^z + e^{-z}$, so $F(z_t) = F(z_0) + \\eta' t$ and "
          "$e^{z_t} = \\eta' t + O(\\log t)$."),
))
register(ClosedForm(
    "tabular_bound", _S, "Suboptimality rate A/(n t) + B/t", r"E[1 - p_t]",
    (n, eta, t), tabular_bound_expr, lambda n_, e_, t_: tabular_suboptimality_bound(t_, n_, e_),
    note=("$A = n/((n-1)\\eta)$, $B = 1/\\eta$. Sampling noise adds no $1/t$ term: near "
          "$p = 1$ the odds $e^z$ are a self-similar Markov process whose Lamperti Levy "
          "process has mean $\\eta'$, so $E[e^{-z_t}] \\sim 1/(\\eta' t)$ as for the ODE."),
    relation=r"\approx",
    display=lambda: (r"E[1 - p_t] \approx \frac{A}{n t} + \frac{B}{t} = "
                     + sp.latex(sp.factor(tabular_bound_expr()))
                     + r",\qquad A = " + sp.latex(n / ((n - 1) * eta))
                     + r",\quad B = " + sp.latex(1 / eta)),
))
register(ClosedForm(
    "tabular_fixed_compute", _S, "Suboptimality at fixed compute C = n t",
    r"E[1 - p]\big|_{t = C/n}", (n, eta, C), tabular_fixed_compute_expr,
    lambda n_, e_, C_: tabular_suboptimality_bound(C_ / n_, n_, e_),
    note=("Increasing in $n$ for $n \\ge 2$, so the compute-optimal group is the smallest: "
          "$n^* = 2$."),
))
register(ClosedForm(
    "tabular_optimal_n", _S, "Compute-optimal n with step size eta n^gamma", r"n^*",
    (gamma_lr,), tabular_optimal_n_expr, lambda g_: (2 - np.asarray(g_)) / (1 - np.asarray(g_)),
    note=("Maximises $\\eta n^\\gamma (n-1)/n^2$ (the ODE clock per rollout); "
          "$\\gamma = 0$ gives 2, $\\gamma = 1/2$ gives 3; $\\gamma < 1$."),
))
