"""Each Numba kernel against its NumPy twin, and the GRPO signal identities."""
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from isosim import SimConfig, simulate
from isosim.sim import kernels
from isosim.sim import twin as numpy_twin

VARIANTS = {
    "grpo-adam": {},
    "drgrpo-sgd": {"algo": {"advantage": "drgrpo", "optimizer": "sgd", "lr": 0.5}},
    "rloo-adamw": {"algo": {"advantage": "rloo", "optimizer": "adamw", "weight_decay": 0.1}},
    "decoupled-baseline": {"algo": {"baseline_n": 32}},
    "kl-entropy-filter": {"algo": {"kl_coef": 0.05, "entropy_coef": 0.01, "zero_var_filter": True}},
    "local-offsets": {"model": {"local": 1.0, "shared": 0.5}, "algo": {"weight_decay": 0.01}},
    # D = 20, B_problem = 16: batches straddle epochs, so a problem can appear twice in one batch
    "local-repeated-rows": {"population": {"train_size": 20}, "model": {"local": 1.0, "shared": 0.0}},
    "sgd-l2": {"algo": {"optimizer": "sgd", "weight_decay": 0.01, "lr": 0.3}},
    "features": {"model": {"kind": "features", "local": 0.5}},
    # execution noise: Binomial successes per correct type; with local > 0 the execution offsets learn
    "execution": {"model": {"execution_a": 2.0, "execution_b": 1.0}},
    "execution-memorise": {"model": {"execution_a": 2.0, "execution_b": 1.0, "local": 0.5}},
    "execution-memorise-rloo-sgd-baseline": {"model": {"execution_a": 2.0, "execution_b": 1.0, "local": 0.5},
                                             "algo": {"advantage": "rloo", "optimizer": "sgd", "lr": 0.3,
                                                      "baseline_n": 32, "zero_var_filter": True}},
    "execution-repeated-rows": {"population": {"train_size": 20},
                                "model": {"execution_a": 2.0, "execution_b": 1.0, "local": 1.0}},
    "tabular": {"model": {"kind": "tabular"}, "algo": {"lr_rule": "linear"}},
    # the per-problem rows (and execution offsets) step with lr / B_problem
    "local-share-memorise": {"model": {"execution_a": 2.0, "execution_b": 1.0, "local": 16.0, "local_share": True},
                             "algo": {"adam_eps": 1e-2}},
    "local-share-repeated-rows-sgd": {"population": {"train_size": 20},
                                      "model": {"local": 16.0, "shared": 0.1, "local_share": True},
                                      "algo": {"optimizer": "sgd", "lr": 0.3}},
    # the shared parameters drift at random with every update (none in the steps the filter skips)
    "drift-filter": {"algo": {"drift": 2.0, "zero_var_filter": True}},
    "drift-sgd-memorise": {"model": {"local": 1.0, "shared": 0.5}, "algo": {"drift": 1.0, "optimizer": "sgd", "lr": 0.3}},
}


#: the kernel's bookkeeping of U's touched columns, which the dense twin does not keep
_BOOKKEEPING = ("u_cols", "u_ncols", "u_on")


def _state_arrays(st):
    return {k: v for k, v in st._asdict().items() if k not in _BOOKKEEPING}


def _check_column_lists(st):
    """Each row of U lists every column where it or its moments are not zero, once each, and
    ``u_on`` marks exactly the listed columns."""
    D, S = st.U.shape
    for i in range(D):
        listed = st.u_cols[i, :st.u_ncols[i]]
        assert len(set(listed.tolist())) == listed.size
        assert set(listed.tolist()) == set(np.flatnonzero(st.u_on[i]).tolist())
        moving = (st.U[i] != 0) | (st.m_U[i] != 0) | (st.v_U[i] != 0)
        assert st.u_on[i][moving].all(), f"row {i} has values outside its listed columns"


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_step_matches_numpy_twin(small_cfg, name):
    """From the kernel's state at every step, one kernel step == one twin step."""
    import copy
    import importlib

    sm = importlib.import_module("isosim.sim.run")
    from isosim.sim.population import build_population

    cfg = small_cfg.replace(**VARIANTS[name])
    pop = build_population(cfg.population, cfg.model)
    S, r = pop.train.problems.base_logits.shape[1], pop.train.problems.features.shape[1]
    fpar, ipar = sm.kernel_params(cfg)
    st = sm.initial_state(len(pop.train), S, r)
    data = sm.train_data(pop.train, cfg)
    rng = np.random.default_rng(9)
    for t in range(40):
        twin = copy.deepcopy(st)
        twin_rng = copy.deepcopy(rng)
        kernels.train_steps(rng, data, st, fpar, ipar, t, 1)
        numpy_twin.train_steps(twin_rng, data, twin, fpar, ipar, t, 1)
        a, b = _state_arrays(st), _state_arrays(twin)
        for key in a:
            np.testing.assert_allclose(a[key], b[key], rtol=1e-9, atol=1e-12, err_msg=f"{key} at step {t}")
        assert rng.bit_generator.state == twin_rng.bit_generator.state
        _check_column_lists(st)


@pytest.mark.parametrize("name", ["grpo-adam", "features", "tabular", "execution-memorise", "drift-filter"])
def test_whole_trace_matches_numpy_twin(small_cfg, name):
    cfg = small_cfg.replace(**VARIANTS[name])
    a = simulate(cfg, 3).table
    b = simulate(cfg, 3, backend="numpy").table
    assert (a["step"].values == b["step"].values).all()
    np.testing.assert_allclose(a["compute_tokens"], b["compute_tokens"], rtol=1e-12)
    np.testing.assert_allclose(a["value"], b["value"], rtol=1e-8, atol=1e-10)


def _rows(pi):
    return np.argsort(-pi, axis=1, kind="stable")


def test_multinomial_counts_identical_to_twin_and_exact_in_distribution():
    rng0 = np.random.default_rng(0)
    pi = rng0.dirichlet(np.full(12, 0.3), size=64)
    order = _rows(pi)
    idx = np.arange(64)
    out = np.zeros((64, 12), dtype=np.int64)
    a_rng, b_rng = np.random.default_rng(1), np.random.default_rng(1)
    for n in (1, 8, 300, 2048):
        kernels._multinomial(a_rng, pi, order, idx, n, out)
        twin = numpy_twin.multinomial(b_rng, pi, order, n)
        np.testing.assert_array_equal(out, twin)
        assert (out.sum(axis=1) == n).all()
    assert a_rng.random() == b_rng.random()  # both consumed the same random numbers
    # distribution: mean counts n * pi, within 5 standard errors
    reps, n = 4000, 50
    tot = np.zeros((64, 12))
    rng = np.random.default_rng(2)
    for _ in range(reps):
        kernels._multinomial(rng, pi, order, idx, n, out)
        tot += out
    se = np.sqrt(n * pi * (1 - pi) / reps)
    assert np.all(np.abs(tot / reps - n * pi) <= 5 * se + 1e-9)


def _sample(module, rng, pi, n):
    B, S = pi.shape
    order, idx = _rows(pi), np.arange(B)
    if module is kernels:
        out = np.zeros((B, S), dtype=np.int64)
        touched, n_touched = np.empty((B, S), dtype=np.int64), np.zeros(B, dtype=np.int64)
        kernels.sample_counts(rng, pi, order, idx, n, out, touched, n_touched, np.empty((B, S)))
        for b in range(B):  # touched lists exactly the drawn types
            assert sorted(touched[b, :n_touched[b]]) == list(np.flatnonzero(out[b]))
        return out
    return numpy_twin.sample_counts(rng, pi, order, n)


SWITCH = kernels.DIRECT_MAX_N


@pytest.mark.parametrize("S,n", [(64, 1), (64, 2), (64, 7), (64, SWITCH), (64, SWITCH + 1), (64, 300), (64, 2048),
                                 (12, 6), (12, 7), (2, 1), (2, 2)])
def test_both_samplers_identical_to_twin_on_both_sides_of_the_switch(S, n):
    assert kernels.draws_directly(n, S) == (n <= min(SWITCH, S // 2))
    pi = np.random.default_rng(0).dirichlet(np.full(S, 0.3), size=64)
    pi[:5, S - 1] = 0.0  # types of probability 0 are never drawn
    pi /= pi.sum(axis=1, keepdims=True)
    a_rng, b_rng = np.random.default_rng(1), np.random.default_rng(1)
    for _ in range(3):
        a, b = _sample(kernels, a_rng, pi, n), _sample(numpy_twin, b_rng, pi, n)
        np.testing.assert_array_equal(a, b)
        assert (a.sum(axis=1) == n).all() and (a[:5, S - 1] == 0).all()
    assert a_rng.random() == b_rng.random()  # both consumed the same random numbers


@pytest.mark.parametrize("n", [3, SWITCH + 9])
def test_counts_are_multinomial(n):
    """Chi-square tests at a fixed seed: the pooled type totals against n * rows * pi, and one
    type's per-group count against Binomial(n, pi_s) (bins with at least 5 expected)."""
    from scipy.stats import binom, chi2

    pi = np.array([0.45, 0.25, 0.0, 0.15, 0.1, 0.05])
    rows = 20000
    counts = _sample(kernels, np.random.default_rng(7), np.tile(pi, (rows, 1)), n)
    assert counts[:, 2].sum() == 0
    live = pi > 0
    expected = n * rows * pi[live]
    stat = (((counts.sum(axis=0)[live] - expected) ** 2) / expected).sum()
    assert chi2.sf(stat, live.sum() - 1) > 1e-3
    k = np.arange(n + 1)
    e = rows * binom.pmf(k, n, pi[1])
    keep = e >= 5
    obs = np.bincount(counts[:, 1], minlength=n + 1)
    o_tail, e_tail = obs[~keep].sum(), e[~keep].sum()
    o, ee = np.append(obs[keep], o_tail), np.append(e[keep], e_tail)
    stat = (((o - ee) ** 2) / np.where(ee > 0, ee, 1.0)).sum()
    assert chi2.sf(stat, len(o) - 1) > 1e-3


PI6 = np.array([0.45, 0.25, 0.0, 0.15, 0.1, 0.05])  # one type of probability 0


def _compositions(n, k):
    """Every vector of k non-negative integers summing to n."""
    if k == 1:
        yield (n,)
        return
    for first in range(n + 1):
        for rest in _compositions(n - first, k - 1):
            yield (first, *rest)


# S = 6: n = 3 draws one rollout at a time (2n <= S), n = 4 by conditional binomials (2n > S)
@pytest.mark.parametrize("n", [3, 4])
def test_joint_counts_fit_the_multinomial_law(n):
    """Pearson chi-square of the whole count vector of a group against Multinomial(n, pi), over
    every outcome (bins with fewer than 5 expected pooled into one), on both sampler paths.
    Fixed seed, so deterministic; the significance level is p > 1e-3."""
    from scipy.stats import chisquare, multinomial

    rows = 40000
    assert kernels.draws_directly(n, PI6.size) == (n == 3)
    counts = _sample(kernels, np.random.default_rng(11), np.tile(PI6, (rows, 1)), n)
    live = PI6 > 0
    assert (counts[:, ~live] == 0).all()
    outcomes = np.array(list(_compositions(n, int(live.sum()))))
    expected = rows * multinomial.pmf(outcomes, n, PI6[live])
    assert expected.sum() == pytest.approx(rows)
    seen, freq = np.unique(counts[:, live], axis=0, return_counts=True)
    lookup = {tuple(o): i for i, o in enumerate(outcomes)}
    observed = np.zeros(len(outcomes))
    for o, f in zip(seen, freq):
        observed[lookup[tuple(o)]] = f  # a KeyError here would be an impossible outcome
    keep = expected >= 5
    f_obs, f_exp = observed[keep], expected[keep]
    if not keep.all():
        f_obs, f_exp = np.append(f_obs, observed[~keep].sum()), np.append(f_exp, expected[~keep].sum())
    assert keep.sum() >= 20  # enough bins for the test to see the joint law, not just the means
    assert chisquare(f_obs, f_exp).pvalue > 1e-3


@pytest.mark.parametrize("S, n", [(6, 3), (6, 4), (64, SWITCH), (64, SWITCH + 1), (64, 2048)])
def test_count_means_and_covariance_are_multinomial(S, n):
    """E c = n pi and Cov c = n (diag(pi) - pi pi^T), on both sides of the sampler switch.

    Means: Pearson chi-square of the type totals over all rows (a Multinomial(n * rows, pi)
    vector), p > 1e-3. Covariance: each entry of the sample covariance within 5 of its
    standard errors, the SE of entry (s, t) estimated from the data as
    sd((c_s - mean_s)(c_t - mean_t)) / sqrt(rows). Fixed seeds, so deterministic."""
    from scipy.stats import chisquare

    rows = 20000
    pi = PI6 if S == 6 else np.random.default_rng(5).dirichlet(np.full(S, 3.0))  # smallest pi ~ 0.003
    counts = _sample(kernels, np.random.default_rng(12), np.tile(pi, (rows, 1)), n).astype(float)
    live = pi > 0
    tot = counts.sum(axis=0)
    assert (tot[~live] == 0).all() and tot.sum() == n * rows
    assert chisquare(tot[live], n * rows * pi[live]).pvalue > 1e-3
    d = counts[:, live] - counts[:, live].mean(axis=0)
    assert (d != 0).any(axis=0).all()  # every live type varies, so every SE below is positive
    prod = d[:, :, None] * d[:, None, :]
    cov = prod.sum(axis=0) / (rows - 1)
    se = prod.std(axis=0, ddof=1) / np.sqrt(rows)
    p = pi[live]
    theory = n * (np.diag(p) - np.outer(p, p))
    z = np.abs(cov - theory) / se
    assert z.max() < 5, (np.unravel_index(z.argmax(), z.shape), z.max())
    # and the check has power: the covariance of independent Poisson counts (diagonal n pi, zero
    # off the diagonal) is rejected on the same data
    assert (np.abs(cov - n * np.diag(p)) / se).max() > 5


def test_vectorised_exp_is_within_two_ulp_of_numpy():
    rng = np.random.default_rng(3)
    x = np.concatenate([-rng.exponential(5.0, 20000), -rng.uniform(0, 745, 20000), [0.0, -1e-300, -0.5 * np.log(2),
                                                                                    -708.4, -744.9]])
    out = np.empty_like(x)
    kernels.exp_nonpositive(x, out, np.empty(x.size, np.int64), np.empty(x.size, np.int64))
    ref = np.exp(x)
    assert np.all(np.abs(out - ref) <= 2 * np.spacing(ref))


def _exp_by_integer_exponent(x):
    """The exponential's arithmetic with the exponent ``k`` as an integer (truncation of
    ``x / ln 2 - 1/2`` and shifts of int64 values), one number at a time, for comparison."""
    out = np.empty_like(x)
    for j, xj in enumerate(x):
        xj = max(float(xj), -745.0)
        ki = int(xj * kernels.LOG2E - 0.5)  # truncation towards zero
        k = float(ki)
        r = (xj - k * kernels.LN2_HI) - k * kernels.LN2_LO
        q = kernels._C13 * r + kernels._C12
        for c in (kernels._C11, kernels._C10, kernels._C9, kernels._C8, kernels._C7, kernels._C6, kernels._C5,
                  kernels._C4, kernels._C3, kernels._C2, kernels._C1, kernels._C0):
            q = q * r + c
        e1 = ki >> 1
        out[j] = q * np.int64((e1 + 1023) << 52).view(np.float64) * np.int64((ki - e1 + 1023) << 52).view(np.float64)
    return out


def test_vectorised_exp_rounds_its_exponent_as_the_integer_construction_does():
    """The exponent ``k`` is rounded by adding and subtracting ``ROUNDER``, and ``2^k`` built by
    shifting the sum's bits: bit for bit the numbers of an integer ``k``, including next to every
    point where ``k`` changes (``x = -(j + 1/2) ln 2``), at -745 and at 0."""
    assert np.float64(kernels.ROUNDER).view(np.int64) == kernels.ROUNDER_BITS
    edges = -(np.arange(0, 1076) + 0.5) * np.log(2)
    rng = np.random.default_rng(11)
    x = np.concatenate([edges, np.nextafter(edges, 0), np.nextafter(edges, -1), -rng.uniform(0, 760, 5000),
                        [0.0, -0.0, -1e-300, -745.0, -746.0, -np.inf]])
    out = np.empty_like(x)
    kernels.exp_nonpositive(x, out, np.empty(x.size, np.int64), np.empty(x.size, np.int64))
    np.testing.assert_array_equal(out.view(np.int64), _exp_by_integer_exponent(x).view(np.int64))


@pytest.mark.parametrize("adv", [kernels.ADV_GRPO, kernels.ADV_DRGRPO, kernels.ADV_RLOO])
def test_group_advantages_sum_to_zero(adv):
    rng = np.random.default_rng(4)
    for _ in range(200):
        n = int(rng.integers(2, 64))
        c = int(rng.integers(0, n + 1))
        total = c * kernels.advantage(1.0, c, n, adv, 0.0 if 0 < c < n else 1e-6) \
            + (n - c) * kernels.advantage(0.0, c, n, adv, 0.0 if 0 < c < n else 1e-6)
        assert abs(total) < 1e-9


B1, B2, AEPS = 0.9, 0.999, 1e-8


def _adam_ascent(x, m, v, g, t, lr, wd, opt):
    """Textbook Adam (L2 in the gradient) / AdamW (decoupled decay) ascent step at step t."""
    if opt == kernels.OPT_ADAM:
        g = g - wd * x
    else:
        x = x - lr * wd * x
    m = B1 * m + (1 - B1) * g
    v = B2 * v + (1 - B2) * g * g
    return x + lr * (m / (1 - B1**t)) / (np.sqrt(v / (1 - B2**t)) + AEPS), m, v


def _entropy_ascent_grad(logits, ent):
    """``ent * dH/dlogits`` of softmax(logits): ``-ent pi (log pi + H)``."""
    logpi = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
    pi = np.exp(logpi)
    return -ent * pi * (logpi - (pi * logpi).sum())


def _toy(D, S, r, rewards, rng, L0=None):
    from isosim.sim.population import sampling_order
    from isosim.sim.run import initial_state

    L0 = rng.normal(0, 1, (D, S)) if L0 is None else L0
    data = kernels.TrainData(L0, rng.normal(0, 1, (D, r)), rewards, sampling_order(L0), np.ones(D), np.ones(S),
                             np.full(D, np.inf))
    return data, initial_state(D, S, r)


def _params(lr, bs, vs, us, kl, ent, wd, n, adv, opt, u_share=0.0, bp=1):
    fpar = np.array([lr, bs, vs, us, 1e-6, kl, ent, B1, B2, AEPS, wd, u_share, 0.0])  # no drift
    ipar = np.array([n, n, bp, adv, opt, 0, 0], dtype=np.int64)  # no filter, no warm-up
    return fpar, ipar


@pytest.mark.parametrize("opt, wd, u_share", [(kernels.OPT_ADAM, 0.0, 0.0), (kernels.OPT_ADAMW, 0.1, 0.0),
                                               (kernels.OPT_ADAM, 0.0, 1.0)])
def test_offset_rows_use_lazy_adam_not_dense_adam(opt, wd, u_share):
    """The kernel's claim: ``u`` rows use lazy Adam, a row's moments, step count and (AdamW)
    decay move only when its problem is in the batch. With every reward 0 the advantages vanish
    and the only gradient is the entropy bonus, a deterministic function of the sampled row's
    policy, so both candidates can be computed exactly: lazy Adam (per-row moments and bias
    correction by the row's own step count) and dense Adam (every row every step, a zero
    gradient for rows not in the batch, global step count). The kernel and its twin equal lazy
    Adam to float precision and differ from dense Adam by far more than float noise (one
    problem per step, 3 problems, 9 steps: each row sits out the steps in between). The rows'
    learning rate is ``lr``, or with ``fpar[F_USHARE]`` on ``lr / K``, K the batch's informative
    groups (here every reward is 0, so K = 0 and the share is the whole ``lr``: the rule's other
    cases are checked against the twin)."""
    import copy

    D, S, lr, ent = 3, 5, 0.05, 0.5
    data, st = _toy(D, S, 0, np.zeros((D, S)), np.random.default_rng(20))
    fpar, ipar = _params(lr, 0.0, 0.0, 1.0, 0.0, ent, wd, 4, kernels.ADV_GRPO, opt, u_share)
    tw, rng = copy.deepcopy(st), np.random.default_rng(21)
    tw_rng = copy.deepcopy(rng)
    lazy = {"U": np.zeros((D, S)), "m": np.zeros((D, S)), "v": np.zeros((D, S)), "t": np.zeros(D, int)}
    dense = {"U": np.zeros((D, S)), "m": np.zeros((D, S)), "v": np.zeros((D, S))}
    sat_out = 0
    for t in range(9):
        before = copy.deepcopy(st)
        kernels.train_steps(rng, data, st, fpar, ipar, t, 1)
        numpy_twin.train_steps(tw_rng, data, tw, fpar, ipar, t, 1)
        i = int(st.perm[st.cursor[0] - 1])  # the problem of this step's batch
        g = _entropy_ascent_grad(data.base_logits[i] + lazy["U"][i], ent)
        lazy["t"][i] += 1
        lazy["U"][i], lazy["m"][i], lazy["v"][i] = _adam_ascent(lazy["U"][i], lazy["m"][i], lazy["v"][i], g,
                                                               lazy["t"][i], lr, wd, opt)
        gd = np.zeros((D, S))
        gd[i] = _entropy_ascent_grad(data.base_logits[i] + dense["U"][i], ent)
        dense["U"], dense["m"], dense["v"] = _adam_ascent(dense["U"], dense["m"], dense["v"], gd, t + 1, lr, wd, opt)
        for j in set(range(D)) - {i}:  # rows outside the batch: bit for bit untouched
            sat_out += before.t_U[j] > 0
            for key in ("U", "m_U", "v_U", "t_U"):
                assert np.array_equal(getattr(st, key)[j], getattr(before, key)[j]), (t, j, key)
        np.testing.assert_allclose(st.U, lazy["U"], rtol=1e-12, atol=1e-15, err_msg=f"step {t}")
        np.testing.assert_allclose(st.m_U, lazy["m"], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(st.v_U, lazy["v"], rtol=1e-12, atol=1e-18)
        np.testing.assert_array_equal(st.t_U, lazy["t"])
        for key in ("U", "m_U", "v_U", "t_U"):
            np.testing.assert_allclose(getattr(tw, key), getattr(st, key), rtol=1e-12, atol=1e-18)
    assert sat_out >= 6  # rows with moments sat out steps: where lazy and dense part
    assert st.t_U.tolist() == [3, 3, 3]
    assert np.abs(st.U - dense["U"]).max() > 1e-3  # float noise here is ~1e-16


def test_shared_parameters_use_dense_adam():
    """``beta`` and ``V`` take an Adam step every step (global step count), moments decaying even
    where the step's gradient is zero. Step 1: a problem with one solving type (a mixed group,
    a non-zero gradient); step 2: a problem nothing solves, whose advantages and hence gradient
    are exactly 0. Dense Adam still moves beta and V at step 2 through the momentum,
    ``x += lr (b1 m / (1 - b1^2)) / (sqrt(b2 v / (1 - b2^2)) + eps)``; lazy Adam would not move them."""
    import copy

    D, S, r, lr = 2, 5, 2, 0.05
    rewards = np.zeros((D, S))
    rewards[0, 0] = 1.0
    L0 = np.array([[1.0, 1.0, 0.0, 0.0, -1.0], [0.5, 0.0, 0.0, -0.5, 0.0]])  # type 0 solves problem 0: pi ~ 0.4
    data, st = _toy(D, S, r, rewards, np.random.default_rng(30), L0)
    st.perm[:] = [0, 1]
    st.cursor[0] = 0  # no shuffle: problem 0, then problem 1
    fpar, ipar = _params(lr, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 8, kernels.ADV_DRGRPO, kernels.OPT_ADAM)
    rng = np.random.default_rng(31)
    tw, tw_rng = copy.deepcopy(st), copy.deepcopy(rng)
    kernels.train_steps(rng, data, st, fpar, ipar, 0, 1)
    numpy_twin.train_steps(tw_rng, data, tw, fpar, ipar, 0, 1)
    assert np.abs(st.m_beta).max() > 0 and np.abs(st.m_V).max() > 0  # step 1 had a gradient
    one = copy.deepcopy(st)
    kernels.train_steps(rng, data, st, fpar, ipar, 1, 1)
    numpy_twin.train_steps(tw_rng, data, tw, fpar, ipar, 1, 1)
    assert st.counters[kernels.C_ADAM_T] == 2
    for x, m, v in (("beta", "m_beta", "v_beta"), ("V", "m_V", "v_V")):
        want_x, want_m, want_v = _adam_ascent(getattr(one, x), getattr(one, m), getattr(one, v), 0.0, 2, lr, 0.0,
                                              kernels.OPT_ADAM)
        np.testing.assert_allclose(getattr(st, m), want_m, rtol=1e-14, atol=0)
        np.testing.assert_allclose(getattr(st, v), want_v, rtol=1e-14, atol=0)
        np.testing.assert_allclose(getattr(st, x), want_x, rtol=1e-12, atol=1e-15)
        assert np.abs(getattr(st, x) - getattr(one, x)).max() > 1e-3  # lazy Adam: exactly 0
        for key in (x, m, v):
            np.testing.assert_allclose(getattr(tw, key), getattr(st, key), rtol=1e-12, atol=1e-18)


def _summed_logit_signal(p, n, adv, draws, seed):
    """n * d/dz of the group objective for a 2-outcome policy with logit z = logit(p)."""
    rng = np.random.default_rng(seed)
    pi = np.array([p, 1 - p])
    out = np.empty(2)
    vals = np.empty(draws)
    for j in range(draws):
        c = rng.binomial(n, p)  # response 0 is the correct one: all its c rollouts succeed
        kernels._group_grad(pi, np.array([c, n - c]), np.array([c, 0]), n, n, float(c), adv, 0.0, out)
        vals[j] = n * out[0]
    return vals


@pytest.mark.parametrize("p, n", [(0.05, 8), (0.3, 16), (0.7, 64)])
def test_expected_summed_logit_signal_without_std_is_n_minus_1_p_q(p, n):
    vals = _summed_logit_signal(p, n, kernels.ADV_DRGRPO, 40_000, seed=5)
    se = vals.std() / np.sqrt(len(vals))
    assert abs(vals.mean() - (n - 1) * p * (1 - p)) < 5 * se


def test_summed_logit_signal_identities_per_draw():
    rng = np.random.default_rng(6)
    out = np.empty(2)
    for _ in range(100):
        n = int(rng.integers(2, 200))
        c = int(rng.integers(1, n))
        p = float(rng.uniform(0.01, 0.99))
        pi, y, cnt = np.array([p, 1 - p]), np.array([1.0, 0.0]), np.array([c, n - c])
        kernels._group_grad(pi, cnt, cnt * y, n, n, float(c), kernels.ADV_DRGRPO, 0.0, out)
        assert n * out[0] == pytest.approx(c * (n - c) / n)
        kernels._group_grad(pi, cnt, cnt * y, n, n, float(c), kernels.ADV_GRPO, 0.0, out)
        assert n * out[0] == pytest.approx(np.sqrt(c * (n - c)))
        kernels._group_grad(pi, cnt, cnt * y, n, n, float(c), kernels.ADV_RLOO, 0.0, out)
        assert n * out[0] == pytest.approx(c * (n - c) / (n - 1))
        assert out.sum() == pytest.approx(0.0, abs=1e-12)  # softmax logit gradients sum to zero


@pytest.mark.parametrize("changes", [
    {"allocation": {"steps": 12}, "algo": {"kl_coef": 0.01}, "model": {"local": 0.5}},  # direct draws, dense gradient
    {"allocation": {"steps": 12, "n": SWITCH + 1}},  # conditional binomials, sparse gradient
])
def test_python_path_with_jit_disabled_gives_the_same_trace(small_cfg, tmp_path, changes):
    cfg = small_cfg.replace(**changes)
    path = tmp_path / "cfg.json"
    path.write_text(cfg.to_json())
    code = (
        "import sys; from isosim import SimConfig, simulate;"
        f"cfg = SimConfig.from_json(open({str(path)!r}).read());"
        "simulate(cfg, 11).table.to_csv(sys.stdout, index=False)"
    )
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    from io import StringIO

    py = pd.read_csv(StringIO(out))
    jit = simulate(cfg, 11).table
    np.testing.assert_allclose(py["value"].values, jit["value"].values, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("model, share", [({"kind": "strategies", "local_share": False}, 0.0),
                                          ({"kind": "features", "local_share": False}, 0.0),
                                          ({"kind": "strategies", "local_share": True}, 1.0),
                                          ({"kind": "features", "local_share": True}, 1.0),
                                          ({"kind": "tabular", "local_share": True}, 0.0)])
def test_local_share_reaches_the_kernel_except_for_tabular(model, share):
    """``local_share`` turns the share rule on for the models with shared parameters; the tabular
    model's rows are the whole model and always step with ``lr``."""
    from isosim.sim.run import kernel_params

    cfg = SimConfig().replace(model=model, allocation={"n": 8, "b_problem": 32, "budget": 1e5})
    assert kernel_params(cfg)[0][kernels.F_USHARE] == share


@pytest.mark.parametrize("u_share", [0.0, 1.0])
def test_offset_rows_step_with_their_share_of_the_informative_groups(u_share):
    """One Adam step from zero moves each coordinate with a nonzero gradient by its learning
    rate (``m_hat / sqrt(v_hat) = g / |g|``, up to eps). With the share rule, an informative
    problem's row moves by ``lr / K`` (K the step's informative groups, read off the zero-variance
    counter), without it by ``lr``; the twin agrees. Six problems with two response types: three
    where both are correct (every group agrees, no signal) and three where one is."""
    import copy

    D, S, lr = 6, 2, 0.05
    rewards = np.array([[1.0, 1.0]] * 3 + [[1.0, 0.0]] * 3)
    data, st = _toy(D, S, 0, rewards, np.random.default_rng(3), L0=np.zeros((D, S)))
    fpar, ipar = _params(lr, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 8, kernels.ADV_GRPO, kernels.OPT_ADAM, u_share, bp=D)
    tw, rng = copy.deepcopy(st), np.random.default_rng(4)
    tw_rng = copy.deepcopy(rng)
    kernels.train_steps(rng, data, st, fpar, ipar, 0, 1)
    numpy_twin.train_steps(tw_rng, data, tw, fpar, ipar, 0, 1)
    k = D - int(st.counters[kernels.C_ZERO_VAR])
    assert 1 <= k <= 3
    moved = np.abs(st.U).max(axis=1)
    assert np.all(moved[:3] == 0.0)  # no signal, no step (the first visit has no momentum)
    informative = moved[3:] > 0
    assert informative.sum() == k
    np.testing.assert_allclose(moved[3:][informative], lr / k if u_share else lr, rtol=1e-6)
    np.testing.assert_allclose(tw.U, st.U, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("rows", [1, 3, 8, 13])
def test_row_reductions_round_as_one_row_at_a_time(rows):
    """The several-rows-at-once sums, running sums and maxima of the step give exactly (to the
    bit) what one left-to-right pass per row gives: the simulator's numbers do not depend on them."""
    rng = np.random.default_rng(rows)
    a = rng.exponential(1.0, (rows, 257)) * 10.0 ** rng.uniform(-8, 3, (rows, 257))
    sums, cums = np.empty(rows), np.empty_like(a)
    kernels._row_sums(a, rows, sums)
    kernels._row_cumsums(a, rows, cums)
    for j in range(rows):
        t, run = 0.0, []
        for x in a[j]:
            t += x
            run.append(t)
        assert sums[j] == t
        assert np.array_equal(cums[j], np.array(run))
        assert kernels._row_max(a[j]) == a[j].max()


def test_drift_walks_the_shared_parameters_by_drift_times_lr_per_update():
    """With no path to learn through (every path scale 0) the shared parameters move by the drift
    alone: after T updates each coordinate of beta and V is N(0, T (drift lr)^2), independently."""
    D, S, r, lr, d, steps = 8, 64, 4, 0.05, 3.0, 50
    data, st = _toy(D, S, r, np.zeros((D, S)), np.random.default_rng(30))
    fpar, ipar = _params(lr, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 4, kernels.ADV_GRPO, kernels.OPT_ADAM)
    fpar[kernels.F_DRIFT] = d
    kernels.train_steps(np.random.default_rng(31), data, st, fpar, ipar, 0, steps)
    x = np.concatenate([st.beta, st.V.ravel()]) / (d * lr * np.sqrt(steps))
    # the sample variance of N standard normals has a relative standard error sqrt(2 / N)
    assert abs(x.var() - 1.0) < 5 * np.sqrt(2 / x.size) and abs(x.mean()) < 5 / np.sqrt(x.size)
    assert np.corrcoef(st.beta, st.V[0])[0, 1] ** 2 < 25 / S
