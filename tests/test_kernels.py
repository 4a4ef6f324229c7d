"""Each Numba kernel against its NumPy twin, and the GRPO signal identities."""
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from isosim import simulate
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
    "tabular": {"model": {"kind": "tabular"}, "algo": {"lr_rule": "linear"}},
}


def _state_arrays(st):
    return st._asdict()


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


@pytest.mark.parametrize("name", ["grpo-adam", "features", "tabular"])
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
        kernels.sample_counts(rng, pi, order, idx, n, out, touched, n_touched, np.empty(S))
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


def test_vectorised_exp_is_within_two_ulp_of_numpy():
    rng = np.random.default_rng(3)
    x = np.concatenate([-rng.exponential(5.0, 20000), -rng.uniform(0, 745, 20000), [0.0, -1e-300, -0.5 * np.log(2),
                                                                                    -708.4, -744.9]])
    out = np.empty_like(x)
    kernels.exp_nonpositive(x, out, np.empty(x.size, np.int64), np.empty(x.size, np.int64))
    ref = np.exp(x)
    assert np.all(np.abs(out - ref) <= 2 * np.spacing(ref))


@pytest.mark.parametrize("adv", [kernels.ADV_GRPO, kernels.ADV_DRGRPO, kernels.ADV_RLOO])
def test_group_advantages_sum_to_zero(adv):
    rng = np.random.default_rng(4)
    for _ in range(200):
        n = int(rng.integers(2, 64))
        c = int(rng.integers(0, n + 1))
        total = c * kernels.advantage(1.0, c, n, adv, 0.0 if 0 < c < n else 1e-6) \
            + (n - c) * kernels.advantage(0.0, c, n, adv, 0.0 if 0 < c < n else 1e-6)
        assert abs(total) < 1e-9


def _summed_logit_signal(p, n, adv, draws, seed):
    """n * d/dz of the group objective for a 2-outcome policy with logit z = logit(p)."""
    rng = np.random.default_rng(seed)
    pi = np.array([p, 1 - p])
    y = np.array([1.0, 0.0])
    out = np.empty(2)
    vals = np.empty(draws)
    for j in range(draws):
        c = rng.binomial(n, p)
        kernels._group_grad(pi, y, np.array([c, n - c]), n, n, float(c), adv, 0.0, out)
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
        kernels._group_grad(pi, y, cnt, n, n, float(c), kernels.ADV_DRGRPO, 0.0, out)
        assert n * out[0] == pytest.approx(c * (n - c) / n)
        kernels._group_grad(pi, y, cnt, n, n, float(c), kernels.ADV_GRPO, 0.0, out)
        assert n * out[0] == pytest.approx(np.sqrt(c * (n - c)))
        kernels._group_grad(pi, y, cnt, n, n, float(c), kernels.ADV_RLOO, 0.0, out)
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
