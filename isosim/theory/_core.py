"""Shared machinery of the theory layer: symbols, the closed-form registry, binomial moments.

Every closed form is a :class:`ClosedForm`: a sympy expression builder (``build``), the
ordered symbols it is a function of (``args``), a direct numpy implementation
(``numeric``) and a short statement of the math (``note``). ``expr()``, ``latex()`` and
``lambdified()`` derive the rest; the three evaluations (symbolic, lambdified, numpy) are
checked against each other in the tests.

Binomial moments: for c ~ Binomial(n, p), E[c^r] = sum_j S(r, j) n^(j) p^j, with S the
Stirling numbers of the second kind and n^(j) = n (n-1) ... (n-j+1) the falling factorial
(the j-th factorial moment of c is n^(j) p^j). ``expect_binomial`` uses this to take exact
expectations of polynomials in c with symbolic n and p.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.special as sps
import sympy as sp
from sympy.functions.combinatorial.numbers import stirling

from ..errors import IsosimInputError

# --------------------------------------------------------------------------- symbols
p = sp.Symbol("p", nonnegative=True)  # pass rate / success probability
p0 = sp.Symbol("p_0", positive=True)  # reference-policy pass rate
n = sp.Symbol("n", integer=True, positive=True)  # group size (rollouts per problem)
k = sp.Symbol("k", integer=True, positive=True)  # samples per metric
m = sp.Symbol("m", integer=True, positive=True)  # samples behind an estimator
c = sp.Symbol("c", integer=True, nonnegative=True)  # successes in a group
a = sp.Symbol("a", positive=True)  # Beta(a, b) population
b = sp.Symbol("b", positive=True)
beta = sp.Symbol("beta", positive=True)  # KL coefficient
eps = sp.Symbol("epsilon", nonnegative=True)  # std stabiliser
eta = sp.Symbol("eta", positive=True)  # step size
t = sp.Symbol("t", positive=True)  # update steps
z = sp.Symbol("z", real=True)  # logit of the pass rate
z0 = sp.Symbol("z_0", real=True)
C = sp.Symbol("C", positive=True)  # compute in rollouts
gamma_lr = sp.Symbol("gamma", nonnegative=True)  # step-size exponent eta(n) = eta n^gamma
n_est = sp.Symbol("n_est", integer=True, positive=True)
n_train = sp.Symbol("n_train", integer=True, positive=True)
c_train = sp.Symbol("c_train", integer=True, nonnegative=True)
c_rest = sp.Symbol("c_rest", integer=True, nonnegative=True)
pi_a = sp.Symbol("pi_a", nonnegative=True)
pi_b = sp.Symbol("pi_b", nonnegative=True)
r_a = sp.Symbol("r_a", nonnegative=True)  # rewards in {0, 1}
r_b = sp.Symbol("r_b", nonnegative=True)
delta_ab = sp.Symbol("delta_ab", nonnegative=True)  # Kronecker delta [a == b]
B_problem = sp.Symbol("B_problem", integer=True, positive=True)
P = sp.IndexedBase("p")  # per-problem pass rates p_i
i = sp.Symbol("i", integer=True, nonnegative=True)

#: module map for lambdify: binomial -> scipy.special.binom (no gamma-ratio poles)
LAMBDIFY_MODULES = [{"binomial": sps.binom, "beta": sps.beta}, "scipy", "numpy"]


# --------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class ClosedForm:
    """One closed form: ``lhs = build()`` as a function of ``args``.

    ``numeric(*values)`` is the direct numpy implementation with the same argument order
    as ``args`` (vectorised where the math allows).
    """

    name: str
    section: str
    title: str
    lhs: str  # LaTeX of the left-hand side
    args: tuple[sp.Symbol, ...]
    build: Callable[[], sp.Expr]
    numeric: Callable[..., object]
    note: str = ""
    relation: str = "="  # LaTeX relation between lhs and the expression (=, \sim, \approx)
    display: Callable[[], str] | None = None  # optional readable LaTeX for the document

    def expr(self) -> sp.Expr:
        """The symbolic expression (built once, cached)."""
        return _expr_cached(self.name)

    def latex(self) -> str:
        """``lhs = <expression>`` in LaTeX (``sympy.latex`` of ``expr()``)."""
        return f"{self.lhs} {self.relation} {sp.latex(self.expr())}"

    def display_latex(self) -> str:
        """The LaTeX shown in the document: ``display()`` if given, else ``latex()``."""
        return self.display() if self.display is not None else self.latex()

    def lambdified(self) -> Callable[..., object]:
        """The symbolic expression compiled by ``sympy.lambdify`` (numpy/scipy backend)."""
        return _lambdified_cached(self.name)

    def evaluate(self, *values) -> float:
        """Exact symbolic evaluation at numeric ``values`` (substitute, ``doit``, ``evalf``)."""
        subs = {s: sp.nsimplify(v) if isinstance(v, (int, np.integer)) else v
                for s, v in zip(self.args, values)}
        return float(sp.N(self.expr().subs(subs).doit(), 30))


REGISTRY: dict[str, ClosedForm] = {}


def register(form: ClosedForm) -> ClosedForm:
    if form.name in REGISTRY:
        raise ValueError(f"closed form {form.name!r} registered twice")
    REGISTRY[form.name] = form
    return form


def closed_form(name: str) -> ClosedForm:
    """The registered :class:`ClosedForm` called ``name`` (see ``closed_forms()``)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise IsosimInputError(
            f"unknown closed form {name!r}; known: {', '.join(sorted(REGISTRY))}"
        ) from None


def closed_forms() -> list[str]:
    """Names of all registered closed forms, in registration order."""
    return list(REGISTRY)


@functools.lru_cache(maxsize=None)
def _expr_cached(name: str) -> sp.Expr:
    return REGISTRY[name].build()


@functools.lru_cache(maxsize=None)
def _lambdified_cached(name: str):
    form = REGISTRY[name]
    return sp.lambdify(form.args, form.expr(), modules=LAMBDIFY_MODULES)


# --------------------------------------------------------------------------- binomial moments
def falling(x, j: int):
    """Falling factorial x (x-1) ... (x-j+1) (1 for j = 0)."""
    return sp.Mul(*[x - q for q in range(j)])


def binomial_raw_moment(r: int, N=n, prob=p) -> sp.Expr:
    """E[c^r] for c ~ Binomial(N, prob): sum_j S(r, j) N^(j) prob^j."""
    return sp.Add(*[stirling(r, j) * falling(N, j) * prob**j for j in range(r + 1)])


def expect_binomial(expr, var=c, N=n, prob=p) -> sp.Expr:
    """Exact E[expr] over var ~ Binomial(N, prob), for ``expr`` polynomial in ``var``."""
    poly = sp.Poly(sp.expand(expr), var)
    return sp.Add(*[coef * binomial_raw_moment(deg[0], N, prob) for deg, coef in poly.terms()])


def binomial_pmf_sum(expr, var=c, N=n, prob=p, lo=0, hi=None) -> sp.Sum:
    """The exact sum sum_{var=lo}^{hi} C(N, var) prob^var (1-prob)^(N-var) expr (no closed form)."""
    hi = N if hi is None else hi
    pmf = sp.binomial(N, var) * prob**var * (1 - prob) ** (N - var)
    return sp.Sum(pmf * expr, (var, lo, hi))


# --------------------------------------------------------------------------- numeric helpers
def as_prob(x, what: str = "p") -> np.ndarray:
    """``x`` as a float array in [0, 1]; IsosimInputError otherwise."""
    arr = np.asarray(x, dtype=float)
    if np.any(~np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
        raise IsosimInputError(f"{what} must lie in [0, 1]")
    return arr


def as_count(x, what: str, minimum: int = 0) -> int:
    """``x`` as a Python int >= minimum; IsosimInputError otherwise."""
    try:
        v = int(x)
    except (TypeError, ValueError):
        raise IsosimInputError(f"{what} must be an integer, got {x!r}") from None
    if v != x or v < minimum:
        raise IsosimInputError(f"{what} must be an integer >= {minimum}, got {x!r}")
    return v


def binomial_pmf_matrix(N: int, prob) -> tuple[np.ndarray, np.ndarray]:
    """(cs, pmf) with cs = 0..N and pmf[..., c] = P(Binomial(N, prob) = c), any prob shape."""
    cs = np.arange(N + 1)
    pr = np.clip(np.asarray(prob, dtype=float), 0.0, 1.0)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = np.where(cs > 0, cs * np.log(np.where(pr > 0, pr, 1.0)), 0.0)
        logq = np.where(N - cs > 0, (N - cs) * np.log1p(-np.where(pr < 1, pr, 0.0)), 0.0)
    pmf = np.exp(sps.gammaln(N + 1) - sps.gammaln(cs + 1) - sps.gammaln(N - cs + 1) + logp + logq)
    pmf = np.where((pr == 0) & (cs > 0), 0.0, pmf)
    pmf = np.where((pr == 1) & (cs < N), 0.0, pmf)
    return cs, pmf
