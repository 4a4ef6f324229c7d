"""Validation metrics from a pass rate, their unbiased estimators, and Beta populations.

For one problem with pass rate p and k independent samples:

* avg@k   = p
* pass@k  = best@k = 1 - (1 - p)^k       (at least one of k correct: coverage)
* worst@k = p^k                          (all k correct: sharpening)

From c correct out of m >= k samples (sampling k of the m without replacement):

* pass@k estimate  = 1 - C(m - c, k) / C(m, k) = 1 - prod_{j<k} (m - c - j) / (m - j)
* worst@k estimate = C(c, k) / C(m, k)         = prod_{j<k} (c - j) / (m - j)

Both are unbiased: sum_c C(m, c) p^c (1-p)^(m-c) estimate(c) equals the exact metric.

For a population of pass rates p ~ Beta(a, b):

* 1 - pass@k = E[(1 - p)^k] = B(a, b + k) / B(a, b) ~ Gamma(a + b) / Gamma(b) k^(-a)  (k -> inf)
* worst@k    = E[p^k]       = B(a + k, b) / B(a, b)
"""
from __future__ import annotations

import numpy as np
import scipy.special as sps
import sympy as sp

from ..errors import IsosimInputError
from ..sim import metrics
from ._core import ClosedForm, a, as_count, as_prob, b, c, k, m, p, register

# --------------------------------------------------------------------------- exact metrics


def pass_at_k(p, k: int):
    """pass@k = 1 - (1 - p)^k (computed as -expm1(k log1p(-p)))."""
    return metrics.exact_metric(as_prob(p), "best", k)


def worst_at_k(p, k: int):
    """worst@k = p^k."""
    return metrics.exact_metric(as_prob(p), "worst", k)


def avg_at_k(p, k: int = 1):
    """avg@k = p for every k (the mean of k Bernoulli(p) outcomes)."""
    return as_prob(p) * 1.0


def pass_at_k_expr() -> sp.Expr:
    """1 - (1 - p)^k."""
    return 1 - (1 - p) ** k


def worst_at_k_expr() -> sp.Expr:
    """p^k."""
    return p**k


def avg_at_k_expr() -> sp.Expr:
    """E[(1/k) sum_j r_j] = p."""
    return p


# --------------------------------------------------------------------------- estimators


def _estimator_args(c, m, k):
    m = as_count(m, "m", 1)
    k = as_count(k, "k", 1)
    if k > m:
        raise IsosimInputError(f"an @{k} estimate needs at least {k} samples, got m={m}")
    cc = np.asarray(c, dtype=float)
    if np.any(cc < 0) or np.any(cc > m) or np.any(cc != np.round(cc)):
        raise IsosimInputError(f"c must be an integer count in [0, {m}]")
    return cc, m, k


def pass_at_k_unbiased(c, m: int, k: int):
    """Unbiased pass@k from c of m correct: 1 - prod_{j<k} (m - c - j)/(m - j)."""
    cc, m, k = _estimator_args(c, m, k)
    return metrics.pass_at_k_unbiased(cc.astype(np.int64), m, k)


def worst_at_k_unbiased(c, m: int, k: int):
    """Unbiased worst@k from c of m correct: prod_{j<k} (c - j)/(m - j)."""
    cc, m, k = _estimator_args(c, m, k)
    return metrics.worst_at_k_unbiased(cc.astype(np.int64), m, k)


def pass_at_k_unbiased_expr() -> sp.Expr:
    """1 - C(m - c, k) / C(m, k)."""
    return 1 - sp.binomial(m - c, k) / sp.binomial(m, k)


def worst_at_k_unbiased_expr() -> sp.Expr:
    """C(c, k) / C(m, k)."""
    return sp.binomial(c, k) / sp.binomial(m, k)


# --------------------------------------------------------------------------- Beta populations


def _beta_args(a, b):
    aa = np.asarray(a, dtype=float)
    bb = np.asarray(b, dtype=float)
    if np.any(~(aa > 0)) or np.any(~(bb > 0)):
        raise IsosimInputError("Beta parameters a and b must be > 0")
    return aa, bb


def beta_pass_at_k(a, b, k):
    """Population pass@k for p ~ Beta(a, b): 1 - B(a, b + k) / B(a, b)."""
    aa, bb = _beta_args(a, b)
    return -np.expm1(sps.betaln(aa, bb + k) - sps.betaln(aa, bb))


def beta_fail_at_k(a, b, k):
    """1 - pass@k for p ~ Beta(a, b): E[(1 - p)^k] = B(a, b + k) / B(a, b)."""
    aa, bb = _beta_args(a, b)
    return np.exp(sps.betaln(aa, bb + k) - sps.betaln(aa, bb))


def beta_fail_at_k_tail(a, b, k):
    """Large-k tail of 1 - pass@k: Gamma(a + b) / Gamma(b) * k^(-a)."""
    aa, bb = _beta_args(a, b)
    return np.exp(sps.gammaln(aa + bb) - sps.gammaln(bb) - aa * np.log(np.asarray(k, float)))


def beta_worst_at_k(a, b, k):
    """Population worst@k for p ~ Beta(a, b): E[p^k] = B(a + k, b) / B(a, b)."""
    aa, bb = _beta_args(a, b)
    return np.exp(sps.betaln(aa + k, bb) - sps.betaln(aa, bb))


def beta_pass_at_k_expr() -> sp.Expr:
    """1 - B(a, b + k) / B(a, b)."""
    return 1 - sp.beta(a, b + k) / sp.beta(a, b)


def beta_fail_at_k_expr() -> sp.Expr:
    """B(a, b + k) / B(a, b)."""
    return sp.beta(a, b + k) / sp.beta(a, b)


def beta_fail_at_k_tail_expr() -> sp.Expr:
    """Gamma(a + b) / Gamma(b) * k^(-a)."""
    return sp.gamma(a + b) / sp.gamma(b) * k ** (-a)


def beta_worst_at_k_expr() -> sp.Expr:
    """B(a + k, b) / B(a, b)."""
    return sp.beta(a + k, b) / sp.beta(a, b)


# --------------------------------------------------------------------------- registry
_S = "Metrics and estimators"
_SB = "Beta pass-rate populations"
register(ClosedForm(
    "pass_at_k", _S, "pass@k (best@k, coverage)", r"\mathrm{pass@}k(p)", (p, k),
    pass_at_k_expr, pass_at_k,
    note="Probability that at least one of $k$ independent samples is correct.",
))
register(ClosedForm(
    "worst_at_k", _S, "worst@k (sharpening)", r"\mathrm{worst@}k(p)", (p, k),
    worst_at_k_expr, worst_at_k,
    note="Probability that all $k$ samples are correct.",
))
register(ClosedForm(
    "avg_at_k", _S, "avg@k", r"\mathrm{avg@}k(p)", (p, k),
    lambda: avg_at_k_expr() + 0 * k, avg_at_k,
    note="Mean pass rate; independent of $k$.",
))
register(ClosedForm(
    "pass_at_k_unbiased", _S, "Unbiased pass@k estimator", r"\widehat{\mathrm{pass@}k}(c; m)",
    (c, m, k), pass_at_k_unbiased_expr, pass_at_k_unbiased,
    note=("From $c$ correct of $m \\ge k$ samples; computed as "
          "$1 - \\prod_{j=0}^{k-1} (m-c-j)/(m-j)$, which avoids large binomials. "
          "Unbiased: $\\sum_c \\binom{m}{c} p^c (1-p)^{m-c}\\,\\widehat{\\mathrm{pass@}k}(c) "
          "= 1-(1-p)^k$."),
))
register(ClosedForm(
    "worst_at_k_unbiased", _S, "Unbiased worst@k estimator", r"\widehat{\mathrm{worst@}k}(c; m)",
    (c, m, k), worst_at_k_unbiased_expr, worst_at_k_unbiased,
    note=("Computed as $\\prod_{j=0}^{k-1} (c-j)/(m-j)$ (zero when $c < k$); "
          "unbiased for $p^k$."),
))
register(ClosedForm(
    "beta_fail_at_k", _SB, "1 - pass@k of a Beta(a, b) population",
    r"1 - \mathrm{pass@}k", (a, b, k), beta_fail_at_k_expr, beta_fail_at_k,
    note=("With $p \\sim \\mathrm{Beta}(a, b)$, $E[(1-p)^k] = B(a, b+k)/B(a, b)$ "
          "(integrate $(1-p)^k$ against the Beta density)."),
))
register(ClosedForm(
    "beta_pass_at_k", _SB, "pass@k of a Beta(a, b) population", r"\mathrm{pass@}k",
    (a, b, k), beta_pass_at_k_expr, beta_pass_at_k,
))
register(ClosedForm(
    "beta_fail_at_k_tail", _SB, "k^(-a) tail of 1 - pass@k",
    r"1 - \mathrm{pass@}k", (a, b, k), beta_fail_at_k_tail_expr, beta_fail_at_k_tail,
    note=("$B(a, b+k)/B(a,b) = \\frac{\\Gamma(a+b)}{\\Gamma(b)}"
          "\\frac{\\Gamma(b+k)}{\\Gamma(a+b+k)}$ and "
          "$\\Gamma(b+k)/\\Gamma(a+b+k) \\sim k^{-a}$, so 1 - pass@k is a power law in $k$ "
          "with exponent $a$ (the mass of the Beta density near $p = 0$); the relative "
          "error is $O(1/k)$."),
    relation=r"\sim",
))
register(ClosedForm(
    "beta_worst_at_k", _SB, "worst@k of a Beta(a, b) population", r"\mathrm{worst@}k",
    (a, b, k), beta_worst_at_k_expr, beta_worst_at_k,
    note="$E[p^k] = B(a+k, b)/B(a, b)$.",
))
