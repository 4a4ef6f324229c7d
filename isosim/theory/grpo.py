"""The GRPO update on one problem: 2 outcomes, K-arm softmax, decoupled baseline.

Two outcomes. The policy emits a correct answer with probability p = sigmoid(z); for a
rollout y_j with reward r_j in {0, 1}, d log pi(y_j)/dz = r_j - p. A group of n rollouts has
c ~ Binomial(n, p) successes, and the summed logit signal is S = sum_j A_j (r_j - p). Because
every advantage below depends only on (r_j, c) and sums to zero over the group,
S = sum_j A_j r_j:

* mean baseline, A_j = r_j - c/n:                    S = c (n - c) / n
* mean baseline + std scaling (population std
  sqrt(c (n - c)) / n, eps = 0; A = 0 if c in {0, n}): S = sqrt(c (n - c))
* RLOO, A_j = r_j - (c - r_j)/(n - 1):               S = c (n - c) / (n - 1)

E[c (n - c)] = n (n - 1) p (1 - p) gives E[S] = (n - 1) p (1 - p) (mean) and n p (1 - p)
(RLOO); the variances follow from the binomial moments up to order 4. With std scaling
E[S^2] = E[c (n - c)] = n (n - 1) p (1 - p) in closed form but E[sqrt(c (n - c))] has none:
it is the exact finite sum over the binomial pmf.

K-arm softmax. Logits theta over K arms, pi = softmax(theta), rewards r_a in {0, 1},
p = sum_a pi_a r_a. The per-logit update is g = (1/n) sum_j A_j (e_{y_j} - pi); with
zero-sum advantages g_a = (N_a / n) h(c, r_a), N_a the count of arm a and h the advantage
of a reward given c. Given c, the counts of the rewarded arms are Multinomial(c, pi_a / p)
and the others Multinomial(n - c, pi_a / (1 - p)), so

    E[g_a] = pi_a (r_a - p) E[S] / (n p (1 - p))

(= pi_a (r_a - p) (n - 1)/n for the mean baseline), and the covariance is an exact sum over
c. For the mean baseline it is, with rho_a = P(reward != r_a) = r_a (1-p) + (1 - r_a) p,

    Cov(g_a, g_b) = (n-1)/n^3 [ delta_ab pi_a rho_a (1 + (n-2) rho_a) + pi_a pi_b Q_ab ],
    Q_ab = rho_a ((n - 2) - (4n - 6) rho_a)       if r_a = r_b,
    Q_ab = -((n - 1) - (4n - 6) p (1 - p))        otherwise;

RLOO multiplies g by n/(n-1) (mean by n/(n-1), covariance by n^2/(n-1)^2).

Decoupled baseline. The baseline b = c_est / n_est comes from n_est rollouts and the
update uses a uniformly random subset of n_train <= n_est of them. The train rollouts are
i.i.d. Bernoulli(p) (c_train ~ Binomial(n_train, p)) and the others add an independent
c_rest ~ Binomial(n_est - n_train, p), so with S = sum_{j in train} (r_j - b)(r_j - p):

    E[S]   = n_train (n_est - 1)/n_est p q                                   (q = 1 - p)
    Var[S] = n_train p q [(n_est - 1)^2 - (4 n_est^2 - 9 n_est + 6 - n_train) p q] / n_est^2

which reduce to the mean-baseline formulas at n_train = n_est = n.
"""
from __future__ import annotations

import functools

import numpy as np
import sympy as sp

from ..errors import IsosimInputError
from ..sim.advantages import get as _get_advantage
from ._core import (
    ClosedForm,
    as_count,
    as_prob,
    binomial_pmf_matrix,
    binomial_pmf_sum,
    c,
    c_rest,
    c_train,
    delta_ab,
    expect_binomial,
    n,
    n_est,
    n_train,
    p,
    pi_a,
    pi_b,
    r_a,
    r_b,
    register,
)

#: the theory's names of the registered estimators (:mod:`isosim.sim.advantages`):
#: ``mean`` = drgrpo, ``std`` = grpo with ``std_eps = 0`` (population std), ``rloo`` = rloo
ADVANTAGES = ("mean", "std", "rloo")


def theory_name(advantage: str) -> str:
    """The theory's name of an estimator given by any registered name or alias."""
    name = _get_advantage(advantage).theory
    if name is None:
        raise IsosimInputError(f"the theory has no closed form for the advantage {advantage!r}")
    return name


def _check_adv(advantage: str, n_: int) -> int:
    if advantage not in ADVANTAGES:
        raise IsosimInputError(
            f"unknown advantage {advantage!r}; expected one of {', '.join(ADVANTAGES)} "
            "(theory_name() maps the simulator's names and aliases)"
        )
    return as_count(n_, "n", 2 if advantage == "rloo" else 1)


# --------------------------------------------------------------------------- advantages
def advantage_value(c_, r, n: int, advantage: str = "mean"):
    """Advantage h(c, r) of a rollout with reward r in a group with c successes of n.

    mean: r - c/n; std: (r - c/n) / (sqrt(c (n - c))/n), 0 when c in {0, n};
    rloo: r - (c - r)/(n - 1) = (n r - c)/(n - 1).

    The std is the population std of the group's rewards (ddof 0), as in the surrogate's
    ``grpo`` advantage. The small-LM trainer (:func:`isosim.lm.grpo.group_advantages`), like
    TRL and verl (``torch.std``), uses Bessel's correction (ddof 1), sqrt(c (n - c)/(n (n - 1))):
    its std advantages are these times sqrt((n - 1)/n).
    """
    n = _check_adv(advantage, n)
    cc = np.asarray(c_, dtype=float)
    rr = np.asarray(r, dtype=float)
    if advantage == "mean":
        return rr - cc / n
    if advantage == "rloo":
        return (n * rr - cc) / (n - 1)
    sd = np.sqrt(np.maximum(cc * (n - cc), 0.0)) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sd > 0, (rr - cc / n) / np.where(sd > 0, sd, 1.0), 0.0)


def group_advantages(rewards, advantage: str = "mean"):
    """Advantages A_j of groups ``rewards[..., j]`` in {0, 1} (last axis = the group)."""
    rw = np.asarray(rewards, dtype=float)
    n_ = rw.shape[-1]
    cc = rw.sum(axis=-1, keepdims=True)
    return advantage_value(cc, rw, n_, advantage)


# --------------------------------------------------------------------------- 2 outcomes
def grpo_signal(c_, n: int, advantage: str = "mean"):
    """Summed logit signal S(c) = sum_j A_j (r_j - p) of a group with c successes.

    mean: c (n - c)/n; std: sqrt(c (n - c)); rloo: c (n - c)/(n - 1).
    """
    n = _check_adv(advantage, n)
    cc = np.asarray(c_, dtype=float)
    prod = cc * (n - cc)
    if advantage == "mean":
        return prod / n
    if advantage == "rloo":
        return prod / (n - 1)
    return np.sqrt(np.maximum(prod, 0.0))


def grpo_signal_moments(n: int, p, advantage: str = "mean"):
    """(E[S], Var[S]) over c ~ Binomial(n, p), as exact sums over the pmf (any advantage)."""
    n = _check_adv(advantage, n)
    cs, w = binomial_pmf_matrix(n, as_prob(p))
    s = grpo_signal(cs, n, advantage)
    mean = np.sum(w * s, axis=-1)
    var = np.maximum(np.sum(w * s * s, axis=-1) - mean**2, 0.0)
    return mean, var


def grpo_signal_expectation(n: int, p, advantage: str = "mean"):
    """E[S]: (n-1) p (1-p) (mean), n p (1-p) (rloo), sum_c pmf(c) sqrt(c (n-c)) (std)."""
    n = _check_adv(advantage, n)
    pr = as_prob(p)
    if advantage == "mean":
        return (n - 1) * pr * (1 - pr)
    if advantage == "rloo":
        return n * pr * (1 - pr)
    return grpo_signal_moments(n, pr, "std")[0]


def grpo_signal_variance(n: int, p, advantage: str = "mean"):
    """Var[S]; mean: (n-1) p q [(n-1) - (4n-6) p q]/n with q = 1-p; rloo: that * n^2/(n-1)^2;
    std: n (n-1) p q - E[sqrt(c (n-c))]^2."""
    n = _check_adv(advantage, n)
    pr = as_prob(p)
    pq = pr * (1 - pr)
    if advantage in ("mean", "rloo"):
        v = (n - 1) * pq * ((n - 1) - (4 * n - 6) * pq) / n
        return v if advantage == "mean" else v * n**2 / (n - 1) ** 2
    mean = grpo_signal_moments(n, pr, "std")[0]
    return np.maximum(n * (n - 1) * pq - mean**2, 0.0)


def _signal_expr(advantage: str) -> sp.Expr:
    prod = c * (n - c)
    return {"mean": prod / n, "std": sp.sqrt(prod), "rloo": prod / (n - 1)}[advantage]


def grpo_signal_expr(advantage: str = "mean") -> sp.Expr:
    """S(c) for the given advantage, as a sympy expression in c and n."""
    _check_adv(advantage, 2)
    return _signal_expr(advantage)


def grpo_signal_expectation_expr(advantage: str = "mean") -> sp.Expr:
    """E[S] over c ~ Binomial(n, p): closed form (mean, rloo) or the exact pmf sum (std)."""
    _check_adv(advantage, 2)
    q = 1 - p
    if advantage == "mean":
        return (n - 1) * p * q
    if advantage == "rloo":
        return n * p * q
    return binomial_pmf_sum(_signal_expr("std"))


def grpo_signal_variance_expr(advantage: str = "mean") -> sp.Expr:
    """Var[S] over c ~ Binomial(n, p) (closed form; std: n (n-1) p q - (pmf sum)^2)."""
    _check_adv(advantage, 2)
    pq = p * (1 - p)
    mean_var = (n - 1) * pq * ((n - 1) - (4 * n - 6) * pq) / n
    if advantage == "mean":
        return mean_var
    if advantage == "rloo":
        return mean_var * n**2 / (n - 1) ** 2
    return n * (n - 1) * pq - grpo_signal_expectation_expr("std") ** 2


@functools.lru_cache(maxsize=None)
def grpo_signal_moments_derived(advantage: str = "mean") -> tuple[sp.Expr, sp.Expr]:
    """(E[S], Var[S]) derived mechanically from binomial factorial moments (mean, rloo)."""
    if advantage not in ("mean", "rloo"):
        raise IsosimInputError("only the polynomial signals (mean, rloo) have a derivation")
    s = _signal_expr(advantage)
    m1 = sp.factor(expect_binomial(s))
    m2 = expect_binomial(s**2)
    return m1, sp.factor(sp.expand(m2 - m1**2))


# --------------------------------------------------------------------------- K-arm softmax
def _karm_args(pi, rewards, n_, advantage):
    n_ = _check_adv(advantage, n_)
    pv = np.asarray(pi, dtype=float)
    rv = np.asarray(rewards, dtype=float)
    if pv.ndim != 1 or pv.shape != rv.shape or pv.size < 2:
        raise IsosimInputError("pi and rewards must be 1-D arrays of the same length K >= 2")
    if np.any(pv < 0) or abs(pv.sum() - 1) > 1e-9:
        raise IsosimInputError("pi must be a probability vector")
    if np.any((rv != 0) & (rv != 1)):
        raise IsosimInputError("rewards must be 0 or 1")
    return pv, rv.astype(bool), n_


def softmax_update_moments(pi, rewards, n: int, advantage: str = "mean"):
    """Exact (E[g], Cov[g]) of g = (1/n) sum_j A_j (e_{y_j} - pi), y_j ~ pi i.i.d.

    Conditions on c ~ Binomial(n, p): g_a = (N_a/n) h(c, r_a) with N_a | c multinomial
    within the rewarded (or unrewarded) arms, then sums over the pmf of c.
    """
    pv, rv, n = _karm_args(pi, rewards, n, advantage)
    pr = min(max(float(np.sum(pv[rv])), 0.0), 1.0)
    cs, w = binomial_pmf_matrix(n, pr)
    group_p = np.where(rv, pr, 1.0 - pr)
    q = np.divide(pv, group_p, out=np.zeros_like(pv), where=group_p > 0)  # pi_a / P(group)
    size = np.where(rv[:, None], cs[None, :], n - cs[None, :]).astype(float)  # (K, n+1)
    h = np.where(rv[:, None], advantage_value(cs, 1, n, advantage)[None, :],
                 advantage_value(cs, 0, n, advantage)[None, :])
    mean = np.sum(w * size * q[:, None] * h, axis=1) / n
    same = rv[:, None] == rv[None, :]
    pair = np.where(same[:, :, None], size[:, None, :] * (size[:, None, :] - 1),
                    (cs * (n - cs))[None, None, :])
    eN2 = pair * (q[:, None] * q[None, :])[:, :, None]
    eN2 = eN2 + np.eye(len(pv))[:, :, None] * (size * q[:, None])[:, None, :]
    second = np.sum(w * eN2 * h[:, None, :] * h[None, :, :], axis=2) / n**2
    return mean, second - np.outer(mean, mean)


def softmax_update_mean(pi, rewards, n: int, advantage: str = "mean"):
    """E[g_a] = pi_a (r_a - p) E[S] / (n p (1-p)); mean baseline: pi_a (r_a - p)(n-1)/n."""
    pv, rv, n = _karm_args(pi, rewards, n, advantage)
    pr = min(max(float(np.sum(pv[rv])), 0.0), 1.0)
    if advantage == "std":
        return softmax_update_moments(pi, rewards, n, advantage)[0]
    factor = (n - 1) / n if advantage == "mean" else 1.0
    return pv * (rv - pr) * factor


def softmax_update_cov(pi, rewards, n: int, advantage: str = "mean"):
    """Cov[g] in closed form (mean, rloo; see the module docstring) or exact sum (std)."""
    pv, rv, n = _karm_args(pi, rewards, n, advantage)
    if advantage == "std":
        return softmax_update_moments(pi, rewards, n, advantage)[1]
    pr = min(max(float(np.sum(pv[rv])), 0.0), 1.0)
    rho = np.where(rv, 1 - pr, pr)
    same = rv[:, None] == rv[None, :]
    q_same = rho * ((n - 2) - (4 * n - 6) * rho)
    q_diff = -((n - 1) - (4 * n - 6) * pr * (1 - pr))
    Q = np.where(same, q_same[:, None], q_diff)
    cov = (n - 1) / n**3 * (np.diag(pv * rho * (1 + (n - 2) * rho)) + np.outer(pv, pv) * Q)
    return cov if advantage == "mean" else cov * n**2 / (n - 1) ** 2


def softmax_update_mean_expr() -> sp.Expr:
    """pi_a (r_a - p) (n - 1)/n (mean baseline, no std scaling)."""
    return pi_a * (r_a - p) * (n - 1) / n


def softmax_update_cov_expr() -> sp.Expr:
    """Cov(g_a, g_b) for the mean baseline, r_a, r_b in {0,1}, delta_ab = [a == b]."""
    rho = r_a * (1 - p) + (1 - r_a) * p
    same = r_a * r_b + (1 - r_a) * (1 - r_b)
    q = same * rho * ((n - 2) - (4 * n - 6) * rho) - (1 - same) * (
        (n - 1) - (4 * n - 6) * p * (1 - p))
    return (n - 1) / n**3 * (delta_ab * pi_a * rho * (1 + (n - 2) * rho) + pi_a * pi_b * q)


def softmax_update_cov_derived(ra: int, rb: int, same_arm: bool) -> sp.Expr:
    """Cov(g_a, g_b) (mean baseline) derived from binomial moments for fixed r_a, r_b.

    Uses E[N_a N_b | c] = m (m-1) q_a q_b + [a == b] m q_a inside a reward group of size m
    (c or n - c, with q = pi / P(group)) and c (n - c) q_a q_b across groups.
    """
    if same_arm and ra != rb:
        raise IsosimInputError("one arm has one reward")
    size_a = c if ra else n - c
    ga = p if ra else 1 - p
    gb = p if rb else 1 - p
    qa, qb = pi_a / ga, (pi_a if same_arm else pi_b) / gb
    h = {1: 1 - c / n, 0: -c / n}
    if ra == rb:
        eN = size_a * (size_a - 1) * qa * qb + (size_a * qa if same_arm else 0)
    else:
        eN = c * (n - c) * qa * qb
    second = expect_binomial(eN * h[ra] * h[rb]) / n**2
    mean_a = pi_a * (ra - p) * (n - 1) / n
    mean_b = (pi_a if same_arm else pi_b) * (rb - p) * (n - 1) / n
    return sp.factor(sp.cancel(sp.expand(second - mean_a * mean_b)))


# --------------------------------------------------------------------------- decoupled baseline
def decoupled_signal_expectation(n_est: int, n_train: int, p):
    """E[S] = n_train (n_est - 1)/n_est p (1-p) for baseline from n_est, update on n_train."""
    ne, nt = _decoupled_args(n_est, n_train)
    pr = as_prob(p)
    return nt * (ne - 1) / ne * pr * (1 - pr)


def decoupled_signal_variance(n_est: int, n_train: int, p):
    """Var[S] = n_train p q [(n_est-1)^2 - (4 n_est^2 - 9 n_est + 6 - n_train) p q] / n_est^2."""
    ne, nt = _decoupled_args(n_est, n_train)
    pr = as_prob(p)
    pq = pr * (1 - pr)
    return nt * pq * ((ne - 1) ** 2 - (4 * ne**2 - 9 * ne + 6 - nt) * pq) / ne**2


def _decoupled_args(ne, nt):
    ne = as_count(ne, "n_est", 1)
    nt = as_count(nt, "n_train", 1)
    if nt > ne:
        raise IsosimInputError(f"n_train ({nt}) cannot exceed n_est ({ne})")
    return ne, nt


def _decoupled_signal_poly() -> sp.Expr:
    base = (c_train + c_rest) / n_est
    return c_train * (1 - base) * (1 - p) + (n_train - c_train) * base * p


def decoupled_signal_expectation_expr() -> sp.Expr:
    """n_train (n_est - 1)/n_est p (1 - p)."""
    return n_train * (n_est - 1) / n_est * p * (1 - p)


def decoupled_signal_variance_expr() -> sp.Expr:
    """n_train p q [(n_est-1)^2 - (4 n_est^2 - 9 n_est + 6 - n_train) p q] / n_est^2."""
    pq = p * (1 - p)
    return n_train * pq * ((n_est - 1) ** 2 - (4 * n_est**2 - 9 * n_est + 6 - n_train) * pq) / (
        n_est**2)


@functools.lru_cache(maxsize=None)
def decoupled_signal_moments_derived() -> tuple[sp.Expr, sp.Expr]:
    """(E[S], Var[S]) of the decoupled signal derived from independent binomial moments."""
    s = _decoupled_signal_poly()

    def expect(e):
        inner = expect_binomial(e, c_train, n_train, p)
        return expect_binomial(inner, c_rest, n_est - n_train, p)

    m1 = sp.factor(expect(s))
    return m1, sp.factor(sp.expand(expect(sp.expand(s**2)) - m1**2))


# --------------------------------------------------------------------------- registry
_S = "The GRPO update on one problem"
_ADV_NOTE = {
    "mean": "Mean baseline $A_j = r_j - c/n$, no std scaling.",
    "std": ("Std scaling with the population std $\\sqrt{c(n-c)}/n$ and $\\epsilon = 0$; "
            "zero when $c \\in \\{0, n\\}$."),
    "rloo": "Leave-one-out baseline $A_j = r_j - (c - r_j)/(n-1)$.",
}
for _adv in ADVANTAGES:
    register(ClosedForm(
        f"grpo_signal_{_adv}", _S, f"Summed logit signal, {_adv} advantage",
        rf"S_{{\mathrm{{{_adv}}}}}(c)", (c, n),
        functools.partial(grpo_signal_expr, _adv),
        functools.partial(lambda a_, c_, n_: grpo_signal(c_, n_, a_), _adv),
        note=_ADV_NOTE[_adv] + " $S = \\sum_j A_j\\, \\partial \\log\\pi(y_j)/\\partial z$ "
        "with $\\partial \\log\\pi(y)/\\partial z = r - p$.",
    ))
    register(ClosedForm(
        f"grpo_signal_{_adv}_expectation", _S, f"E[S], {_adv} advantage",
        rf"E[S_{{\mathrm{{{_adv}}}}}]", (n, p),
        functools.partial(grpo_signal_expectation_expr, _adv),
        functools.partial(lambda a_, n_, p_: grpo_signal_expectation(n_, p_, a_), _adv),
        note=("No closed form: the exact sum over the binomial pmf." if _adv == "std" else
              "From $E[c(n-c)] = n(n-1)p(1-p)$."),
    ))
    register(ClosedForm(
        f"grpo_signal_{_adv}_variance", _S, f"Var[S], {_adv} advantage",
        rf"\mathrm{{Var}}[S_{{\mathrm{{{_adv}}}}}]", (n, p),
        functools.partial(grpo_signal_variance_expr, _adv),
        functools.partial(lambda a_, n_, p_: grpo_signal_variance(n_, p_, a_), _adv),
        note=("$E[S^2] = E[c(n-c)] = n(n-1)p(1-p)$ exactly." if _adv == "std" else
              "From the binomial moments $E[c^r] = \\sum_j S(r,j)\\, n^{\\underline{j}} p^j$, "
              "$r \\le 4$."),
    ))

_SK = "K-arm softmax"
register(ClosedForm(
    "softmax_update_mean", _SK, "Expected per-logit update, mean baseline",
    r"E[g_a]", (pi_a, r_a, p, n), softmax_update_mean_expr,
    lambda pa, ra, p_, n_: pa * (ra - p_) * (n_ - 1) / n_,
    note=("$g = \\frac1n\\sum_j A_j (e_{y_j} - \\pi)$, $p = \\sum_a \\pi_a r_a$. In general "
          "$E[g_a] = \\pi_a (r_a - p)\\, E[S]/(n p (1-p))$ with $S$ the 2-outcome signal "
          "(condition on $c$: the arm counts are multinomial within each reward group)."),
))
register(ClosedForm(
    "softmax_update_cov", _SK, "Covariance of the per-logit update, mean baseline",
    r"\mathrm{Cov}(g_a, g_b)", (pi_a, pi_b, r_a, r_b, delta_ab, p, n), softmax_update_cov_expr,
    lambda pa, pb, ra, rb, d, p_, n_: _cov_scalar(pa, pb, ra, rb, d, p_, n_),
    display=lambda: _cov_display(),
    note=("$r_a, r_b \\in \\{0,1\\}$, $\\delta_{ab} = [a = b]$. Rows sum to zero "
          "($\\sum_a g_a = 0$). RLOO multiplies the covariance by $n^2/(n-1)^2$; with std "
          "scaling the covariance is the exact sum over $c$ "
          "(`softmax_update_moments`)."),
))

_SD = "Decoupled baseline"
register(ClosedForm(
    "decoupled_signal_expectation", _SD, "E[S], baseline from n_est, update on n_train",
    r"E[S_{\mathrm{dec}}]", (n_est, n_train, p), decoupled_signal_expectation_expr,
    decoupled_signal_expectation,
    note=("$b = c_{est}/n_{est}$, $S = \\sum_{j \\in \\mathrm{train}} (r_j - b)(r_j - p)$ "
          "over a random subset of $n_{train}$ of the $n_{est}$ rollouts."),
))
register(ClosedForm(
    "decoupled_signal_variance", _SD, "Var[S], baseline from n_est, update on n_train",
    r"\mathrm{Var}[S_{\mathrm{dec}}]", (n_est, n_train, p), decoupled_signal_variance_expr,
    decoupled_signal_variance,
    note=("$c_{train} \\sim \\mathrm{Bin}(n_{train}, p)$ and "
          "$c_{rest} \\sim \\mathrm{Bin}(n_{est} - n_{train}, p)$ independent; equals the "
          "mean-baseline variance at $n_{train} = n_{est}$."),
))


def _cov_scalar(pa, pb, ra, rb, d, p_, n_):
    rho = ra * (1 - p_) + (1 - ra) * p_
    same = ra * rb + (1 - ra) * (1 - rb)
    q = same * rho * ((n_ - 2) - (4 * n_ - 6) * rho) - (1 - same) * (
        (n_ - 1) - (4 * n_ - 6) * p_ * (1 - p_))
    return (n_ - 1) / n_**3 * (d * pa * rho * (1 + (n_ - 2) * rho) + pa * pb * q)


def _cov_display() -> str:
    """Readable LaTeX of the mean-baseline covariance in terms of rho_a and Q_ab."""
    rho, q = sp.Symbol("rho_a"), sp.Symbol("Q_ab")
    cov = (n - 1) / n**3 * (delta_ab * pi_a * rho * (1 + (n - 2) * rho) + pi_a * pi_b * q)
    q_cases = sp.Piecewise((rho * ((n - 2) - (4 * n - 6) * rho), sp.Eq(r_a, r_b)),
                           (-((n - 1) - (4 * n - 6) * p * (1 - p)), True))
    return (r"\mathrm{Cov}(g_a, g_b) = " + sp.latex(cov) + r",\quad "
            + r"\rho_a = " + sp.latex(r_a * (1 - p) + (1 - r_a) * p) + r",\quad "
            + r"Q_{ab} = " + sp.latex(q_cases))
