"""When does a GRPO group carry signal?

A group of n rollouts on a problem with pass rate p has c ~ Binomial(n, p) successes. With a
group-mean baseline every advantage is zero when c = 0 or c = n, so

* P(non-zero signal) = 1 - p^n - (1 - p)^n
* expected informative problems in a batch with pass rates p_1..p_B:
  sum_i (1 - p_i^n - (1 - p_i)^n)
* for p ~ Beta(a, b): E[1 - p^n - (1-p)^n] = 1 - B(a + n, b)/B(a, b) - B(a, b + n)/B(a, b),
  and a batch of B_problem problems drawn from it has B_problem times that in expectation.
"""
from __future__ import annotations

import numpy as np
import scipy.special as sps
import sympy as sp

from ..errors import IsosimInputError
from ._core import B_problem, ClosedForm, P, a, as_count, as_prob, b, i, n, p, register


def nonzero_signal_prob(p, n: int):
    """P(0 < c < n) for c ~ Binomial(n, p): 1 - p^n - (1 - p)^n."""
    pr = as_prob(p)
    with np.errstate(divide="ignore"):
        return np.clip(-np.expm1(n * np.log1p(-pr)) - pr**n, 0.0, 1.0)


def expected_informative(pass_rates, n: int) -> float:
    """Expected number of problems with non-zero signal: sum_i (1 - p_i^n - (1 - p_i)^n)."""
    pr = as_prob(pass_rates, "pass rates")
    if pr.ndim != 1:
        raise IsosimInputError("pass rates must be a 1-D sequence")
    return float(np.sum(nonzero_signal_prob(pr, n)))


def beta_nonzero_signal_prob(a, b, n):
    """E over p ~ Beta(a, b) of 1 - p^n - (1-p)^n = 1 - B(a+n, b)/B(a, b) - B(a, b+n)/B(a, b)."""
    aa = np.asarray(a, dtype=float)
    bb = np.asarray(b, dtype=float)
    if np.any(~(aa > 0)) or np.any(~(bb > 0)):
        raise IsosimInputError("Beta parameters a and b must be > 0")
    base = sps.betaln(aa, bb)
    v = 1.0 - np.exp(sps.betaln(aa + n, bb) - base) - np.exp(sps.betaln(aa, bb + n) - base)
    return np.clip(v, 0.0, 1.0)


def beta_expected_informative(a, b, n, batch: int):
    """Expected informative problems among ``batch`` drawn from Beta(a, b): batch * the above."""
    batch = as_count(batch, "batch", 1)
    return batch * beta_nonzero_signal_prob(a, b, n)


def nonzero_signal_prob_expr() -> sp.Expr:
    """1 - p^n - (1 - p)^n."""
    return 1 - p**n - (1 - p) ** n


def expected_informative_expr() -> sp.Expr:
    """sum_{i=0}^{B_problem - 1} (1 - p_i^n - (1 - p_i)^n)."""
    return sp.Sum(1 - P[i] ** n - (1 - P[i]) ** n, (i, 0, B_problem - 1))


def beta_nonzero_signal_prob_expr() -> sp.Expr:
    """1 - B(a + n, b)/B(a, b) - B(a, b + n)/B(a, b)."""
    return 1 - sp.beta(a + n, b) / sp.beta(a, b) - sp.beta(a, b + n) / sp.beta(a, b)


def beta_expected_informative_expr() -> sp.Expr:
    """B_problem (1 - B(a + n, b)/B(a, b) - B(a, b + n)/B(a, b))."""
    return B_problem * beta_nonzero_signal_prob_expr()


_S = "Zero-signal groups"
register(ClosedForm(
    "nonzero_signal_prob", _S, "Probability that a group has non-zero signal",
    r"P(0 < c < n)", (p, n), nonzero_signal_prob_expr, nonzero_signal_prob,
    note=("With a group-mean baseline all advantages vanish when the group is all-correct "
          "($c = n$, probability $p^n$) or all-wrong ($c = 0$, probability $(1-p)^n$)."),
))
register(ClosedForm(
    "expected_informative", _S, "Expected informative problems in a batch",
    r"E[\#\{i : 0 < c_i < n\}]", (P, B_problem, n), expected_informative_expr,
    lambda pr, B, n_: expected_informative(np.asarray(pr)[:B], n_),
    note="Linearity of expectation over the $B_{problem}$ problems of a batch.",
))
register(ClosedForm(
    "beta_nonzero_signal_prob", _S, "Non-zero signal probability, Beta(a, b) population",
    r"E_{p \sim \mathrm{Beta}(a,b)}[1 - p^n - (1-p)^n]", (a, b, n),
    beta_nonzero_signal_prob_expr, beta_nonzero_signal_prob,
    note="$E[p^n] = B(a+n, b)/B(a,b)$ and $E[(1-p)^n] = B(a, b+n)/B(a,b)$.",
))
register(ClosedForm(
    "beta_expected_informative", _S, "Expected informative problems, Beta(a, b) batch",
    r"E[\#\mathrm{informative}]", (a, b, n, B_problem),
    beta_expected_informative_expr, beta_expected_informative,
))
