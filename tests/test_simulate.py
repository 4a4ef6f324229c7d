"""Invariants of a run, theory checks, and the null result of the tabular model."""
import numpy as np
import pytest
from _stats import se_of_mean

from isosim import AlgoConfig, Allocation, EvalConfig, ModelConfig, PopulationConfig, SimConfig, simulate
from isosim.sim.population import population_from_pass_rates


def test_trace_invariants(small_cfg):
    cfg = small_cfg.replace(eval={"snapshot_steps": (0, 30, 60), "ks": (1, 4, 8)},
                            algo={"kl_coef": 0.01, "entropy_coef": 0.001})
    tr = simulate(cfg, 0)
    t = tr.table
    a = cfg.allocation
    assert (t["compute_rollouts"] == t["step"] * a.n * a.b_problem).all()
    assert t["step"].max() == a.steps
    rates = t[t["metric"].str.contains("@")]["value"]
    assert ((rates >= 0) & (rates <= 1)).all()
    assert (t[t["metric"] == "entropy"]["value"] >= 0).all()
    assert (t[t["metric"] == "kl"]["value"] >= 0).all()
    assert set(t["split"]) == {"train", "val"}
    assert {"avg@8", "best@8", "worst@8", "zero_var_frac"} <= set(t["metric"])
    # tokens: constant length 1000 per rollout
    assert np.allclose(t["compute_tokens"], t["compute_rollouts"] * 1000.0)
    snaps = tr.snapshots
    assert set(snaps["step"]) == {0, 30, 60}
    assert ((snaps["pass_rate"] >= 0) & (snaps["pass_rate"] <= 1)).all()
    assert len(snaps[(snaps["step"] == 0) & (snaps["split"] == "train")]) == 512
    # KL is zero at the reference policy and entropy is maximal-ish there
    k0 = t[(t["step"] == 0) & (t["metric"] == "kl")]["value"]
    assert np.allclose(k0, 0.0)


def test_same_seed_same_trace_other_seed_other_trace(small_cfg):
    a, b, c = simulate(small_cfg, 5).table, simulate(small_cfg, 5).table, simulate(small_cfg, 6).table
    assert a.equals(b)
    assert not np.allclose(a["value"], c["value"])


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
    cfg = small_cfg.replace(population={"length_model": "lognormal", "length_sigma": 0.8})
    t = simulate(cfg, 0).table
    ratio = (t["compute_tokens"] / t["compute_rollouts"].clip(lower=1))[t["step"] > 0]
    assert ratio.nunique() > 1 and 300 < ratio.mean() < 3000


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
    assert abs(ratio - 1) < 0.1 + 4 * se  # levelled off: 1 - p_t ~ c / t
    assert gap[:, end].mean() < 0.35 * gap[:, mid].mean()  # while the gap itself keeps shrinking
    target = 1 / (eta * (n - 1) / n)  # from the ODE dz/dt = eta (n-1)/n p (1-p)
    assert abs(tu[:, end].mean() - target) < 0.15 * target + 4 * se_of_mean(tu[:, end])


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
    cfg = small_cfg.replace(eval={"sampled": 64, "ks": (1, 4)}, population={"val_size": 400})
    t = simulate(cfg, 0).table
    v = t[t["split"] == "val"].pivot_table(index="step", columns="metric", values="value")
    for m in ("avg@4", "best@4", "worst@4"):
        # per-problem variance of an estimate <= 1/4 / ... bounded by 0.25 / samples-free: use 5 / sqrt(N) * 0.5
        assert np.all(np.abs(v[m] - v[f"{m}:sampled"]) < 5 * 0.5 / np.sqrt(400))


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
        cfg = SimConfig(model=ModelConfig(kind="features", common=common, dim=64),
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
