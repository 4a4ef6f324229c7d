"""Invariants of a run, theory checks, and the null result of the tabular model."""
import numpy as np
import pytest
from _stats import se_of_mean

from isosim import (
    AlgoConfig,
    Allocation,
    EvalConfig,
    ModelConfig,
    PopulationConfig,
    SimConfig,
    build_population,
    simulate,
)
from isosim.sim.population import population_from_pass_rates


def test_trace_invariants(small_cfg):
    cfg = small_cfg.replace(eval={"snapshot_steps": (0, 30, 60), "ks": (1, 4, 8)},
                            algo={"kl_coef": 0.01, "entropy_coef": 0.001})
    tr = simulate(cfg, 0)
    t = tr.table
    a = cfg.allocation
    assert (t["compute_rollouts"] == t["step"] * a.n * a.b_problem).all()
    assert t["step"].max() == a.steps
    assert set(t["split"]) == {"train", "val"}
    assert {"avg@8", "best@8", "worst@8", "zero_var_frac"} <= set(t["metric"])
    # tokens: constant length 1000 per rollout
    assert np.allclose(t["compute_tokens"], t["compute_rollouts"] * 1000.0)
    snaps = tr.snapshots
    assert set(snaps["step"]) == {0, 30, 60}
    assert len(snaps[(snaps["step"] == 0) & (snaps["split"] == "train")]) == 512
    # the snapshot at step 0 is the base policy: the population's own pass rates
    pop = build_population(cfg.population, cfg.model)
    for split, ps in (("train", pop.train), ("val", pop.val)):
        p0 = snaps[(snaps["step"] == 0) & (snaps["split"] == split)].sort_values("problem")["pass_rate"]
        np.testing.assert_allclose(p0.to_numpy(), ps.base_pass, rtol=1e-12, atol=1e-15)
    # every pass-rate metric is the mean of its closed form over the snapshot's pass rates
    for (step, split), snap in snaps.groupby(["step", "split"]):
        p = snap["pass_rate"].to_numpy()
        row = t[(t["step"] == step) & (t["split"] == split)].set_index("metric")["value"]
        for k in cfg.eval.ks:
            assert row[f"avg@{k}"] == pytest.approx(p.mean(), rel=1e-12)
            assert row[f"best@{k}"] == pytest.approx(np.mean(1 - (1 - p) ** k), rel=1e-12)
            assert row[f"worst@{k}"] == pytest.approx(np.mean(p**k), rel=1e-12)
    # entropy at step 0 is the base policy's, KL is zero there and positive once training moved it
    for split, ps in (("train", pop.train), ("val", pop.val)):
        L0 = ps.problems.base_logits
        logpi = L0 - L0.max(axis=1, keepdims=True)
        logpi -= np.log(np.exp(logpi).sum(axis=1, keepdims=True))
        h0 = float(np.mean(-(np.exp(logpi) * logpi).sum(axis=1)))
        at = t[(t["split"] == split)].pivot_table(index="step", columns="metric", values="value")
        assert at.loc[0, "entropy"] == pytest.approx(h0, rel=1e-12)
        assert at.loc[0, "kl"] == pytest.approx(0.0, abs=1e-12)
        assert at.loc[a.steps, "kl"] > 1e-10  # float noise is about 1e-16


def test_same_seed_same_trace_other_seed_other_trace(small_cfg):
    a, b, c = simulate(small_cfg, 5).table, simulate(small_cfg, 5).table, simulate(small_cfg, 6).table
    assert a.equals(b)
    assert not np.allclose(a["value"], c["value"])


def test_a_run_without_the_training_evaluation_has_the_same_validation_numbers(small_cfg):
    """``eval.train_split = False`` skips evaluating the training problems: the validation rows (and
    the zero-variance share, counted in training) are those of the run that evaluates both, the
    trace has no other training rows and its snapshots only the validation split; the default
    (``train_split = True``) is left out of the config's id, so ids written before the field are kept."""
    cfg = small_cfg.replace(eval={"snapshot_steps": (0, 30)})
    both, val_only = simulate(cfg, 3), simulate(cfg.replace(eval={"train_split": False}), 3)
    t, v = both.table, val_only.table
    keep = (t["split"] != "train") | (t["metric"] == "zero_var_frac")
    cols = ["step", "compute_rollouts", "compute_tokens", "split", "metric", "value"]
    assert v[cols].reset_index(drop=True).equals(t.loc[keep, cols].reset_index(drop=True))
    assert set(v.loc[v["split"] == "train", "metric"]) == {"zero_var_frac"}
    assert set(val_only.snapshots["split"]) == {"val"}
    assert "train_split" not in cfg.to_dict()["eval"]
    assert cfg.replace(eval={"train_split": False}).to_dict()["eval"]["train_split"] is False
    off = cfg.replace(eval={"train_split": False})
    assert SimConfig.from_json(off.to_json()) == off and off.config_id() != cfg.config_id()
    assert SimConfig.from_json(cfg.to_json()).config_id() == cfg.config_id()


def test_trace_size_grows_with_evaluations_not_steps(small_cfg):
    rows = [len(simulate(small_cfg.replace(allocation={"steps": m}, model={"kind": "tabular"}), 0).table)
            for m in (100, 4000)]
    assert rows[0] == rows[1]


def test_budget_allocation_counts_rollouts(small_cfg):
    cfg = small_cfg.replace(allocation=Allocation(n=8, b_problem=16, budget=5000.0))
    tr = simulate(cfg, 0)
    assert tr.steps == 5000 // 128
    assert tr.table["compute_rollouts"].max() == tr.steps * 128 <= 5000


def test_decoupled_baseline_counts_all_rollouts(small_cfg):
    cfg = small_cfg.replace(algo={"baseline_n": 32}, allocation=Allocation(n=8, b_problem=16, budget=20000.0))
    tr = simulate(cfg, 0)
    assert tr.steps == 20000 // (32 * 16)
    assert tr.table["compute_rollouts"].max() == tr.steps * 32 * 16


def test_lognormal_lengths_count_tokens(small_cfg):
    """Tokens are n times the lengths of the problems drawn. An epoch visits each of the 512
    training problems once (32 steps of 16), so at steps 32 and 64 tokens per rollout is exactly
    the mean length; in between it is the mean over the problems drawn so far, which varies.
    The lengths themselves: log-normal with mean 1000 and log-sd 0.8, checked within 5 standard
    errors estimated from the (fixed) draw."""
    cfg = small_cfg.replace(population={"length_model": "lognormal", "length_sigma": 0.8},
                            allocation={"steps": 64}, eval={"at_steps": (32, 64)})
    lengths = build_population(cfg.population, cfg.model).train.lengths
    t = simulate(cfg, 0).table
    ratio = (t["compute_tokens"] / t["compute_rollouts"].clip(lower=1))[t["step"] > 0]
    assert ratio.nunique() > 1
    for step in (32, 64):
        at = t[t["step"] == step]
        np.testing.assert_allclose(at["compute_tokens"], at["compute_rollouts"] * lengths.mean(), rtol=1e-12)
    se = lengths.std(ddof=1) / np.sqrt(lengths.size)
    assert abs(lengths.mean() - 1000.0) < 5 * se
    log_len = np.log(lengths)
    assert abs(log_len.std(ddof=1) - 0.8) < 5 * 0.8 / np.sqrt(2 * (lengths.size - 1))  # SE of a normal sd


def test_zero_variance_share_matches_theory():
    """P(group all-correct or all-wrong) = p^n + (1-p)^n, with p held fixed (lr ~ 0)."""
    p = np.linspace(0.02, 0.6, 40)
    n = 8
    pop = population_from_pass_rates(p, model=ModelConfig(kind="tabular"))
    cfg = SimConfig(model=ModelConfig(kind="tabular"), population=PopulationConfig(train_size=len(p)),
                    algo=AlgoConfig(optimizer="sgd", lr=1e-12, warmup=0),
                    allocation=Allocation(n=n, b_problem=20, steps=4000), eval=EvalConfig(every=4000))
    t = simulate(cfg, 0, population=pop).table
    frac = t[t["metric"] == "zero_var_frac"]["value"].iloc[-1]
    q = p**n + (1 - p) ** n
    groups = 4000 * 20
    se = np.sqrt(np.mean(q * (1 - q)) / groups)  # epochs visit every problem equally often
    assert abs(frac - q.mean()) < 5 * se


def test_single_problem_tabular_pg_converges_at_rate_one_over_t():
    """Tabular 2-outcome PG (mean baseline, SGD, step eta): t (1 - p_t) levels off near 1 / (eta (n-1)/n)."""
    eta, n = 0.5, 8
    pop = population_from_pass_rates(np.array([0.3]), model=ModelConfig(kind="tabular"))
    cfg = SimConfig(model=ModelConfig(kind="tabular"), population=PopulationConfig(train_size=1),
                    algo=AlgoConfig(advantage="drgrpo", optimizer="sgd", lr=eta, lr_rule="constant", warmup=0),
                    allocation=Allocation(n=n, b_problem=1, steps=16000),
                    eval=EvalConfig(every=2000, ks=(1,)))
    runs = []
    for seed in range(16):
        c = simulate(cfg, seed, population=pop).curve("avg@1", "train")
        runs.append(c["value"].to_numpy())
    steps = c["step"].to_numpy()
    gap = 1 - np.array(runs)  # (seeds, evals)
    tu = steps[None, :] * gap
    mid, end = list(steps).index(4000), list(steps).index(16000)
    ratio = tu[:, end].mean() / tu[:, mid].mean()
    se = np.hypot(se_of_mean(tu[:, end]) / tu[:, end].mean(), se_of_mean(tu[:, mid]) / tu[:, mid].mean())
    clock = eta * (n - 1) / n  # the ODE dz/dt = eta (n-1)/n p (1-p): t (1 - p_t) -> 1 / clock

    def bias(t):
        """Relative deviation of t (1 - p_t) from its limit: the ODE's 2 log(clock t) / (clock t)
        plus 2% for the noise corrections (as in tests/test_theory.py's tabular bound)."""
        return 2 * np.log(clock * t) / (clock * t) + 0.02

    # fixed seeds; tolerances: 4 standard errors over the 16 seeds plus the known bias
    assert abs(ratio - 1) < 4 * se + bias(4000) + bias(16000)  # levelled off: 1 - p_t ~ c / t
    assert gap[:, end].mean() < 0.35 * gap[:, mid].mean()  # while the gap itself keeps shrinking
    target = 1 / clock
    assert abs(tu[:, end].mean() - target) < bias(16000) * target + 4 * se_of_mean(tu[:, end])


def test_null_model_smaller_n_is_at_least_as_good_at_equal_compute():
    """No interference (tabular): at each budget the best n is the smallest, and n* does not grow."""
    base = SimConfig(model=ModelConfig(kind="tabular"),
                     population=PopulationConfig(preset="easy", train_size=512, val_size=32, measure="exact"),
                     eval=EvalConfig(n_evals=4))
    ns = (2, 8, 32, 128)
    best_n = []
    for budget in (2**15, 2**17):
        scores = {}
        for n in ns:
            vals = [simulate(base.replace(allocation=Allocation(n=n, b_problem=16, budget=float(budget))), s)
                    .final("train")["avg@4"] for s in range(3)]
            scores[n] = (np.mean(vals), se_of_mean(vals))
        for small, large in zip(ns, ns[1:]):
            tol = 4 * np.hypot(scores[small][1], scores[large][1])
            assert scores[small][0] >= scores[large][0] - tol, (budget, small, large, scores)
        best_n.append(max(ns, key=lambda n: scores[n][0]))
    assert best_n == sorted(best_n, reverse=True) or best_n[0] == best_n[-1] == ns[0]
    assert best_n[-1] == ns[0]


def test_mixture_reports_per_band_validation():
    cfg = SimConfig(population=PopulationConfig(preset="mixture", mixture_weights=(("hard", 0.5), ("easy", 0.5)),
                                                train_size=400, val_size=60, measure="exact"),
                    model=ModelConfig(n_strategies=16, rank=4),
                    allocation=Allocation(n=8, b_problem=16, steps=20), eval=EvalConfig(n_evals=3))
    t = simulate(cfg, 0).table
    assert {"train", "val", "val/hard", "val/easy"} == set(t["split"])
    at0 = t[(t["step"] == 0) & (t["metric"] == "avg@1")].set_index("split")["value"]
    assert at0["val/hard"] < 0.0625 < 0.3 < at0["val/easy"]
    assert at0["val"] == pytest.approx((at0["val/hard"] + at0["val/easy"]) / 2)


def test_sampled_estimates_agree_with_exact(small_cfg):
    """``<kind>@k:sampled`` is the mean over N problems of an unbiased estimate from m samples
    per problem. Given the pass rates p_i (snapshots at every evaluation), its standard error is
    sqrt(sum_i Var_i) / N with Var_i = sum_c Binom(c; m, p_i) est(c)^2 - exact(p_i)^2, computed
    exactly from the estimator's closed form (written here independently). Fixed seed; every
    estimate within 5 standard errors of the exact value."""
    from scipy.special import comb
    from scipy.stats import binom

    from isosim.sim.run import eval_steps

    m, N = 64, 400
    cfg = small_cfg.replace(eval={"sampled": m, "ks": (1, 4)}, population={"val_size": N})
    steps = eval_steps(cfg.allocation.resolved_steps(cfg.algo), cfg.eval)
    tr = simulate(cfg.replace(eval={"snapshot_steps": tuple(int(s) for s in steps)}), 0)
    v = tr.table[tr.table["split"] == "val"].pivot_table(index="step", columns="metric", values="value")
    assert v.index.tolist() == steps.tolist()
    c = np.arange(m + 1)
    for step in steps:
        p = tr.snapshots.query("step == @step and split == 'val'")["pass_rate"].to_numpy()
        assert p.size == N
        pmf = binom.pmf(c[None, :], m, p[:, None])  # (N, m + 1)
        for k in (1, 4):
            for kind, est, exact in (("avg", c / m, p), ("best", 1 - comb(m - c, k) / comb(m, k), 1 - (1 - p) ** k),
                                     ("worst", comb(c, k) / comb(m, k), p**k)):
                var = pmf @ est**2 - exact**2
                se = np.sqrt(var.clip(min=0).sum()) / N
                assert se > 1e-4
                assert v.loc[step, f"{kind}@{k}"] == pytest.approx(exact.mean(), rel=1e-12)
                assert abs(v.loc[step, f"{kind}@{k}:sampled"] - exact.mean()) < 5 * se, (step, kind, k, se)


def _pass_rates_after(cfg, steps, seed=0):
    import importlib

    sm = importlib.import_module("isosim.sim.run")
    from isosim.sim import kernels
    from isosim.sim.population import build_population

    pop = build_population(cfg.population, cfg.model)
    S, r = pop.train.problems.base_logits.shape[1], pop.train.problems.features.shape[1]
    fpar, ipar = sm.kernel_params(cfg)
    st = sm.initial_state(len(pop.train), S, r)
    data = sm.train_data(pop.train, cfg)
    kernels.train_steps(np.random.default_rng(seed), data, st, fpar, ipar, 0, steps)
    out = {}
    for name, ps, use_u in (("train", pop.train, True), ("val", pop.val, False)):
        out[name] = sm._evaluate(kernels, ps, st, fpar, use_u)[0]
    return out, st


@pytest.mark.parametrize("kind", ["strategies", "features"])
def test_knobs_switch_transfer_and_interference(small_cfg, kind):
    """shared = 0: validation problems never move (no transfer) and unsampled training problems
    never move (no interference); shared > 0 moves both."""
    cfg = small_cfg.replace(model={"kind": kind}, allocation={"b_problem": 16, "steps": 5})
    base = _pass_rates_after(cfg, 0)[0]
    local_only, st = _pass_rates_after(cfg.replace(model={"shared": 0.0, "local": 1.0}), 5)
    assert np.allclose(local_only["val"], base["val"])
    untouched = st.t_U == 0  # training problems never sampled in 5 steps of 16
    assert untouched.sum() > 0
    assert np.allclose(local_only["train"][untouched], base["train"][untouched])
    assert not np.allclose(local_only["train"][~untouched], base["train"][~untouched])
    shared, st = _pass_rates_after(cfg.replace(model={"shared": 1.0, "local": 0.0}, algo={"lr": 0.1}), 5)
    assert not np.allclose(shared["val"], base["val"])
    assert not np.allclose(shared["train"][untouched], base["train"][untouched])


def test_features_common_sets_transfer_direction():
    """With common = 1 every feature vector is the same: training moves validation pass rates up,
    like the training set; with common = 0 the cross-talk has no preferred sign."""
    gains = {}
    for common in (1.0, 0.0):
        cfg = SimConfig(model=ModelConfig(kind="features", common=common, dim=64, shared=1.0, local=0.0),
                        population=PopulationConfig(preset="hard", train_size=400, val_size=200, measure="exact"),
                        algo=AlgoConfig(optimizer="sgd", lr=0.5), allocation=Allocation(n=16, b_problem=32, steps=100))
        before = _pass_rates_after(cfg, 0)[0]["val"].mean()
        after = _pass_rates_after(cfg, 100)[0]["val"].mean()
        gains[common] = after - before
    assert gains[1.0] > 0.05
    assert abs(gains[0.0]) < 0.5 * gains[1.0]


def test_pass_rate_histogram_metrics_match_the_snapshots(small_cfg):
    cfg = small_cfg.replace(eval={"hist_bins": 5, "snapshot_steps": (small_cfg.allocation.steps,)})
    tr = simulate(cfg, seed=2)
    last = tr.table[(tr.table["step"] == tr.steps) & (tr.table["split"] == "train")]
    hist = last[last["metric"].str.startswith("hist:")].set_index("metric")["value"]
    assert list(hist.index) == [f"hist:{i}/5" for i in range(5)]
    p = tr.snapshots[(tr.snapshots["step"] == tr.steps) & (tr.snapshots["split"] == "train")]["pass_rate"]
    expected = np.histogram(p, bins=5, range=(0, 1))[0] / len(p)
    assert np.allclose(hist.to_numpy(), expected) and abs(hist.sum() - 1) < 1e-12


def test_execution_bounds_held_out_problems_and_only_memorisation_lifts_it(small_cfg):
    """Execution noise: a problem's pass rate is ``e_i * (mass on correct strategies)``, so no
    amount of shared learning takes a validation problem above its ``e_i``; a training problem
    goes above it only through its memorised execution offset (``local > 0``). On the shared path
    as it was written (full-size steps for a problem's own offsets, a base policy of spread 2)."""
    from isosim.sim.models.base import execution_rates
    from isosim.sim.population import build_population

    cfg = small_cfg.replace(model={"execution_a": 2.0, "execution_b": 1.0, "shared": 1.0, "local_share": False,
                                   "prior_scale": 2.0, "embed_scale": 2.0}, algo={"adam_eps": 1e-8},
                            allocation={"n": 8, "b_problem": 16, "steps": 400}, eval={"snapshot_steps": (400,)})
    pop = build_population(cfg.population, cfg.model)
    e_train, e_val = (execution_rates(ps.problems.execution) for ps in (pop.train, pop.val))
    assert np.isfinite(pop.train.problems.execution).all() and e_val.min() < 0.9
    for local, train_above in ((0.0, False), (1.0, True)):
        run = cfg.replace(model={"local": local})
        snap = simulate(run, 0, population=pop).snapshots
        p_val = snap[snap["split"] == "val"].sort_values("problem")["pass_rate"].to_numpy()
        p_train = snap[snap["split"] == "train"].sort_values("problem")["pass_rate"].to_numpy()
        assert np.all(p_val <= e_val + 1e-12)
        assert np.mean(p_val / e_val) > 0.5  # the strategies part did learn
        assert (np.max(p_train - e_train) > 0.01) == train_above
        assert np.all(p_train <= e_train + 1e-12) == (not train_above)


def test_models_without_execution_noise_draw_no_extra_random_numbers(small_cfg):
    """``execution_a = 0`` is the model without execution noise: every execution logit is +inf,
    and training consumes the same random stream as a kernel that never heard of execution
    (the wins of a correct type are its counts, no binomial draws)."""
    import copy

    from isosim.sim import kernels
    from isosim.sim import run as sm
    from isosim.sim.population import build_population

    cfg = small_cfg.replace(model={"execution_a": 0.0, "prior_scale": 2.0, "embed_scale": 2.0})  # enough easy-band problems without it
    pop = build_population(cfg.population, cfg.model)
    assert np.isinf(pop.train.problems.execution).all()
    fpar, ipar = sm.kernel_params(cfg)
    st = sm.initial_state(len(pop.train), 16, 4)
    data = sm.train_data(pop.train, cfg)
    rng = np.random.default_rng(3)
    shadow = copy.deepcopy(rng)
    kernels.train_steps(rng, data, st, fpar, ipar, 0, 1)
    # the same step by hand: the epoch shuffle, then one categorical draw per rollout (n <= 32)
    shadow.shuffle(np.arange(len(pop.train)))
    shadow.random(cfg.allocation.n * cfg.allocation.b_problem)
    assert rng.bit_generator.state == shadow.bit_generator.state
