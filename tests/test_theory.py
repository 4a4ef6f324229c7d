"""Tests of isosim.theory: every closed form symbolic == lambdified == numpy, its properties
(hypothesis), and a Monte Carlo check with a fixed seed and a tolerance of 5 standard errors.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.special as sps
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from isosim import theory as th
from isosim.errors import IsosimInputError
from isosim.theory import _core, amplification, grpo, tabular

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
K_SE = 5.0  # Monte Carlo tolerance in standard errors


def assert_mc_mean(samples, expected, k_se=K_SE, floor=1e-12):
    """|mean(samples) - expected| <= k_se standard errors (+ floor for exact zeros)."""
    x = np.asarray(samples, dtype=float)
    se = x.std(ddof=1) / math.sqrt(x.size)
    assert abs(x.mean() - expected) <= k_se * se + floor, (x.mean(), expected, se)


def assert_mc_var(samples, expected, k_se=K_SE, floor=1e-12):
    """Sample variance within k_se standard errors: SE^2 ~ (mu4 - sigma^4)/R, plus the
    second-order term k_se^2 sigma^2 / R (the leading one vanishes for symmetric 2-point laws)."""
    x = np.asarray(samples, dtype=float)
    d = x - x.mean()
    s2 = np.mean(d**2)
    se = math.sqrt(max(np.mean(d**4) - s2**2, 0.0) / x.size)
    tol = k_se * se + k_se**2 * s2 / x.size + floor
    assert abs(x.var(ddof=1) - expected) <= tol, (x.var(ddof=1), expected, se)


# --------------------------------------------------------------------------- strategies
prob = st.floats(0.0, 1.0)
open_prob = st.floats(0.001, 0.999)
shape = st.floats(0.1, 10.0)
small_n = st.integers(2, 30)


@st.composite
def c_m_k(draw):
    m_ = draw(st.integers(1, 40))
    return draw(st.integers(0, m_)), m_, draw(st.integers(1, m_))


@st.composite
def c_n(draw):
    n_ = draw(st.integers(2, 60))
    return draw(st.integers(0, n_)), n_


@st.composite
def decoupled_args(draw):
    ne = draw(st.integers(1, 64))
    return ne, draw(st.integers(1, ne)), draw(prob)


@st.composite
def cov_args(draw):
    same = draw(st.booleans())
    ra = draw(st.sampled_from([0, 1]))
    rb = ra if same else draw(st.sampled_from([0, 1]))
    pa = draw(prob)
    pb = pa if same else draw(prob)
    return pa, pb, ra, rb, int(same), draw(prob), draw(small_n)


ARGS = {
    "pass_at_k": st.tuples(prob, st.integers(1, 50)),
    "worst_at_k": st.tuples(prob, st.integers(1, 50)),
    "avg_at_k": st.tuples(prob, st.integers(1, 50)),
    "pass_at_k_unbiased": c_m_k(),
    "worst_at_k_unbiased": c_m_k(),
    "beta_fail_at_k": st.tuples(shape, shape, st.integers(1, 300)),
    "beta_pass_at_k": st.tuples(shape, shape, st.integers(1, 300)),
    "beta_fail_at_k_tail": st.tuples(shape, shape, st.integers(1, 300)),
    "beta_worst_at_k": st.tuples(shape, shape, st.integers(1, 300)),
    "nonzero_signal_prob": st.tuples(prob, st.integers(1, 200)),
    "expected_informative": st.tuples(st.lists(prob, min_size=1, max_size=8),
                                      st.integers(1, 100)),
    "beta_nonzero_signal_prob": st.tuples(shape, shape, st.integers(1, 100)),
    "beta_expected_informative": st.tuples(shape, shape, st.integers(1, 100),
                                           st.integers(1, 1024)),
    "grpo_signal_mean": c_n(),
    "grpo_signal_std": c_n(),
    "grpo_signal_rloo": c_n(),
    "grpo_signal_mean_expectation": st.tuples(small_n, prob),
    "grpo_signal_mean_variance": st.tuples(small_n, prob),
    "grpo_signal_std_expectation": st.tuples(small_n, prob),
    "grpo_signal_std_variance": st.tuples(small_n, prob),
    "grpo_signal_rloo_expectation": st.tuples(small_n, prob),
    "grpo_signal_rloo_variance": st.tuples(small_n, prob),
    "softmax_update_mean": st.tuples(prob, st.sampled_from([0, 1]), prob, small_n),
    "softmax_update_cov": cov_args(),
    "decoupled_signal_expectation": decoupled_args(),
    "decoupled_signal_variance": decoupled_args(),
    "tabular_drift": st.tuples(prob, small_n, st.floats(0.01, 5.0)),
    "tabular_step_variance": st.tuples(prob, small_n, st.floats(0.01, 5.0)),
    "tabular_ode_potential": st.tuples(st.floats(-20.0, 20.0)),
    "tabular_bound": st.tuples(small_n, st.floats(0.01, 5.0), st.floats(1.0, 1e6)),
    "tabular_fixed_compute": st.tuples(small_n, st.floats(0.01, 5.0), st.floats(100.0, 1e8)),
    "tabular_optimal_n": st.tuples(st.floats(0.0, 0.95)),
    "kl_regularised_optimum": st.tuples(open_prob, st.floats(0.05, 20.0)),
    "grpo_amplification_map": st.tuples(open_prob, open_prob, st.floats(0.2, 20.0),
                                        st.floats(0.0, 0.1)),
    "grpo_amplification_lower_bound": st.tuples(open_prob, st.floats(0.05, 20.0),
                                                st.floats(0.0, 0.1)),
}


def test_every_closed_form_has_a_strategy():
    assert set(ARGS) == set(th.closed_forms())


def _symbolic(form, args):
    if form.name == "expected_informative":
        ps, nn = args
        e = form.expr().subs({_core.B_problem: len(ps), _core.n: nn}).doit()
        return float(e.subs({_core.P[j]: sp.Float(v, 30) for j, v in enumerate(ps)}))
    return form.evaluate(*args)


@pytest.mark.parametrize("name", sorted(ARGS))
def test_symbolic_equals_lambdified_equals_numpy(name):
    form = th.closed_form(name)

    @FAST
    @given(ARGS[name])
    def check(args):
        if name == "expected_informative":
            call = (np.array(args[0]), len(args[0]), args[1])
        else:
            call = tuple(args)
        direct = float(np.asarray(form.numeric(*call)))
        lamb = float(np.asarray(form.lambdified()(*call)))
        sym = _symbolic(form, args)
        assert math.isclose(direct, lamb, rel_tol=1e-8, abs_tol=1e-11), (direct, lamb)
        assert math.isclose(direct, sym, rel_tol=1e-8, abs_tol=1e-11), (direct, sym)

    check()


def test_latex_is_sympy_latex():
    for name in th.closed_forms():
        form = th.closed_form(name)
        assert form.latex().endswith(sp.latex(form.expr()))
    with pytest.raises(IsosimInputError):
        th.closed_form("nope")


# --------------------------------------------------------------------------- metrics
@FAST
@given(prob, prob, st.integers(1, 40))
def test_metric_ranges_and_monotonicity(p1, p2, k):
    lo, hi = sorted((p1, p2))
    for f in (th.pass_at_k, th.worst_at_k):
        assert 0.0 <= f(lo, k) <= f(hi, k) <= 1.0
    assert th.worst_at_k(p1, k) <= th.avg_at_k(p1, k) + 1e-15 <= th.pass_at_k(p1, k) + 2e-15
    assert th.pass_at_k(p1, k + 1) >= th.pass_at_k(p1, k) - 1e-15
    assert th.worst_at_k(p1, k + 1) <= th.worst_at_k(p1, k) + 1e-15


@FAST
@given(st.integers(1, 30), st.data(), open_prob)
def test_estimators_are_unbiased_exactly(m_, data, p_):
    k_ = data.draw(st.integers(1, m_))
    cs = np.arange(m_ + 1)
    pmf = sps.comb(m_, cs) * p_**cs * (1 - p_) ** (m_ - cs)
    est_pass = th.pass_at_k_unbiased(cs, m_, k_)
    est_worst = th.worst_at_k_unbiased(cs, m_, k_)
    assert np.all((0 <= est_pass) & (est_pass <= 1)) and np.all(np.diff(est_pass) >= -1e-15)
    assert np.all((0 <= est_worst) & (est_worst <= 1)) and np.all(np.diff(est_worst) >= -1e-15)
    assert math.isclose(pmf @ est_pass, th.pass_at_k(p_, k_), rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(pmf @ est_worst, th.worst_at_k(p_, k_), rel_tol=1e-9, abs_tol=1e-12)


def test_estimator_stable_for_large_m():
    # C(10^6, 500) overflows a float; the product form does not
    v = th.pass_at_k_unbiased(1000, 10**6, 500)
    assert math.isclose(v, 1 - math.exp(sum(math.log1p(-1000 / (10**6 - j)) for j in range(500))),
                        rel_tol=1e-9)


def test_metrics_monte_carlo():
    rng = np.random.default_rng(1)
    for p_, k_ in ((0.05, 4), (0.3, 4), (0.7, 8)):
        r = rng.random((200_000, k_)) < p_
        assert_mc_mean(r.any(axis=1), th.pass_at_k(p_, k_))
        assert_mc_mean(r.all(axis=1), th.worst_at_k(p_, k_))
        assert_mc_mean(r.mean(axis=1), th.avg_at_k(p_, k_))


def test_estimators_monte_carlo():
    rng = np.random.default_rng(2)
    for p_, m_, k_ in ((0.1, 16, 4), (0.6, 16, 4), (0.3, 64, 8)):
        cs = rng.binomial(m_, p_, size=200_000)
        assert_mc_mean(th.pass_at_k_unbiased(cs, m_, k_), th.pass_at_k(p_, k_))
        assert_mc_mean(th.worst_at_k_unbiased(cs, m_, k_), th.worst_at_k(p_, k_))


def test_estimator_input_errors():
    with pytest.raises(IsosimInputError):
        th.pass_at_k_unbiased(3, 4, 5)
    with pytest.raises(IsosimInputError):
        th.worst_at_k_unbiased(5, 4, 2)
    with pytest.raises(IsosimInputError):
        th.pass_at_k(1.5, 2)


# --------------------------------------------------------------------------- Beta populations
@FAST
@given(shape, shape, st.integers(1, 500))
def test_beta_pass_at_k_properties(a_, b_, k_):
    f = th.beta_fail_at_k(a_, b_, k_)
    assert 0.0 < f < 1.0
    assert th.beta_fail_at_k(a_, b_, k_ + 1) < f
    assert math.isclose(th.beta_pass_at_k(a_, b_, k_), 1 - f, rel_tol=1e-12, abs_tol=1e-15)
    assert th.beta_worst_at_k(a_, b_, k_ + 1) < th.beta_worst_at_k(a_, b_, k_)
    # k = 1: 1 - pass@1 = 1 - E[p] = b / (a + b)
    assert math.isclose(th.beta_fail_at_k(a_, b_, 1), b_ / (a_ + b_), rel_tol=1e-10)


@FAST
@given(shape, shape)
def test_beta_tail_is_k_to_minus_a(a_, b_):
    # Gamma(b+k)/Gamma(a+b+k) = k^-a (1 - a (a + 2b - 1)/(2k) + O(k^-2))
    for k_ in (10**5, 10**7):
        ratio = th.beta_fail_at_k(a_, b_, k_) / th.beta_fail_at_k_tail(a_, b_, k_)
        assert abs(ratio - 1) <= (abs(a_ * (a_ + 2 * b_ - 1)) / 2 + 1) * 2 / k_
    # log-log slope between k and 10 k tends to -a
    k_ = 10**6
    slope = math.log10(th.beta_fail_at_k(a_, b_, 10 * k_) / th.beta_fail_at_k(a_, b_, k_))
    assert abs(slope + a_) < 1e-3 * (1 + a_ * (a_ + b_))


def test_beta_monte_carlo():
    rng = np.random.default_rng(3)
    for a_, b_ in ((0.5, 2.0), (2.0, 3.0)):
        ps = rng.beta(a_, b_, size=400_000)
        for k_ in (1, 4, 64):
            assert_mc_mean((1 - ps) ** k_, th.beta_fail_at_k(a_, b_, k_))
            assert_mc_mean(ps**k_, th.beta_worst_at_k(a_, b_, k_))
        # pass@k of the population as a sampled event: does one of k samples succeed?
        k_ = 4
        hit = (rng.random((200_000, k_)) < ps[:200_000, None]).any(axis=1)
        assert_mc_mean(hit, th.beta_pass_at_k(a_, b_, k_))


# --------------------------------------------------------------------------- zero signal
def test_nonzero_signal_reference_values():
    # the study's values (arXiv 2603.12151): p = 0.01 -> 0.077 (n=8), 0.474 (n=64); p = 0.05 -> 0.337, 0.962
    for p_, n_, ref in ((0.01, 8, 0.077), (0.01, 64, 0.474), (0.05, 8, 0.337), (0.05, 64, 0.962)):
        assert round(float(th.nonzero_signal_prob(p_, n_)), 3) == ref


def test_nonzero_signal_monte_carlo():
    rng = np.random.default_rng(4)
    for p_, n_ in ((0.01, 8), (0.01, 64), (0.05, 8), (0.05, 64), (0.5, 2)):
        cs = rng.binomial(n_, p_, size=400_000)
        assert_mc_mean((cs > 0) & (cs < n_), th.nonzero_signal_prob(p_, n_))


@FAST
@given(open_prob, st.integers(1, 300))
def test_nonzero_signal_properties(p_, n_):
    v = th.nonzero_signal_prob(p_, n_)
    assert 0.0 <= v <= 1.0
    assert math.isclose(v, th.nonzero_signal_prob(1 - p_, n_), abs_tol=1e-12)
    assert th.nonzero_signal_prob(p_, n_ + 1) >= v - 1e-15
    assert th.nonzero_signal_prob(p_, 1) == pytest.approx(0.0, abs=1e-15)


def test_expected_informative_monte_carlo():
    rng = np.random.default_rng(5)
    ps = np.array([0.0, 0.01, 0.05, 0.3, 0.5, 0.9, 1.0])
    for n_ in (8, 64):
        cs = rng.binomial(n_, ps, size=(100_000, ps.size))
        count = ((cs > 0) & (cs < n_)).sum(axis=1)
        assert_mc_mean(count, th.expected_informative(ps, n_))


def test_beta_nonzero_signal_monte_carlo():
    rng = np.random.default_rng(6)
    for a_, b_, n_ in ((0.3, 3.0, 8), (2.0, 2.0, 16)):
        ps = rng.beta(a_, b_, size=400_000)
        cs = rng.binomial(n_, ps)
        assert_mc_mean((cs > 0) & (cs < n_), th.beta_nonzero_signal_prob(a_, b_, n_))
        B = 32
        counts = ((cs > 0) & (cs < n_)).reshape(-1, B).sum(axis=1)
        assert_mc_mean(counts, th.beta_expected_informative(a_, b_, n_, B))


@FAST
@given(shape, shape, st.integers(1, 200))
def test_beta_nonzero_signal_properties(a_, b_, n_):
    v = th.beta_nonzero_signal_prob(a_, b_, n_)
    assert -1e-12 <= v <= 1.0
    assert th.beta_nonzero_signal_prob(a_, b_, n_ + 1) >= v - 1e-12


# --------------------------------------------------------------------------- GRPO, 2 outcomes
def test_grpo_moments_match_their_derivation():
    for adv in ("mean", "rloo"):
        m1, var = grpo.grpo_signal_moments_derived(adv)
        assert sp.simplify(m1 - grpo.grpo_signal_expectation_expr(adv)) == 0
        assert sp.simplify(var - grpo.grpo_signal_variance_expr(adv)) == 0
    # E[S_std^2] = E[c (n - c)] = n (n-1) p (1-p)
    e2 = sp.factor(_core.expect_binomial(_core.c * (_core.n - _core.c)))
    assert sp.simplify(e2 - _core.n * (_core.n - 1) * _core.p * (1 - _core.p)) == 0


@FAST
@given(st.integers(2, 200), prob)
def test_grpo_closed_forms_equal_exact_sums(n_, p_):
    for adv in grpo.ADVANTAGES:
        m_sum, v_sum = th.grpo_signal_moments(n_, p_, adv)
        assert math.isclose(th.grpo_signal_expectation(n_, p_, adv), m_sum, rel_tol=1e-9,
                            abs_tol=1e-10)
        assert math.isclose(th.grpo_signal_variance(n_, p_, adv), v_sum, rel_tol=1e-6,
                            abs_tol=1e-8 * n_**2)
        assert th.grpo_signal_variance(n_, p_, adv) >= 0
    # std scaling amplifies: sqrt(c (n - c)) >= c (n - c)/n
    assert th.grpo_signal_expectation(n_, p_, "std") >= th.grpo_signal_expectation(n_, p_) - 1e-12
    # E[S] is symmetric in p <-> 1 - p and maximal at p = 1/2
    for adv in grpo.ADVANTAGES:
        e = th.grpo_signal_expectation(n_, p_, adv)
        assert math.isclose(e, th.grpo_signal_expectation(n_, 1 - p_, adv), rel_tol=1e-9,
                            abs_tol=1e-12)
        assert e <= th.grpo_signal_expectation(n_, 0.5, adv) + 1e-12


def test_grpo_signal_monte_carlo():
    """Literal simulation: advantages from the group's rewards, S = sum_j A_j (r_j - p)."""
    rng = np.random.default_rng(7)
    for n_, p_ in ((2, 0.5), (8, 0.1), (8, 0.6), (32, 0.03)):
        r = (rng.random((200_000, n_)) < p_).astype(float)
        for adv in grpo.ADVANTAGES:
            s = np.sum(th.group_advantages(r, adv) * (r - p_), axis=1)
            assert_mc_mean(s, th.grpo_signal_expectation(n_, p_, adv))
            assert_mc_var(s, th.grpo_signal_variance(n_, p_, adv))
            cs = r.sum(axis=1)
            np.testing.assert_allclose(s, th.grpo_signal(cs, n_, adv), atol=1e-9)


# --------------------------------------------------------------------------- K-arm softmax
def test_karm_cov_matches_derivation():
    expr = grpo.softmax_update_cov_expr()
    for ra, rb, same in ((1, 1, True), (0, 0, True), (1, 1, False), (0, 0, False),
                         (1, 0, False), (0, 1, False)):
        derived = grpo.softmax_update_cov_derived(ra, rb, same)
        compact = expr.subs({_core.r_a: ra, _core.r_b: rb, _core.delta_ab: int(same)})
        if same:
            compact = compact.subs(_core.pi_b, _core.pi_a)
        assert sp.simplify(derived - compact) == 0, (ra, rb, same)


@st.composite
def karm(draw):
    K = draw(st.integers(2, 6))
    w = np.array(draw(st.lists(st.floats(0.01, 1.0), min_size=K, max_size=K)))
    r = np.array(draw(st.lists(st.sampled_from([0, 1]), min_size=K, max_size=K)))
    return w / w.sum(), r, draw(st.integers(2, 16))


@FAST
@given(karm())
def test_karm_closed_forms_equal_exact_sums(case):
    pi, r, n_ = case
    pr = min(float(pi @ r), 1.0)
    for adv in grpo.ADVANTAGES:
        mean, cov = th.softmax_update_moments(pi, r, n_, adv)
        np.testing.assert_allclose(th.softmax_update_mean(pi, r, n_, adv), mean, atol=1e-12)
        np.testing.assert_allclose(th.softmax_update_cov(pi, r, n_, adv), cov, atol=1e-12)
        np.testing.assert_allclose(cov.sum(axis=1), 0.0, atol=1e-12)  # sum_a g_a = 0
        assert np.linalg.eigvalsh(cov).min() >= -1e-12
        if 1e-6 < pr < 1 - 1e-6:  # E[g_a] = pi_a (r_a - p) E[S] / (n p (1-p))
            es = th.grpo_signal_expectation(n_, pr, adv)
            np.testing.assert_allclose(mean, pi * (r - pr) * es / (n_ * pr * (1 - pr)),
                                       atol=1e-12)
    np.testing.assert_allclose(th.softmax_update_mean(pi, r, n_),
                               pi * (r - pr) * (n_ - 1) / n_, atol=1e-15)


def test_karm_monte_carlo():
    """Literal simulation of g = (1/n) sum_j A_j (e_{y_j} - pi) with y_j ~ pi."""
    rng = np.random.default_rng(8)
    pi = np.array([0.1, 0.25, 0.05, 0.35, 0.25])
    r = np.array([1, 0, 1, 0, 0])
    R = 100_000
    for n_ in (4, 16):
        y = rng.choice(pi.size, p=pi, size=(R, n_))
        rew = r[y].astype(float)
        onehot = np.eye(pi.size)[y]  # (R, n, K)
        for adv in grpo.ADVANTAGES:
            A = th.group_advantages(rew, adv)
            g = np.einsum("rj,rjk->rk", A, onehot - pi) / n_
            mean = th.softmax_update_mean(pi, r, n_, adv)
            cov = th.softmax_update_cov(pi, r, n_, adv)
            for arm in range(pi.size):
                assert_mc_mean(g[:, arm], mean[arm])
                assert_mc_var(g[:, arm], cov[arm, arm])
            # one covariance, as the variance of a sum
            s = g[:, 0] + g[:, 1]
            assert_mc_var(s, cov[0, 0] + cov[1, 1] + 2 * cov[0, 1])


# --------------------------------------------------------------------------- decoupled baseline
def test_decoupled_matches_derivation_and_reduces_to_grpo():
    m1, var = grpo.decoupled_signal_moments_derived()
    assert sp.simplify(m1 - grpo.decoupled_signal_expectation_expr()) == 0
    assert sp.simplify(var - grpo.decoupled_signal_variance_expr()) == 0
    same = grpo.decoupled_signal_variance_expr().subs(
        {_core.n_est: _core.n, _core.n_train: _core.n})
    assert sp.simplify(same - grpo.grpo_signal_variance_expr("mean")) == 0


@FAST
@given(decoupled_args())
def test_decoupled_properties(args):
    ne, nt, p_ = args
    e = th.decoupled_signal_expectation(ne, nt, p_)
    v = th.decoupled_signal_variance(ne, nt, p_)
    assert v >= -1e-12 and 0 <= e <= nt * p_ * (1 - p_) + 1e-15
    # exact double sum over c_train ~ Bin(nt, p), c_rest ~ Bin(ne - nt, p)
    ct = np.arange(nt + 1)[:, None]
    cr = np.arange(ne - nt + 1)[None, :]
    w = (sps.comb(nt, ct) * p_**ct * (1 - p_) ** (nt - ct)
         * sps.comb(ne - nt, cr) * p_**cr * (1 - p_) ** (ne - nt - cr))
    b_ = (ct + cr) / ne
    s = ct * (1 - b_) * (1 - p_) + (nt - ct) * b_ * p_
    m_exact = np.sum(w * s)
    assert math.isclose(e, m_exact, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(v, np.sum(w * s * s) - m_exact**2, rel_tol=1e-7, abs_tol=1e-10)
    if nt == ne:
        assert math.isclose(v, th.grpo_signal_variance(ne, p_), rel_tol=1e-9, abs_tol=1e-12)
    # a larger baseline group raises the expected signal
    assert th.decoupled_signal_expectation(ne + 1, nt, p_) >= e


def test_decoupled_monte_carlo():
    """Baseline from n_est rollouts, update on a uniformly random subset of n_train."""
    rng = np.random.default_rng(9)
    for ne, nt, p_ in ((256, 64, 0.1), (16, 4, 0.5), (8, 8, 0.3)):
        R = min(200_000, 12_000_000 // ne)
        r = (rng.random((R, ne)) < p_).astype(float)
        b_ = r.mean(axis=1, keepdims=True)
        idx = np.argsort(rng.random((R, ne)), axis=1)[:, :nt]
        rt = np.take_along_axis(r, idx, axis=1)
        s = np.sum((rt - b_) * (rt - p_), axis=1)
        assert_mc_mean(s, th.decoupled_signal_expectation(ne, nt, p_))
        assert_mc_var(s, th.decoupled_signal_variance(ne, nt, p_))


# --------------------------------------------------------------------------- tabular bound
def _simulate_tabular(n_, eta_, T, R, seed, z0=0.0, checkpoints=()):
    """The recursion z <- z + eta c (n - c)/n^2, c ~ Bin(n, sigmoid(z)); E[1-p] at checkpoints."""
    rng = np.random.default_rng(seed)
    z_ = np.full(R, z0)
    out = {}
    for step in range(1, T + 1):
        cs = rng.binomial(n_, sps.expit(z_))
        z_ += eta_ * cs * (n_ - cs) / n_**2
        if step in checkpoints:
            out[step] = sps.expit(-z_)
    return out


def test_tabular_bound_monte_carlo():
    T = 3000
    for n_, eta_ in ((2, 1.0), (8, 1.0), (32, 0.5)):
        runs = _simulate_tabular(n_, eta_, T, 2000, seed=10 + n_, checkpoints={300, T})
        for step, u in runs.items():
            ode = float(th.tabular_ode_suboptimality(step, n_, eta_))
            # MC vs the mean-field ODE: 5 SE plus 2% for the O(1/t^2) noise corrections
            se = u.std(ddof=1) / math.sqrt(u.size)
            assert abs(u.mean() - ode) <= K_SE * se + 0.02 * ode, (n_, step, u.mean(), ode)
        u = runs[T]
        bound = float(th.tabular_suboptimality_bound(T, n_, eta_))
        A, B = th.tabular_bound_constants(n_, eta_)
        assert math.isclose(bound, A / (n_ * T) + B / T)
        # leading order: the O(log t) offset of e^z is ~ 2 log(eta' t)/(eta' t) relative
        rel = 2 * math.log(eta_ * T) / (eta_ * (n_ - 1) / n_ * T) + 0.02
        assert abs(u.mean() / bound - 1) <= rel, (n_, u.mean(), bound)


def test_tabular_one_step_drift_and_variance_monte_carlo():
    rng = np.random.default_rng(11)
    for p_, n_, eta_ in ((0.3, 4, 1.0), (0.9, 16, 0.5)):
        cs = rng.binomial(n_, p_, size=400_000)
        dz = eta_ * cs * (n_ - cs) / n_**2
        assert_mc_mean(dz, th.tabular_drift(p_, n_, eta_))
        assert_mc_var(dz, th.tabular_step_variance(p_, n_, eta_))


@FAST
@given(st.integers(2, 64), st.floats(0.05, 4.0), st.floats(-5.0, 5.0))
def test_tabular_ode_properties(n_, eta_, z0_):
    ts = np.array([0.0, 1.0, 10.0, 100.0, 1e6])
    u = th.tabular_ode_suboptimality(ts, n_, eta_, z0_)
    assert math.isclose(u[0], sps.expit(-z0_), rel_tol=1e-9)
    assert np.all(np.diff(u) < 0) and np.all((u > 0) & (u < 1))
    # the ODE tends to the bound: e^{z_t} = eta' t - 2 log(eta' t) + F(z_0) + ..., so
    # (1-p_t) eta' t -> 1 with a relative error ~ (2 log(eta' t) + |F(z_0)| + 1)/(eta' t)
    clock = eta_ * (n_ - 1) / n_ * 1e6
    err = 1.5 * (2 * math.log(clock) + abs(float(th.tabular_ode_potential(z0_))) + 1) / clock
    assert abs(u[-1] * clock - 1) < err
    # more rollouts per step help per step, but the compute-optimal group is n = 2
    assert th.tabular_ode_suboptimality(100.0, n_ + 1, eta_, z0_) <= u[3]


def test_tabular_identity_and_compute_optimal_n():
    z_ = _core.z
    sig = 1 / (1 + sp.exp(-z_))
    assert sp.simplify(1 / (sig * (1 - sig)) - (2 + sp.exp(z_) + sp.exp(-z_))) == 0
    assert sp.simplify(sp.diff(tabular.tabular_ode_potential_expr(), z_) * sig * (1 - sig)) == 1
    for C_ in (10.0, 1e3, 1e6, 1e9):
        assert th.tabular_compute_optimal_n(C_, 1.0) == 2
        assert th.tabular_compute_optimal_n(C_, 0.3, lr_exponent=0.5) == 3
    assert th.tabular_optimal_n(0.0) == 2 and th.tabular_optimal_n(0.5) == 3
    assert th.tabular_optimal_n(0.8) == 6  # (2 - 0.8)/(1 - 0.8) = 6
    assert th.tabular_optimal_n(1.0, n_max=512) == 512
    assert th.tabular_compute_optimal_n(1e6, 1.0, n_min=8) == 8
    with pytest.raises(IsosimInputError):
        th.tabular_compute_optimal_n(1.0, 1.0)
    with pytest.raises(IsosimInputError):
        th.tabular_optimal_n(1.0)


def test_tabular_compute_optimal_n_monte_carlo():
    """At fixed compute C = n t the simulated E[1 - p] is smallest for n = 2 among 2, 4, 16."""
    C_ = 8000
    means = {}
    for n_ in (2, 4, 16):
        T = C_ // n_
        u = _simulate_tabular(n_, 1.0, T, 2000, seed=20 + n_, checkpoints={T})[T]
        means[n_] = u.mean()
    assert min(means, key=means.get) == 2, means


# --------------------------------------------------------------------------- amplification
def test_kl_optimum_matches_its_derivation_and_numeric_maximisation():
    derived = amplification.kl_regularised_optimum_derived()
    assert sp.simplify(derived - amplification.kl_regularised_optimum_expr()) == 0
    for p0_, b_ in ((0.1, 1.0), (0.5, 0.3), (0.9, 5.0)):
        def neg(q):
            kl = q * math.log(q / p0_) + (1 - q) * math.log((1 - q) / (1 - p0_))
            return -(q - b_ * kl)

        res = minimize_scalar(neg, bounds=(1e-12, 1 - 1e-12), method="bounded",
                              options={"xatol": 1e-12})
        assert math.isclose(res.x, th.kl_regularised_optimum(p0_, b_), abs_tol=1e-6)


@FAST
@given(st.floats(0.01, 0.95), st.floats(0.5, 20.0), st.sampled_from([0.0, 1e-4, 1e-2]))
def test_amplification_fixed_point_properties(p0_, b_, eps_):
    lb = float(th.grpo_amplification_lower_bound(p0_, b_, eps_))
    p_star = th.grpo_amplification_fixed_point(p0_, b_, eps_)
    assert p_star > p0_ and p_star >= lb - 1e-12
    assert lb > p0_
    if eps_ == 0.0:
        assert lb > th.kl_regularised_optimum(p0_, b_) > p0_
    if p_star < 1.0:
        assert math.isclose(th.grpo_amplification_map(p_star, p0_, b_, eps_), p_star,
                            rel_tol=1e-9, abs_tol=1e-12)
    for q, stable in th.grpo_amplification_fixed_points(p0_, b_, eps_):
        d = float(th.grpo_amplification_map_derivative(q, p0_, b_, eps_))
        assert stable == (abs(d) < 1)
    if eps_ > 0:  # h(1) < 1, so a fixed point in (0, 1) exists (possibly 1 - 1e-40)
        x_star = th.grpo_amplification_fixed_point(p0_, b_, eps_, logit=True)
        bound = sps.logit(p0_) + 1 / (b_ * math.sqrt(eps_))
        assert math.isfinite(x_star) and x_star <= bound + 1e-9 * abs(bound)


def test_amplification_iteration_converges_to_the_fixed_point():
    for p0_, b_ in ((0.1, 1.0), (0.3, 2.0), (0.5, 5.0), (0.01, 5.0)):
        p_star = th.grpo_amplification_fixed_point(p0_, b_)
        traj = th.grpo_amplification_iterate(p0_, b_, steps=500)
        assert abs(traj[-1] - p_star) < 1e-8 and p_star > th.kl_regularised_optimum(p0_, b_)


def test_amplification_map_monte_carlo():
    """Estimate the std-normalised advantages from sampled rollouts; the update matches h."""
    rng = np.random.default_rng(12)
    p0_, b_ = 0.2, 1.5
    N = 400_000
    for p_ in (0.2, 0.45, 0.8):
        vals = []
        for _ in range(40):
            r = rng.random(N) < p_
            ph = r.mean()
            a_plus, a_minus = th.grpo_advantages(ph)
            num = p0_ * math.exp(a_plus / b_)
            vals.append(num / (num + (1 - p0_) * math.exp(a_minus / b_)))
        assert_mc_mean(vals, float(th.grpo_amplification_map(p_, p0_, b_)))
    # eps = 0 advantages are sqrt((1-p)/p) and -sqrt(p/(1-p))
    ap, am = th.grpo_advantages(0.3)
    assert math.isclose(ap, math.sqrt(0.7 / 0.3)) and math.isclose(am, -math.sqrt(0.3 / 0.7))


# --------------------------------------------------------------------------- document + CLI
def test_document_formats():
    md = th.document("markdown")
    tex = th.document("latex")
    for name in th.closed_forms():
        assert f"`{name}`" in md
        assert r"\texttt{" + name.replace("_", r"\_") + "}" in tex
    assert md.count("$$") % 2 == 0
    assert tex.startswith(r"\documentclass") and tex.rstrip().endswith(r"\end{document}")
    body = tex.replace(r"\{", "").replace(r"\}", "")
    assert body.count("{") == body.count("}")
    assert "0.077" in md and "0.962" in md
    with pytest.raises(IsosimInputError):
        th.document("html")


def _parser():
    from isosim.cli import theory as cli_theory

    parser = argparse.ArgumentParser(prog="isosim")
    sub = parser.add_subparsers(dest="command")
    cli_theory.register(sub)
    return parser


def test_cli_theory_run(tmp_path, capsys):
    args = _parser().parse_args(["theory"])
    assert args.fmt == "markdown" and args.func(args) == 0
    assert capsys.readouterr().out.startswith("# isosim theory")
    out = tmp_path / "theory.tex"
    args = _parser().parse_args(["theory", "--latex", "--out", str(out)])
    assert args.func(args) == 0
    assert out.read_text().startswith(r"\documentclass")
    with pytest.raises(SystemExit):
        _parser().parse_args(["theory", "--latex", "--markdown"])
    (tmp_path / "afile").write_text("")
    for bad in (str(tmp_path / "afile" / "x.md"), str(tmp_path)):
        # rejected when parsed (argparse: SystemExit 2) or when run (IsosimInputError)
        with pytest.raises((IsosimInputError, SystemExit)):
            args = _parser().parse_args(["theory", "--out", bad])
            args.func(args)


def test_cli_main_reports_one_line(tmp_path, capsys, monkeypatch):
    from isosim import cli

    monkeypatch.setattr(cli, "SUBCOMMANDS", ("theory",))
    (tmp_path / "afile").write_text("")
    assert cli.main(["theory", "--out", str(tmp_path / "afile" / "x.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("isosim theory: error:")
    assert "is a file, not a folder" in err  # not reported as a missing directory
    assert not (tmp_path / "afile").is_dir()
    assert cli.main(["theory", "--markdown", "--out", str(tmp_path / "t.md")]) == 0
    assert (tmp_path / "t.md").read_text().startswith("# isosim theory")
    # a missing folder is created, as simulate --out creates it
    assert cli.main(["theory", "--out", str(tmp_path / "new" / "sub" / "t.md")]) == 0
    assert (tmp_path / "new" / "sub" / "t.md").read_text().startswith("# isosim theory")


# --------------------------------------------------------------------------- figures
def _theory_cli(monkeypatch):
    from isosim import cli

    monkeypatch.setattr(cli, "SUBCOMMANDS", ("theory",))
    return cli.main


@pytest.mark.slow
def test_theory_figures_command_writes_the_seven_figures(tmp_path, capsys, monkeypatch):
    """The command's files and messages. Figure 7 (mean field against the simulator, about 20 s
    even when quick) is drawn by a stand-in here: notebooks/02_theory draws all seven for real."""
    import dataclasses

    import matplotlib.pyplot as plt

    from isosim.theory import figures

    def stand_in(quick):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        return fig

    FIGURES = tuple(dataclasses.replace(f, draw=stand_in) if f.name == "meanfield" else f for f in figures.FIGURES)
    monkeypatch.setattr(figures, "FIGURES", FIGURES)
    main = _theory_cli(monkeypatch)
    out = tmp_path / "new" / "theory"
    assert main(["theory", "--figures", str(out), "--quick"]) == 0
    captured = capsys.readouterr()
    stems = [f"fig{f.number}_{f.name}" for f in FIGURES]
    assert len(stems) == 7
    expected = sorted(f"{s}.{ext}" for s in stems for ext in ("png", "pdf"))
    assert sorted(p.name for p in out.iterdir()) == expected
    for s in stems:
        assert (out / f"{s}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / f"{s}.pdf").read_bytes()[:5] == b"%PDF-"
    # stdout lists the written files (no document); stderr is not a terminal here: plain progress
    # lines (no bar), then the summary
    assert sorted(Path(line).name for line in captured.out.split()) == expected
    err = captured.err.strip().splitlines()
    assert err[-1] == f"wrote 7 theory figure(s), PNG and PDF, to {out}"
    assert all(line.startswith("theory figures:") and "\r" not in line for line in err[:-1])


def test_theory_figures_are_deterministic(tmp_path, monkeypatch, capsys):
    """Fixed seeds and no timestamps: the same figure twice gives the same bytes."""
    main = _theory_cli(monkeypatch)
    for d in ("a", "b"):
        assert main(["theory", "--figures", str(tmp_path / d), "--quick", "--only", "signal", "--quiet"]) == 0
    for name in ("fig1_signal.png", "fig1_signal.pdf"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_theory_figures_bad_input(tmp_path, capsys, monkeypatch):
    """A bad --figures DIR or --only: one line on stderr, exit code 2, nothing created."""
    main = _theory_cli(monkeypatch)
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    cases = [
        ["--figures", str(a_file)],
        ["--figures", str(a_file / "sub")],
        ["--figures", ""],
        ["--figures", str(tmp_path / "new"), "--only", "9"],
        ["--figures", str(tmp_path / "new"), "--only", ","],
        ["--figures", str(tmp_path / "new"), "--out", str(a_file / "x.md")],  # a folder that is a file
        ["--only", "1"],
        ["--quick"],
    ]
    for extra in cases:
        assert main(["theory", *extra]) == 2, extra
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("isosim theory: error:"), (extra, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


def test_theory_figure_registry():
    from isosim.theory import figures

    assert [f.number for f in figures.FIGURES] == list(range(1, 8))
    assert figures.select(["2", "tabular", 2]) == [figures.FIGURES[1], figures.FIGURES[3]]
    with pytest.raises(IsosimInputError):
        figures.select(["nope"])
    fig = figures.show("passk", quick=True)  # outside IPython: the figure itself
    assert fig.axes and fig.axes[0].get_xscale() == "log"
