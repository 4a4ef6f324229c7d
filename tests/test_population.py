import numpy as np
import pandas as pd
import pytest

from isosim import IsosimInputError, ModelConfig, PopulationConfig, build_population, load_pass_rates
from isosim.sim.population import population_from_pass_rates

SMALL = dict(train_size=300, val_size=50)


@pytest.mark.parametrize("kind", ["strategies", "features", "tabular"])
@pytest.mark.parametrize("band, lo, hi", [("easy", 0.3, 0.6), ("hard", 0.0, 0.0625), ("very-easy", 0.6, 0.9)])
def test_exact_bands(kind, band, lo, hi):
    pop = build_population(PopulationConfig(preset=band, measure="exact", **SMALL), ModelConfig(kind=kind))
    for ps in (pop.train, pop.val):
        p = ps.base_pass
        assert np.all((p >= lo) & (p <= hi))
    assert len(pop.train) == 300 and len(pop.val) == 50


def test_sampled_measurement_is_avg16_and_leaks_like_the_study():
    pop = build_population(PopulationConfig(preset="easy", **SMALL), ModelConfig())
    p = pop.train.base_pass
    # measured avg@16 in [0.3, 0.6] admits true pass rates outside the band, but not far outside
    assert 0.2 < p.mean() < 0.65
    assert np.mean((p >= 0.3) & (p <= 0.6)) > 0.4


def test_extremely_hard_expects_under_two_successes_in_128_samples():
    """Selected by one measured pass@128 = 0, as in the study: fewer than two expected successes
    in 128 fresh samples, far below the hard band. (How often 128 fresh samples all fail depends
    on the model: E[(1-p)^128] is 0.39 with the default, 0.79 with 64 strategies and prior scale 4.)"""
    pop = build_population(PopulationConfig(preset="extremely-hard", **SMALL), ModelConfig())
    p = pop.train.base_pass
    hard = build_population(PopulationConfig(preset="hard", **SMALL), ModelConfig()).train.base_pass
    assert p.mean() < 2 / 128 and p.max() < 0.1
    assert p.mean() < hard.mean() / 2


def test_validation_problems_are_fresh_draws():
    pop = build_population(PopulationConfig(preset="easy", **SMALL), ModelConfig())
    tr = {tuple(np.round(r, 12)) for r in pop.train.problems.base_logits}
    assert not any(tuple(np.round(r, 12)) in tr for r in pop.val.problems.base_logits)


def test_mixture_proportions_and_labels():
    cfg = PopulationConfig(preset="mixture", mixture_weights=(("hard", 0.5), ("easy", 0.25), ("very-easy", 0.25)),
                           train_size=400, val_size=40, measure="exact")
    pop = build_population(cfg, ModelConfig())
    bands, counts = np.unique(pop.train.band.astype(str), return_counts=True)
    assert dict(zip(bands, counts)) == {"hard": 200, "easy": 100, "very-easy": 100}
    assert np.all(pop.train.base_pass[pop.train.band == "hard"] <= 0.0625)


def test_population_is_deterministic_per_data_seed():
    a = build_population(PopulationConfig(preset="hard", **SMALL), ModelConfig())
    b = build_population(PopulationConfig(preset="hard", seed=1, **SMALL), ModelConfig())
    assert not np.allclose(a.train.base_pass, b.train.base_pass)
    from isosim.sim.population import _build_cached

    _build_cached.cache_clear()
    c = build_population(PopulationConfig(preset="hard", **SMALL), ModelConfig())
    np.testing.assert_array_equal(a.train.base_pass, c.train.base_pass)


@pytest.mark.parametrize("kind", ["strategies", "features", "tabular"])
def test_population_from_pass_rates_is_exact(kind):
    target = np.array([0.02, 0.1, 0.45, 0.9, 0.999])
    pop = population_from_pass_rates(target, model=ModelConfig(kind=kind))
    np.testing.assert_allclose(pop.train.base_pass, target, rtol=1e-9)


def test_load_pass_rates_formats(tmp_path):
    (tmp_path / "a.csv").write_text("problem,avg@16\n1,0.25\n2,0.5\n")
    np.testing.assert_allclose(load_pass_rates(tmp_path / "a.csv"), [0.25, 0.5])
    (tmp_path / "b.csv").write_text("correct,samples\n3,16\n0,8\n")
    np.testing.assert_allclose(load_pass_rates(tmp_path / "b.csv"), [3 / 16, 0.0])
    (tmp_path / "c.txt").write_text("0.1\n0.2\n0.3\n")
    np.testing.assert_allclose(load_pass_rates(tmp_path / "c.txt"), [0.1, 0.2, 0.3])
    pd.DataFrame({"pass_rate": [0.3, 0.7]}).to_parquet(tmp_path / "d.parquet")
    np.testing.assert_allclose(load_pass_rates(tmp_path / "d.parquet"), [0.3, 0.7])


@pytest.mark.parametrize("text, message", [
    ("pass_rate\n0.2\n1.3\n", "outside"),
    ("pass_rate\n0.2\nnan\n", "not a finite number"),
    ("pass_rate\n0.2\nabc\n", "not a finite number"),
    ("correct,samples\n5,4\n", "counts must be"),
    ("foo,bar\n1,2\n", "expected a 'pass_rate'"),
    ("pass_rate\n", "no problems"),
])
def test_load_pass_rates_errors(tmp_path, text, message):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(IsosimInputError, match=message):
        load_pass_rates(f)


def test_file_population(tmp_path):
    f = tmp_path / "rates.csv"
    rates = np.linspace(0.05, 0.95, 50)
    pd.DataFrame({"pass_rate": rates}).to_csv(f, index=False)
    pop = build_population(PopulationConfig(preset="file", path=str(f), val_size=30), ModelConfig())
    np.testing.assert_allclose(np.sort(pop.train.base_pass), rates, rtol=1e-9)
    assert len(pop.val) == 30 and np.all(np.isin(np.round(pop.val.base_pass, 9), np.round(rates, 9)))


def test_skill_link_keeps_each_strategys_solve_rate_and_ties_it_to_the_embedding():
    """Y[i, s] = 1{sqrt(rho) (z W)_s + sqrt(1 - rho) e > Phi^-1(1 - q_s)}: P(Y = 1) = q_s for any rho;
    with rho > 0 the embedding predicts Y, with rho = 0 it does not."""
    from isosim.sim.models import strategies

    rng = np.random.default_rng(3)
    size = 20000
    for rho in (0.0, 0.7):
        cfg = ModelConfig(skill_link=rho, n_strategies=8, rank=4)
        world = strategies.make_world(cfg, rng)
        probs = strategies.draw(cfg, world, rng, size)
        q = world["generality"]
        se = np.sqrt(q * (1 - q) / size)
        assert np.all(np.abs(probs.rewards.mean(axis=0) - q) < 5 * se + 1e-12)
        if rho == 0:
            assert "W" not in world
            continue
        score = probs.features @ world["W"]  # (z W)_s
        for s in np.flatnonzero((q > 0.05) & (q < 0.95)):
            y = probs.rewards[:, s].astype(bool)
            diff = score[y, s].mean() - score[~y, s].mean()
            se_d = np.sqrt(score[y, s].var() / y.sum() + score[~y, s].var() / (~y).sum())
            assert diff > 5 * se_d


def test_skill_link_zero_is_the_independent_generator():
    """With rho = 0 the generator draws exactly what the independent model draws."""
    from isosim.sim.models import strategies

    cfg = ModelConfig(skill_link=0.0)
    a = strategies.draw(cfg, strategies.make_world(cfg, np.random.default_rng(1)), np.random.default_rng(2), 50)
    rng = np.random.default_rng(2)
    world = strategies.make_world(cfg, np.random.default_rng(1))
    z = rng.normal(size=(50, cfg.rank))
    y = (rng.random((50, cfg.n_strategies)) < world["generality"][None, :]).astype(float)
    assert np.array_equal(a.rewards, y) and np.array_equal(a.features, z)


def test_a_stratified_world_fixes_the_values_and_the_favourites_generalities():
    """world_draw "stratified": beta0 is prior_scale times the S normal quantiles and q the S Beta
    quantiles, in every world; the generality at each preference rank is the same from world to
    world, and the first ranks' generalities spread over the distribution; the rest of the world
    (V0, W) is the random world's draw, and "random" is the generator as it was."""
    from statistics import NormalDist

    from scipy.stats import beta as beta_dist

    from isosim.sim.models import strategies

    cfg = ModelConfig(world_draw="stratified", n_strategies=64)
    u = (np.arange(64) + 0.5) / 64
    by_rank = []
    for seed in (1, 2, 3):
        world = strategies.make_world(cfg, np.random.default_rng(seed))
        plain = strategies.make_world(ModelConfig(n_strategies=64), np.random.default_rng(seed))
        assert np.allclose(np.sort(world["beta0"]), 10.0 * np.array([NormalDist().inv_cdf(x) for x in u]))
        assert np.allclose(np.sort(world["generality"]), beta_dist.ppf(u, 0.5, 4.0))
        assert np.array_equal(world["V0"], plain["V0"]) and np.array_equal(world["W"], plain["W"])
        by_rank.append(world["generality"][np.argsort(-world["beta0"])])
    assert np.array_equal(by_rank[0], by_rank[1]) and np.array_equal(by_rank[0], by_rank[2])
    top = np.searchsorted(np.sort(by_rank[0]), by_rank[0][:8])  # quantile indices of the 8 favourites
    assert np.all(np.histogram(top, bins=4, range=(0, 64))[0] == 2)
    favourites = [np.argsort(-strategies.make_world(cfg, np.random.default_rng(s))["beta0"])[0] for s in range(6)]
    assert len(set(favourites)) > 1  # which strategy is the favourite is still drawn


def test_validation_bands_can_differ_from_training():
    cfg = PopulationConfig(preset="hard", val_mixture_weights=(("easy", 0.5), ("very-easy", 0.5)), measure="exact",
                           **SMALL)
    pop = build_population(cfg, ModelConfig())
    assert set(pop.train.band) == {"hard"} and pop.train.base_pass.max() <= 0.0625
    assert sorted(set(pop.val.band)) == ["easy", "very-easy"]
    assert np.all(pop.val.base_pass[pop.val.band == "very-easy"] >= 0.6)
    with pytest.raises(IsosimInputError, match="unknown band"):
        PopulationConfig(val_mixture_weights=(("medium", 1.0),)).validate()


def test_confidence_flattens_only_the_problems_the_base_policy_rarely_solves():
    """kappa_i = floor + (1 - floor)(1 - exp(-q_i / knee)): 1 where q_i >> knee, floor at q_i = 0,
    monotone in q_i; floor 1 draws exactly the unscaled generator."""
    from isosim.sim.models import strategies

    cfg = ModelConfig(confidence_floor=0.2, confidence_knee=0.05)
    q = np.linspace(0.0, 1.0, 201)
    k = strategies.confidence(cfg, q)
    assert k[0] == pytest.approx(0.2) and np.all(np.diff(k) > 0) and np.all(k <= 1.0)
    assert np.all(k[q >= 0.3] > 1 - 0.8 * np.exp(-6) - 1e-12)
    off = ModelConfig(confidence_floor=1.0)
    world = strategies.make_world(off, np.random.default_rng(1))
    a = strategies.draw(off, world, np.random.default_rng(2), 200)
    b = strategies.draw(cfg, world, np.random.default_rng(2), 200)
    assert np.array_equal(a.rewards, b.rewards) and np.array_equal(a.features, b.features)
    from isosim.sim.models.base import pass_rates_of_logits

    q0 = pass_rates_of_logits(a.base_logits, a.rewards)
    assert np.allclose(b.base_logits, a.base_logits * strategies.confidence(cfg, q0)[:, None])


def test_a_less_confident_base_brings_the_hard_bands_right_strategies_within_reach():
    """The mechanism behind the hard set's learning: with a calibrated base (floor < 1) fewer hard
    problems have their right strategies many nats below the base's favourites, and the hard band's
    base pass rate rises, while the easy band's problems (q_i well above the knee) keep their shape."""
    from isosim.sim.models.base import log_odds_of_logits

    out = {}
    for floor in (1.0, 0.2):
        model = ModelConfig(confidence_floor=floor, confidence_knee=0.02)
        hard = build_population(PopulationConfig(preset="hard", measure="exact", train_size=50, val_size=400), model)
        easy = build_population(PopulationConfig(preset="easy", measure="exact", train_size=50, val_size=400), model)
        far = np.mean(log_odds_of_logits(hard.val.problems.base_logits, hard.val.problems.rewards) < -8)
        out[floor] = (far, hard.val.base_pass.mean(), easy.val.base_pass.mean())
    assert out[0.2][0] < out[1.0][0] - 0.2
    assert out[0.2][1] > 2 * out[1.0][1]
    assert abs(out[0.2][2] - out[1.0][2]) < 0.05


def test_population_cache_holds_every_set_the_findings_train_on():
    """A worker that runs the findings' sweeps keeps every population it builds: the number of
    distinct (population, generator) pairs of the sweeps fits in the cache at both scales."""
    from isosim.sim.population import POPULATION_CACHE, _build_cached, generator_key
    from isosim.study.findings import sweep_specs

    assert _build_cached.cache_info().maxsize == POPULATION_CACHE
    for scale in ("quick", "full"):
        sets = {(s.base.population, generator_key(s.base.model)) for s in sweep_specs(scale).values()}
        assert 1 < len(sets) <= POPULATION_CACHE
