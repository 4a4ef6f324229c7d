"""``isosim calibrate``: the knob registry, the pilots' noise, the config file, the recovery of
n*(C) from simulated pilots, and the command line with ``isosim plan --model-config``."""
import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from isosim import SimConfig
from isosim.calibrate import KNOBS, calibrate, read_model_config
from isosim.calibrate import knobs as K
from isosim.calibrate.config_file import model_config_text
from isosim.calibrate.pilots import noise_between_seeds, noise_within_runs, read_pilots
from isosim.cli import main
from isosim.errors import IsosimInputError
from isosim.plan.planner import ensemble_level
from isosim.sim.population import population_from_pass_rates
from isosim.sim.run import simulate

# --- the knob registry ---------------------------------------------------------------------


@pytest.mark.parametrize("name", list(KNOBS))
def test_every_knob_maps_to_a_config_field_within_its_bounds(name):
    k = KNOBS[name]
    assert k.meaning and k.scale in ("log", "linear") and k.lo < k.hi
    for x in (k.lo, k.hi, 0.5 * (k.lo + k.hi)):
        cfg = K.apply(SimConfig(), {name: x})
        cfg.validate()
        assert k.value(cfg) == pytest.approx(x)
        assert k.from_unit(k.to_unit(x)) == pytest.approx(x)
    assert k.to_unit(k.lo) == 0.0 and k.to_unit(k.hi) == pytest.approx(1.0)
    assert k.lo <= k.value(SimConfig()) <= k.hi  # the default starts inside the box


def test_unknown_knob_is_refused():
    with pytest.raises(IsosimInputError, match="unknown knob"):
        K.knobs_of(["lr", "nope"])


# --- the pilots' noise -----------------------------------------------------------------------

def _curves(sigma: float, tau: float, seeds: int = 3, points: int = 40, seed: int = 0) -> pd.DataFrame:
    """Runs at n = 2 and 8: a smooth rising curve in log compute, a per-run offset ~ N(0, tau^2)
    and white noise ~ N(0, sigma^2) on every evaluation."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in (2, 8):
        c = np.unique(np.round(np.geomspace(16 * n, 2**16, points)))
        for s in range(seeds):
            off = rng.normal(0, tau)
            y = 0.2 + 0.5 / (1 + np.exp(-(np.log(c) - 8.0))) + off + rng.normal(0, sigma, c.size)
            rows += [(f"n{n}-s{s}", n, 8, float(ci), float(yi)) for ci, yi in zip(c, y)]
    return pd.DataFrame(rows, columns=["run", "n", "B_problem", "compute", "avg@1"])


def test_noise_estimators_recover_the_noise_they_are_built_for():
    """White noise sigma and a lasting per-run offset tau: the within-run estimator sees sigma,
    the between-seed one sqrt(sigma^2 + tau^2). Tolerances: 4 standard errors of each estimate
    (about 1.2 / sqrt(m) relative for the median-based one from m residuals, 1 / sqrt(2 df) for
    the pooled variance with df degrees of freedom), plus the seed offsets' own sampling error."""
    sigma = 0.01
    t = _curves(sigma, 0.0).rename(columns={"avg@1": "value"})
    m = sum(len(g) - 2 for _, g in t.groupby("run"))
    assert noise_within_runs(t) == pytest.approx(sigma, rel=4 * 1.2 / math.sqrt(m))
    df = sum(g["compute"].nunique() * (g["run"].nunique() - 1) for _, g in t.groupby("n"))
    assert noise_between_seeds(t) == pytest.approx(sigma, rel=4 / math.sqrt(2 * df))
    lasting = _curves(sigma, 0.03, seeds=12, seed=1).rename(columns={"avg@1": "value"})
    assert noise_within_runs(lasting) == pytest.approx(sigma, rel=0.2)
    # 2 x 11 degrees of freedom for the offsets: relative SE about 1 / sqrt(44)
    assert noise_between_seeds(lasting) == pytest.approx(math.hypot(sigma, 0.03), rel=4 / math.sqrt(44))
    p = read_pilots(_curves(sigma, 0.0), "avg@1")
    assert p.noise_sd == p.noise_between_seeds and p.base_level is None and p.budget == 2**16


@pytest.mark.parametrize("edit, message", [
    (lambda d: d[d["n"] == 2], "two or more distinct n"),
    (lambda d: d.assign(**{"avg@1": d["avg@1"].where(d.index != 5)}), "finite number on every row"),
    (lambda d: d.assign(**{"avg@1": d["avg@1"].astype(object).where(d.index != 3, "nan")}), "finite number"),
    (lambda d: d.assign(**{"avg@1": d["avg@1"] + 1.0}), r"lie in \[0, 1\]"),
    (lambda d: d[d["run"].str.endswith("s0")].groupby("run").head(2), "at least two evaluations after compute 0"),
    (lambda d: d.drop(columns="B_problem"), "missing column"),
])
def test_bad_pilots_are_one_line_errors(edit, message):
    with pytest.raises(IsosimInputError, match=message):
        read_pilots(edit(_curves(0.01, 0.0, points=6).assign(compute=lambda d: d["compute"].where(
            d.groupby("run").cumcount() > 0, 0.0))), "avg@1")


def test_unknown_metric_and_missing_noise_are_refused():
    with pytest.raises(IsosimInputError, match="unknown metric"):
        read_pilots(_curves(0.01, 0.0), "pass@1")
    one = _curves(0.01, 0.0, seeds=1).groupby("run").head(2)
    with pytest.raises(IsosimInputError, match="noise"):
        read_pilots(one, "avg@1")


# --- the training reward ---------------------------------------------------------------------

def _training(sd: float = 0.05, steps: int = 256, seed: int = 0) -> pd.DataFrame:
    """Per-step training rewards of runs at n = 2 and 8 (B_problem 8): a rising mean plus white
    noise of sd ``sd``, every step logged."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in (2, 8):
        for s in (0, 1):
            st = np.arange(1, steps + 1)
            y = np.clip(0.3 + 0.4 * st / steps + rng.normal(0, sd, st.size), 0, 1)
            rows += [(f"n{n}-s{s}", n, 8, int(a), float(b)) for a, b in zip(st, y)]
    return pd.DataFrame(rows, columns=["run", "n", "B_problem", "step", "train_reward"])


def test_training_reward_is_binned_by_half_doublings_with_its_standard_error():
    """Bins of half a doubling of compute: a bin's compute is the geometric mean of its rows', its
    value their mean, its standard error the run's step-to-step noise over sqrt(count). The noise
    (white, sd 0.05 on a slowly rising mean) is recovered within 4 standard errors of the robust
    estimator (about 1.2 / sqrt(m) relative from m residuals)."""
    from isosim.calibrate.pilots import TRAIN_BINS_PER_DOUBLING, read_training

    raw = _training()
    t = read_training(raw)
    assert list(t.columns) == ["run", "n", "B_problem", "compute", "value", "se"]
    for run, g in t.groupby("run"):
        r = raw[raw["run"] == run]
        c = (r["step"] * r["n"] * r["B_problem"]).to_numpy(float)
        key = np.floor(np.log2(c) * TRAIN_BINS_PER_DOUBLING + 1e-9)
        assert len(g) == np.unique(key).size
        last = key == key.max()
        assert g["compute"].iloc[-1] == pytest.approx(float(np.exp(np.log(c[last]).mean())))
        assert g["value"].iloc[-1] == pytest.approx(float(r["train_reward"].to_numpy()[last].mean()))
        sd = g["se"].iloc[-1] * math.sqrt(int(last.sum()))
        assert sd == pytest.approx(0.05, rel=4 * 1.2 / math.sqrt(len(r) - 2))
    p = read_pilots(_curves(0.01, 0.0).assign(train_reward=0.5), "avg@1", True)  # a column on the pilot rows
    assert set(p.train["n"]) == {2, 8} and (p.train["value"] == 0.5).all()
    assert read_pilots(_curves(0.01, 0.0).assign(train_reward=0.5), "avg@1").train is None  # only when asked
    with pytest.raises(IsosimInputError, match="needs a train_reward column"):
        read_pilots(_curves(0.01, 0.0), "avg@1", True)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.assign(train_reward=d["train_reward"] + 1.0), r"lie in \[0, 1\]"),
    (lambda d: d.assign(train_reward=np.nan), "no finite train_reward"),
    (lambda d: d.assign(B_problem=16), "no validation pilot at that allocation"),
    (lambda d: d.groupby("run").head(2), "cannot estimate the training reward's noise"),
    (lambda d: d[d["step"].isin([8, 9, 10, 11])], "at least two bins"),
])
def test_bad_training_rows_are_one_line_errors(edit, message):
    from isosim.calibrate.pilots import read_training

    with pytest.raises(IsosimInputError, match=message):
        read_training(edit(_training()), {(2, 8), (8, 8)})


def test_the_surrogate_compares_the_training_reward_with_its_training_problems():
    """With a training reward, the compared points are the validation evaluations then the bins,
    weighted by one over their noise, and the surrogate's value at a bin is its mean-field
    training avg@1 at that compute."""
    from isosim.calibrate.surrogate import Surrogate
    from isosim.plan.meanfield import mean_field

    rng = np.random.default_rng(3)
    train = rng.binomial(16, rng.beta(0.6, 1.6, 60)) / 16
    base = SimConfig().replace(**TINY)
    pilots = read_pilots(_curves(0.01, 0.0, points=8).assign(B_problem=8, compute=lambda d: d["compute"] // 8 * 8),
                         "avg@1", _training(steps=64))
    sur = Surrogate(pilots, train, train, base, K.knobs_of(["lr"]), seed=0)
    nv, nt = len(pilots.fitted), len(pilots.train)
    assert sur.y.size == nv + nt and sur.weights[:nv] == pytest.approx(1 / pilots.noise_sd)
    assert sur.weights[nv:] == pytest.approx(1 / pilots.train["se"].to_numpy())
    out = sur.values({"lr": 0.02})
    n, bp, steps = [g for g in pilots.groups if g[0] == 2][0]
    cfg = sur.config({"lr": 0.02}).replace(allocation={"n": n, "b_problem": bp, "steps": steps, "budget": 0.0})
    curve = mean_field(cfg, sur.population(cfg), max_train=3000, seed=0).curve("avg@1", split="train")
    sel = np.flatnonzero(pilots.train["n"].to_numpy() == 2)
    expect = np.interp(np.log(pilots.train["compute"].to_numpy(float)[sel]),
                       np.log(np.maximum(curve["compute_rollouts"].to_numpy(float), 1.0)), curve["value"].to_numpy(float))
    assert out[nv + sel] == pytest.approx(expect)


# --- the config file -------------------------------------------------------------------------

def test_the_model_config_is_a_plain_config_with_its_ensemble_on_comment_lines(tmp_path):
    cfg = K.apply(SimConfig(), {"lr": 0.01, "skill_link": 0.3})
    ensemble = [{"lr": 0.01, "skill_link": 0.3}, {"lr": 0.02, "skill_link": 0.5}]
    text = model_config_text(cfg, ensemble, {"metric": "avg@1", "fit_rmse": 0.01})
    assert SimConfig.from_toml(text).config_id() == cfg.config_id()  # every config reader takes it
    path = tmp_path / "calib.toml"
    path.write_text(text)
    read = read_model_config(path)
    assert read.config.config_id() == cfg.config_id() and read.ensemble == tuple(ensemble)
    assert read.info["metric"] == "avg@1"
    assert [m.algo.lr for m in read.members()] == [0.01, 0.02]
    # an ordinary [calibration] table is read the same way
    table = tmp_path / "table.toml"
    table.write_text(cfg.to_toml() + "\n[calibration]\nmetric = 'avg@1'\n[[calibration.ensemble]]\nlr = 0.05\n")
    assert read_model_config(table).ensemble == ({"lr": 0.05},)
    plain = tmp_path / "plain.toml"
    plain.write_text(cfg.to_toml())
    assert read_model_config(plain).members()[0].config_id() == cfg.config_id()
    for bad, message in (("#@ [[calibration.ensemble]]\n#@ nope = 1.0\n", "unknown knob"),
                         ("#@ [[calibration.ensemble]]\n#@ lr = nan\n", "finite number"),
                         ("#@ [[calibration.ensemble]]\n#@ lr = -1.0\n", "lr must be > 0")):
        path.write_text(cfg.to_toml() + bad)
        with pytest.raises(IsosimInputError, match=message):
            read_model_config(path)


# --- recovery of n*(C) from simulated pilots ---------------------------------------------------

#: the shared-path model these checks were written on (the default before the memorisation
#: model: prior scale 2, no execution noise, no memorisation, no confidence scaling, Adam eps 1e-8), pinned so they do
#: not move with the defaults
SHARED_ONLY = {"model": {"shared": 1.0, "local": 0.0, "prior_scale": 2.0, "embed_scale": 2.0, "execution_a": 0.0,
                         "confidence_floor": 1.0},
               "algo": {"adam_eps": 1e-8}}
#: the hidden knobs the pilots are simulated with (that model has lr 0.03, prior scale 2, skill
#: link 0.7): a learner ten times slower, a more peaked base policy, weaker transfer
HIDDEN = {"lr": 0.003, "prior_scale": 3.0, "skill_link": 0.4}
D, VAL, B = 200, 100, 16
PILOT_NS, PILOT_BUDGET, NS = (2, 16), 2**15, (2, 4, 8, 16, 32, 64, 128)
TARGET = 16 * PILOT_BUDGET
#: samples per validation problem behind each pilot evaluation (real logs estimate avg@1 from samples)
SAMPLES = 4


def _scenario():
    """Pass rates drawn from Beta(0.6, 1.6) and measured with 16 samples (like a user's file),
    the hidden model in a world (data seed 7) that the calibration does not know (it builds its
    own, data seed 0), pilots at the smallest and a middle n."""
    rng = np.random.default_rng(0)
    train = rng.binomial(16, rng.beta(0.6, 1.6, D)) / 16
    val = rng.binomial(16, rng.beta(0.6, 1.6, VAL)) / 16
    hidden = K.apply(SimConfig().replace(**SHARED_ONLY), HIDDEN).replace(population={"train_size": D, "val_size": VAL},
                                                  eval={"ks": (1,), "n_evals": 8, "sampled": SAMPLES})
    pop = population_from_pass_rates(train, val, model=hidden.model, seed=7)
    return train, val, hidden, pop


def _pilots(hidden, pop) -> pd.DataFrame:
    """Two seeds at each pilot n, cut at the pilot budget; avg@1 estimated from SAMPLES samples
    of each validation problem, as a real evaluation would (noise sd about 0.01)."""
    rows = []
    for n in PILOT_NS:
        cfg = hidden.replace(allocation={"n": n, "b_problem": B, "budget": float(PILOT_BUDGET), "steps": 0})
        for s in (100, 101):
            cur = simulate(cfg, s, population=pop).curve("avg@1:sampled")
            rows += [(f"n{n}-s{s}", n, B, c, v) for c, v in zip(cur["compute_rollouts"], cur["value"])]
    return pd.DataFrame(rows, columns=["run", "n", "B_problem", "compute", "avg@1"])


def _truth(hidden, pop, seeds=(200, 201, 202)) -> tuple[list[int], dict]:
    """The simulator's n* at the target budget on seeds the pilots did not use (exact validation
    avg@1): every n whose seed mean is within 2 standard errors (of the difference) of the best n's."""
    vals = {}
    for n in NS:
        cfg = hidden.replace(allocation={"n": n, "b_problem": B, "budget": float(TARGET), "steps": 0},
                             eval={"ks": (1,), "n_evals": 1, "sampled": 0})
        vals[n] = np.array([simulate(cfg, s, population=pop).final("val")["avg@1"] for s in seeds])
    mean = {n: v.mean() for n, v in vals.items()}
    var = {n: v.var(ddof=1) / len(v) for n, v in vals.items()}
    best = max(NS, key=lambda n: (mean[n], -n))
    return [n for n in NS if mean[best] - mean[n] <= 2 * math.sqrt(var[n] + var[best])], mean


def _doublings(n: int, ok: list[int]) -> float:
    return min(abs(math.log2(n) - math.log2(t)) for t in ok)


@pytest.mark.slow
def test_calibrate_recovers_n_star_at_16_times_the_pilot_budget():
    """Pilots from the simulator with hidden knobs (n = 2 and 16, 2 seeds each, 2^15 rollouts,
    sampled evaluations); calibrate sees only them and the base pass rates. Its n* at 2^19
    rollouts must be within one doubling of the simulator's n* there (3 other seeds; every n
    within 2 SE of the best counts as n*), and the ensemble's interval must contain a simulated
    n*. The control: the best fit with its learning rate at one of its bounds predicts an n* more
    than one doubling away, so the check can fail."""
    train, val, hidden, pop = _scenario()
    pilots = _pilots(hidden, pop)
    truth, mean = _truth(hidden, pop)
    cal = calibrate(pilots, train, "avg@1", val_pass_rates=val, base=SimConfig().replace(**SHARED_ONLY))
    assert cal.ensemble[0] == cal.knobs and len(cal.ensemble) >= 2
    assert cal.fit_rmse < cal.details["start_rmse"] / 3
    pred = cal.predict_n_star([TARGET], NS).iloc[0]
    assert pred["n_low"] <= pred["n"] <= pred["n_high"]
    assert _doublings(int(pred["n"]), truth) <= 1, (pred.to_dict(), truth, mean, cal.knobs)
    assert any(pred["n_low"] <= t <= pred["n_high"] for t in truth), (pred.to_dict(), truth)
    corners = tuple({**cal.knobs, "lr": x} for x in (KNOBS["lr"].lo, KNOBS["lr"].hi))
    wrong = dataclasses.replace(cal, knobs=corners[0], ensemble=corners).predict_n_star([TARGET], NS).iloc[0]
    assert max(_doublings(int(wrong["n_low"]), truth), _doublings(int(wrong["n_high"]), truth)) > 1, (
        wrong.to_dict(), truth, mean)


#: a world of the current default model (memorisation beside slow transfer) with hidden learning
#: knobs: a third of the default learning rate, 0.4 times its memorisation scale (so a visited
#: problem is learnt about 7 times slower), a more peaked base policy
MEMO_HIDDEN = {"lr": 0.01, "local": 400.0, "prior_scale": 6.0}


@pytest.mark.slow
def test_the_training_reward_pins_the_memorisation_speed_of_the_default_model():
    """Under the default model, pilots this short barely move validation (within their noise), so
    the validation curves alone leave the learning path open; the training reward, which
    memorisation lifts, pins how fast a visited problem is learnt: ``lr * local`` (both scale the
    per-problem step; either alone is not identified). Pilots at n = 2 and 16 (2 seeds, 2^15
    rollouts, 500 problems), the training reward logged every 4th step with the noise of a batch
    of 16 problems' mean. The fitted ``lr * local`` must be within a factor 1.5 of the hidden one
    (the mean field's training reward runs up to about 15% ahead of the simulator's at n = 2 on
    such problems, docs/calibrate.md); the fit must explain the training reward within twice its
    noise. The control: the defaults the fit starts from are more than 1.5 times off (7 times)
    and miss the training reward by more than 3 times its noise, so the check can fail."""
    rng = np.random.default_rng(0)
    train = rng.binomial(16, rng.beta(0.6, 1.6, 500)) / 16
    val = rng.binomial(16, rng.beta(0.6, 1.6, 200)) / 16
    hidden = K.apply(SimConfig(), MEMO_HIDDEN).replace(population={"train_size": 500, "val_size": 200},
                                                       eval={"ks": (1,), "n_evals": 40, "sampled": SAMPLES})
    pop = population_from_pass_rates(train, val, model=hidden.model, seed=7)
    noise = np.random.default_rng(5)
    rows, trows = [], []
    for n in (2, 16):
        cfg = hidden.replace(allocation={"n": n, "b_problem": 16, "budget": float(PILOT_BUDGET), "steps": 0})
        for s in (100, 101):
            tr = simulate(cfg, s, population=pop)
            cur = tr.curve("avg@1:sampled")
            rows += [(f"n{n}-s{s}", n, 16, c, v) for c, v in zip(cur["compute_rollouts"], cur["value"])]
            t = tr.curve("avg@1", split="train")
            steps = np.arange(1, cfg.allocation.resolved_steps(cfg.algo) + 1, 4)
            mean = np.interp(np.log(steps), np.log(np.maximum(t["step"].to_numpy(float), 0.5)), t["value"].to_numpy(float))
            sd = np.sqrt(0.06 / 16 + mean * (1 - mean) / (n * 16))  # a batch of 16 problems' mean reward
            y = np.clip(mean + noise.normal(0, 1, steps.size) * sd, 0, 1)
            trows += [(f"n{n}-s{s}", n, 16, int(st) * n * 16, float(v)) for st, v in zip(steps, y)]
    pilots = pd.DataFrame(rows, columns=["run", "n", "B_problem", "compute", "avg@1"])
    training = pd.DataFrame(trows, columns=["run", "n", "B_problem", "compute", "train_reward"])
    cal = calibrate(pilots, train, "avg@1", val_pass_rates=val, training=training, training_mode="always")
    assert set(cal.knobs) == set(K.WITH_TRAINING) and cal.details["training"]["bins"] > 0
    speed = cal.knobs["lr"] * cal.knobs["local"] / (MEMO_HIDDEN["lr"] * MEMO_HIDDEN["local"])
    assert 1 / 1.5 < speed < 1.5, cal.knobs
    assert cal.details["training"]["fit_ratio"] < 2.0
    start = cal.details["start"]
    assert start["lr"] * start["local"] / (MEMO_HIDDEN["lr"] * MEMO_HIDDEN["local"]) > 1.5
    assert cal.details["training"]["start_ratio"] > 3.0


# --- the command line --------------------------------------------------------------------------

TINY = {"model": {"n_strategies": 16, "rank": 4, **SHARED_ONLY["model"]}, "algo": SHARED_ONLY["algo"]}


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory):
    """A small world (80 problems, 16 strategies): pass rates, a base config and simulated pilots."""
    root = tmp_path_factory.mktemp("calibrate")
    rng = np.random.default_rng(3)
    train = rng.binomial(16, rng.beta(0.6, 1.6, 80)) / 16
    pd.DataFrame({"pass_rate": train}).to_csv(root / "rates.csv", index=False)
    (root / "base.toml").write_text(SimConfig().replace(**TINY).to_toml())
    _tiny_runs(train, {"lr": 0.01}, 6).drop(columns="train_reward").to_csv(root / "pilots.csv", index=False)
    return root


def _tiny_runs(train: np.ndarray, knobs: dict, n_evals: int) -> pd.DataFrame:
    """Simulated pilots in the small world with hidden ``knobs``: n = 2 and 8 at B_problem 8, two
    seeds, to 2048 rollouts; validation avg@1 and the training set's avg@1 (``train_reward``) at
    ``n_evals`` log-spaced steps."""
    hidden = K.apply(SimConfig().replace(**TINY), knobs).replace(population={"train_size": 80, "val_size": 80},
                                                                 eval={"ks": (1,), "n_evals": n_evals})
    pop = population_from_pass_rates(train, model=hidden.model, seed=5)
    rows = []
    for n in (2, 8):
        cfg = hidden.replace(allocation={"n": n, "b_problem": 8, "budget": 2048.0, "steps": 0})
        for s in (0, 1):
            tr = simulate(cfg, s, population=pop)
            v, t = tr.curve("avg@1"), tr.curve("avg@1", split="train")
            rows += [(f"n{n}-s{s}", n, 8, int(st), a, b) for st, a, b in zip(v["step"], v["value"], t["value"])]
    return pd.DataFrame(rows, columns=["run", "n", "B_problem", "step", "avg@1", "train_reward"])


def test_cli_calibrate_then_plan_and_simulate_with_its_model_config(tiny_files, capsys):
    root = tiny_files
    out = root / "calib.toml"
    code = main(["calibrate", str(root / "pilots.csv"), "--pass-rates", str(root / "rates.csv"), "--config",
                 str(root / "base.toml"), "--out", str(out), "--budget", "16384", "--n", "2,4,8,16", "--json"])
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    assert {"knobs", "fit_rmse", "pilot_noise_sd", "ensemble", "n_star_curve"} <= set(res)
    assert res["ensemble"][0] == res["knobs"] and set(res["knobs"]) == set(K.DEFAULT)
    assert all(KNOBS[k].lo <= v <= KNOBS[k].hi for m in res["ensemble"] for k, v in m.items())
    curve = res["n_star_curve"]
    assert [p["compute"] for p in curve] == [2048.0 * 2**j for j in range(4)]
    assert all(p["n_low"] <= p["n"] <= p["n_high"] and p["n"] in (2, 4, 8, 16) for p in curve)
    assert math.isfinite(res["fit_rmse"]) and res["pilot_noise_sd"] > 0
    read = read_model_config(out)
    assert read.config.algo.lr == pytest.approx(res["knobs"]["lr"]) and len(read.ensemble) == len(res["ensemble"])
    assert read.config.model.n_strategies == 16  # the base config's other settings are kept

    assert main(["plan", "--pass-rates", str(root / "rates.csv"), "--budget", "8192", "--b-max", "128",
                 "--model-config", str(out), "--metric", "avg@1", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    conf = plan["confidence"]
    assert conf["source"] == "ensemble" and conf["ensemble"]["members"] == len(res["ensemble"])
    assert conf["level"] == ensemble_level(conf["ensemble"]["agree"])
    assert conf["ensemble"]["n_low"] <= conf["ensemble"]["n_high"]
    assert "n_low" in plan["n_star_curve"][-1]

    assert main(["simulate", "--config", str(out), "--budget", "1024", "--json"]) == 0
    sim = json.loads(capsys.readouterr().out)
    assert sim["compute_rollouts"] <= 1024 and "avg@1" in sim["final"]["val"]

    assert main(["plan", "--pass-rates", str(root / "rates.csv"), "--budget", "8192", "--b-max", "128",
                 "--model-config", str(out), "--model", "strategies"]) == 2
    assert "not both" in capsys.readouterr().err


def test_cli_calibrate_fits_a_train_reward_column_beside_validation(tiny_files, capsys):
    """A pilots file with a train_reward column (the training reward at each evaluation) and
    --fit-training: the command fits it too, adds the memorisation knob, reports the training fit
    and each knob's range over the ensemble."""
    root = tiny_files
    train = pd.read_csv(root / "rates.csv")["pass_rate"].to_numpy()
    path = root / "pilots_train.csv"
    _tiny_runs(train, {"lr": 0.01, "local": 200.0}, 8).to_csv(path, index=False)
    args = ["calibrate", str(path), "--pass-rates", str(root / "rates.csv"), "--config", str(root / "base.toml"),
            "--budget", "8192", "--n", "2,4,8", "--fit-training", "--training-mode", "always"]
    assert main([*args, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert set(res["knobs"]) == set(K.WITH_TRAINING) and res["details"]["training"]["bins"] >= 4
    assert res["details"]["training"]["used"]
    assert math.isfinite(res["details"]["training"]["fit_ratio"])
    for k, (lo, hi) in res["knob_ranges"].items():
        assert lo <= res["knobs"][k] <= hi and KNOBS[k].lo <= lo <= hi <= KNOBS[k].hi
    assert main(args) == 0
    assert "also fitted: the pilots' training reward in" in capsys.readouterr().out
    out = root / "never.toml"
    bad = ["calibrate", str(root / "pilots.csv"), "--pass-rates", str(root / "rates.csv"), "--fit-training",
           "--out", str(out)]  # pilots without a train_reward column
    assert main(bad) == 2 and not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train_reward" in err[0]


def test_cli_training_modes_are_the_calibrations():
    """The command line lists the training modes itself (the parser is built without importing the
    calibration); they must be the ones :func:`calibrate` takes."""
    from isosim.calibrate.calibration import TRAINING_MODES
    from isosim.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["calibrate"]
    mode = next(a for a in sub._actions if a.dest == "training_mode")
    assert set(mode.choices) == set(TRAINING_MODES)


def test_cli_calibrate_fits_the_knobs_asked_for(tiny_files, capsys):
    """--knobs: the registered knobs named, in that order, each within its bounds (here Adam's eps,
    the per-step signal knob, beside the learning rate)."""
    root = tiny_files
    assert main(["calibrate", str(root / "pilots.csv"), "--pass-rates", str(root / "rates.csv"), "--config",
                 str(root / "base.toml"), "--budget", "8192", "--n", "2,4,8", "--knobs", "adam_eps,lr", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert list(res["knobs"]) == ["adam_eps", "lr"]
    assert all(KNOBS[k].lo <= v <= KNOBS[k].hi for m in res["ensemble"] for k, v in m.items())
    assert [k["name"] for k in res["details"]["knobs_fitted"]] == ["adam_eps", "lr"]


def test_auto_sets_aside_a_training_reward_the_surrogate_cannot_reproduce(tiny_files, capsys):
    """--training-mode auto (the default): pilots whose logged training reward sits at 0.97 from
    the first step (no base model of these pass rates starts there) are fitted with it first;
    the best fit misses it by far more than 1.5 times its noise, so the calibration returned is
    the validation-only one (the same knobs as without --fit-training), with the set-aside fit's
    misfit and knobs under details.training and a warning that says so. The same pilots under
    'always' keep the training fit."""
    root = tiny_files
    train = pd.read_csv(root / "rates.csv")["pass_rate"].to_numpy()
    path = root / "pilots_saturated.csv"
    runs = _tiny_runs(train, {"lr": 0.01}, 8)
    runs.assign(train_reward=np.where(runs["step"] % 2 == 0, 0.96, 0.98)).to_csv(path, index=False)
    args = ["calibrate", str(path), "--pass-rates", str(root / "rates.csv"), "--config", str(root / "base.toml"),
            "--budget", "8192", "--n", "2,4,8", "--json"]
    assert main(args) == 0
    alone = json.loads(capsys.readouterr().out)
    assert main([*args, "--fit-training"]) == 0
    auto = json.loads(capsys.readouterr().out)
    tr = auto["details"]["training"]
    assert not tr["used"] and tr["fit_ratio"] > 1.5 and set(tr["knobs"]) == set(K.WITH_TRAINING)
    assert auto["knobs"] == alone["knobs"] and auto["n_star_curve"] == alone["n_star_curve"]
    assert any("training reward was set aside" in w for w in auto["warnings"])
    assert main([*args, "--fit-training", "--training-mode", "always"]) == 0
    always = json.loads(capsys.readouterr().out)
    assert always["details"]["training"]["used"] and set(always["knobs"]) == set(K.WITH_TRAINING)
    assert always["details"]["training"]["fit_ratio"] == pytest.approx(tr["fit_ratio"])
    assert main([*args[:-1], "--fit-training"]) == 0
    assert "set aside: the pilots' training reward in" in capsys.readouterr().out
    out = root / "never.toml"
    assert main([*args, "--training-mode", "always", "--out", str(out)]) == 2 and not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--fit-training" in err[0]


def test_plan_confidence_comes_from_the_ensemble_spread():
    """With an ensemble, a plan's confidence is its members' agreement on the chosen n: 'high'
    when every member is the plan's own model; members whose learning rate grows linearly with
    the batch (so large n take larger steps) disagree on n*, and the level follows the share
    that agrees at the budget."""
    from isosim.plan.planner import EnsembleAgreement, plan

    rng = np.random.default_rng(3)
    rng.uniform(size=80)
    values = rng.binomial(16, rng.beta(0.6, 1.6, 80)) / 16
    base = SimConfig().replace(**TINY)
    same = plan(values, 8192, 128, "avg@1", base.model, base.algo, ensemble=[base, base, base])
    assert same.ensemble.agree == 1.0 and same.confidence == "high"
    assert same.ensemble.n_star == (same.best.n,) * 4
    conf = same.to_json()["confidence"]
    assert conf["source"] == "ensemble" and conf["ensemble"]["members"] == 4
    linear = base.replace(algo={"lr_rule": "linear", "lr": 0.3})
    mixed = plan(values, 8192, 128, "avg@1", base.model, base.algo, ensemble=[linear, linear])
    assert mixed.best == same.best  # the recommendation is the plan's own model's
    assert mixed.ensemble.members == 3 and mixed.ensemble.n_low < mixed.ensemble.n_high
    assert mixed.ensemble.agree < 1.0 and mixed.confidence == ensemble_level(mixed.ensemble.agree) != "high"
    n = same.best.n
    split = dataclasses.replace(same, ensemble=EnsembleAgreement((n, n, 2 * n, n, 4 * n), n, same.best.b_problem,
                                                                 same.ensemble.curve))
    assert split.ensemble.agree == 0.6 and split.confidence == "medium"
    assert split.to_json()["confidence"]["level"] == "medium"
    assert "3 pick n = " in split.reasoning() and f"from {n} to {4 * n}" in split.reasoning()
    assert [ensemble_level(a) for a in (1.0, 0.8, 0.79, 0.5, 0.49)] == ["high", "high", "medium", "medium", "low"]
    plain = plan(values, 8192, 128, "avg@1", base.model, base.algo).to_json()["confidence"]
    assert "source" not in plain and plain["level"] in ("high", "medium", "low")
