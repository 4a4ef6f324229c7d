"""``isosim plan``: constraints, the JSON shape, the reasoning, --verify, bad input, and the
measured ranking error behind its confidence (the shipped file and the script that makes it)."""
import argparse
import json
import math
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from isosim.cli import plan as plan_cli
from isosim.errors import IsosimInputError
from isosim.plan import ranking
from isosim.plan.planner import (
    MAX_TRAIN,
    MAX_VAL,
    allocations_stage1,
    allocations_stage2,
    binning_error,
    dominant_mechanism,
    fall_notes,
    falling_curves,
    mean_field_setup,
    plan,
    plans,
    representatives,
    verified_ranking,
    zero_signal_share,
)

ROOT = Path(__file__).resolve().parents[1]


def _run(argv):
    """Parse and run ``isosim plan`` with its own parser (the module's register/run)."""
    parser = argparse.ArgumentParser()
    plan_cli.register(parser.add_subparsers())
    args = parser.parse_args(["plan", *argv])
    return args.func(args)


@pytest.fixture(scope="module")
def rates(tmp_path_factory):
    rng = np.random.default_rng(0)
    p = rng.beta(0.7, 1.3, 300)
    path = tmp_path_factory.mktemp("plan") / "rates.csv"
    pd.DataFrame({"correct": rng.binomial(16, p), "samples": 16}).to_csv(path, index=False)
    return path


def _is_pow2(x: int) -> bool:
    return x >= 1 and x & (x - 1) == 0


def test_json_shape_and_constraints(rates, capsys):
    budget, b_max = 2.0e5, 1024
    assert _run(["--pass-rates", str(rates), "--budget", str(budget), "--b-max", str(b_max), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"n", "B_problem", "M", "predicted", "alternatives", "n_star_curve"} <= set(out)
    assert set(out["predicted"]) == {"avg@4"} and 0 <= out["predicted"]["avg@4"] <= 1
    for a in [out, *out["alternatives"]]:
        n, bp, m = a["n"], a["B_problem"], a["M"]
        assert _is_pow2(n) and n >= 2 and _is_pow2(bp)
        assert n * bp <= b_max and n * bp * m <= budget and m == math.floor(budget / (n * bp)) and bp <= 300
    best = out["predicted"]["avg@4"]
    assert out["alternatives"] and all(a["predicted"]["avg@4"] <= best for a in out["alternatives"])
    curve = out["n_star_curve"]
    assert curve and all(set(c) == {"compute", "n", "B_problem"} for c in curve)
    assert curve[-1]["compute"] == pytest.approx(budget)
    assert all(a["compute"] < b["compute"] for a, b in zip(curve, curve[1:]))
    assert all(_is_pow2(c["n"]) and c["n"] * c["B_problem"] <= b_max for c in curve)
    conf = out["confidence"]
    measured = ranking.ranking_error("avg@4", "strategies")
    assert set(conf) == {"level", "gap", "threshold", "regret_p90", "regret_mean", "hit_rate", "noise", "cases",
                         "model", "measured_on_these_knobs"}
    assert conf["measured_on_these_knobs"] is True
    assert (conf["regret_p90"], conf["noise"], conf["cases"]) == (measured.regret_p90, measured.noise, measured.cases)
    assert conf["threshold"] == max(conf["regret_p90"], conf["noise"]) and conf["model"] == "strategies"
    assert conf["gap"] == pytest.approx(best - out["alternatives"][0]["predicted"]["avg@4"])
    assert conf["level"] == ranking.confidence_level(conf["gap"], conf["threshold"])
    assert out["mechanism"] in ("sharpening", "coverage", "neither") and out["verify"] is None


def test_text_report(rates, capsys):
    assert _run(["--pass-rates", str(rates), "--budget", "5e4", "--b-max", "256", "--metric", "worst@4"]) == 0
    text = capsys.readouterr().out
    assert "recommended: n = " in text and "reasoning: With n = " in text and "no signal" in text
    assert "worst@4" in text and "n*(C)" in text


def test_plan_api_reasoning_and_zero_signal():
    values = np.random.default_rng(1).beta(0.5, 3.0, 200)
    p = plan(values, 3e4, 512, "best@4")
    assert p.zero_signal_start == pytest.approx(np.mean(values**p.best.n + (1 - values) ** p.best.n))
    assert 0 <= p.best.zero_signal_end <= 1
    assert p.best.predicted["best@4"] >= p.ranked[-1].predicted["best@4"]
    assert f"n = {p.best.n}" in p.reasoning()
    assert zero_signal_share([0.0, 1.0, 0.5], 2) == pytest.approx((1 + 1 + 0.5) / 3)
    # the two gains are quoted in the order the sentence names the metrics
    gain = {m: p.best.predicted[m] - p.base[m] for m in ("best@4", "worst@4")}
    first, second = ("worst@4", "best@4") if p.mechanism == "sharpening" else ("best@4", "worst@4")
    assert f"gains more than {second} ({gain[first]:+.3f} vs {gain[second]:+.3f})" in p.reasoning()


def test_allocation_grids_respect_the_constraints():
    bp0, stage1 = allocations_stage1(d=100, budget=1e5, b_max=512)
    assert bp0 == 32 and [n for n, _ in stage1] == [2, 4, 8, 16]
    stage2 = allocations_stage2([2, 16], bp0, d=100, budget=1e5, b_max=512)
    assert {(2, 16), (2, 64), (16, 16)} <= set(stage2)
    assert (2, 128) not in stage2 and (16, 64) not in stage2
    bp0, stage1 = allocations_stage1(d=5, budget=6, b_max=4)
    assert bp0 == 2 and stage1 == [(2, 2)]


def test_representatives_keep_the_mean_and_bound_the_binning_error():
    rng = np.random.default_rng(3)
    for values in (rng.beta(0.6, 1.6, 100_003), np.concatenate([np.zeros(70_000), rng.uniform(0, 0.0625, 30_001)]),
                   rng.uniform(0.3, 0.6, 1000)):
        for k in (7, 256):
            r = representatives(values, k)
            assert r.size == k and np.all(np.diff(r) >= 0) and r.min() >= values.min() and r.max() <= values.max()
            assert r.mean() == pytest.approx(values.mean(), rel=1e-12, abs=1e-15)  # avg@k of the base: exact
            bound = binning_error(values, k)
            for j in (2, 4, 8):  # best@j, worst@j: |f''| <= j (j - 1)
                for f in (lambda p: 1 - (1 - p) ** j, lambda p: p**j):
                    assert abs(f(r).mean() - f(values).mean()) <= j * (j - 1) / 2 * bound + 1e-12
    small = rng.uniform(0, 1, 100)
    assert np.array_equal(representatives(small, 256), np.sort(small)) and binning_error(small, 256) == 0.0


def test_the_mean_field_of_a_large_histogram_runs_on_representatives():
    """100,000 problems: MAX_TRAIN training and MAX_VAL validation rows whose pass rates are the
    quantile representatives, standing for all 100,000 (the visit rate B_problem / D)."""
    values = np.random.default_rng(4).uniform(0.0, 0.6, 100_000)
    pop, base, opts = mean_field_setup(values)
    assert len(pop.train) == MAX_TRAIN and len(pop.val) == MAX_VAL and opts["train_size"] == 100_000
    np.testing.assert_allclose(pop.train.base_pass, representatives(values, MAX_TRAIN), atol=1e-7)
    from isosim.plan.planner import setup  # the validation problems are those the simulations of verify use

    full, _ = setup(values[:5000])
    small, _, _ = mean_field_setup(values[:5000])
    np.testing.assert_array_equal(small.val.problems.base_logits, full.val.problems.base_logits)
    p = plan(values, 1e5, 4096)
    assert p.problems == 100_000 and p.best.n * p.best.b_problem <= 4096


def test_verify_reports_the_simulated_ranking():
    values = np.random.default_rng(2).beta(1.0, 1.0, 120)
    p = plan(values, 2e4, 256, verify=True, seeds=1)
    v = p.verification
    assert v is not None and v.seeds == 1 and len(v.simulated) == min(3, len(p.ranked))
    assert v.ranking == "inconclusive" and not v.ranking_holds  # one seed: no estimate of the noise
    out = p.to_json()["verify"]
    assert out["ranking"] == "inconclusive" and out["ranking_holds"] is False
    assert out["lead"] == pytest.approx([v.simulated[0] - x for x in v.simulated[1:]])
    assert out["lead_se"] == [None] * (len(v.simulated) - 1)
    p2 = plan(values, 2e4, 256, verify=True, seeds=3)
    w = p2.verification
    assert w.ranking == verified_ranking_of(w)


def verified_ranking_of(v) -> str:
    """The verdict :func:`verified_ranking` gives for a verification's leads and standard errors."""
    lead, se = np.array(v.lead), np.array(v.lead_se)
    return "fails" if np.any(lead < -se) else "holds" if np.all(lead > se) else "inconclusive"


def test_the_simulated_ranking_is_judged_against_the_seeds_noise():
    """A lead counts only beyond the standard error of the paired difference over the seeds."""
    clear = np.array([[0.50, 0.52, 0.54], [0.40, 0.42, 0.44], [0.30, 0.33, 0.34]])
    verdict, lead, se = verified_ranking(clear)
    assert verdict == "holds"
    np.testing.assert_allclose(lead, [0.10, 0.19667], atol=1e-5)
    np.testing.assert_allclose(se, [0.0, np.std([0.20, 0.19, 0.20], ddof=1) / np.sqrt(3)], atol=1e-12)
    noisy = np.array([[0.50, 0.40, 0.60], [0.49, 0.47, 0.52], [0.30, 0.30, 0.30]])
    assert verified_ranking(noisy)[0] == "inconclusive"  # lead 0.0067, SE 0.05
    behind = np.array([[0.40, 0.41, 0.42], [0.50, 0.52, 0.51], [0.30, 0.30, 0.30]])
    assert verified_ranking(behind)[0] == "fails"
    assert verified_ranking(clear[:, :1])[0] == "inconclusive"  # one seed
    assert verified_ranking(clear[:1])[0] == "holds"  # nothing to compare with


@pytest.mark.parametrize("content, argv, message", [
    ("pass_rate\n", ["--budget", "1e5", "--b-max", "64"], "no problems"),
    ("pass_rate\n0.3\n1.3\n", ["--budget", "1e5", "--b-max", "64"], "outside [0, 1]"),
    ("pass_rate\n0.3\n0.5\n", ["--budget", "1", "--b-max", "64"], "below one step"),
])
def test_bad_input_raises(tmp_path, content, argv, message):
    path = tmp_path / "rates.csv"
    path.write_text(content)
    with pytest.raises(IsosimInputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _run(["--pass-rates", str(path), *argv])


def test_bad_b_max_through_the_api():
    """(The command line rejects --b-max 1 when it parses it; the real-CLI test below covers that.)"""
    with pytest.raises(IsosimInputError, match="B_max"):
        plan([0.3, 0.5], 1e5, 1)


@pytest.mark.parametrize("content, argv", [
    ("pass_rate\n", ["--budget", "1e5", "--b-max", "64"]),
    ("pass_rate\n0.3\n1.3\n", ["--budget", "1e5", "--b-max", "64"]),
    ("pass_rate\n0.3\n0.5\n", ["--budget", "1", "--b-max", "64"]),
    ("pass_rate\n0.3\n0.5\n", ["--budget", "1e5", "--b-max", "1"]),
    ("pass_rate\n0.3\n0.5\n", ["--budget", "1e5", "--b-max", "64", "--representatives", "1"]),
])
def test_bad_input_through_the_real_cli(tmp_path, content, argv):
    """One line on stderr, exit code 2 (needs "plan" in isosim.cli.SUBCOMMANDS)."""
    path = tmp_path / "rates.csv"
    path.write_text(content)
    r = subprocess.run([sys.executable, "-m", "isosim", "plan", "--pass-rates", str(path), *argv],
                       capture_output=True, text=True)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("isosim plan: error:") and "Traceback" not in r.stderr


def test_a_single_problem_is_planned_through_the_real_cli(tmp_path):
    """One training problem allows B_problem = 1 only: every allocation the planner integrates,
    the warm-up run before its workers fork included, keeps to it (a fresh process, so the
    warm-up runs)."""
    path = tmp_path / "rates.csv"
    path.write_text("pass_rate\n0.5\n")
    r = subprocess.run([sys.executable, "-m", "isosim", "plan", "--pass-rates", str(path), "--budget", "2e3",
                        "--b-max", "64", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["B_problem"] == 1 and out["problems"] == 1
    assert all(a["B_problem"] == 1 for a in out["alternatives"])


def test_the_warm_up_runs_on_a_one_problem_set(monkeypatch):
    from isosim.plan import predict as predict_module

    pop, base, opts = mean_field_setup(np.array([0.4]))
    monkeypatch.setattr(predict_module, "_WARM", False)
    predict_module._warm((base, 1e3, pop, {k: v for k, v in opts.items() if k != "threads"}))
    assert predict_module._WARM


def test_the_number_of_representatives_is_the_users_choice():
    """``representatives`` sets the mean field's training rows (all problems when there are fewer),
    and the plan reports how many it used."""
    values = np.random.default_rng(5).uniform(0.3, 0.6, 500)
    pop, _, opts = mean_field_setup(values, rows=64)
    assert len(pop.train) == 64 and opts["train_size"] == 500
    np.testing.assert_allclose(pop.train.base_pass, representatives(values, 64), atol=1e-7)
    p = plan(values, 2e4, 256, representatives=64)
    assert p.representatives == 64 and p.to_json()["representatives"] == 64
    assert plan(values[:40], 2e4, 256, representatives=64).representatives == 40
    assert plan(values, 2e4, 256).representatives == MAX_TRAIN
    with pytest.raises(IsosimInputError, match="representatives"):
        plan(values, 2e4, 256, representatives=1)


def test_the_large_histogram_measurement_resumes_from_its_journal(tmp_path, monkeypatch):
    """docs/planner_large_histograms.py journals one line per simulated run; a rerun simulates
    only what the journal lacks (here nothing) and reads the rest back in the order of its jobs."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("planner_large_histograms",
                                                  ROOT / "docs" / "planner_large_histograms.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    budget, problems = 1e4, 300
    jobs = [(band, budget, seed, n, bp, problems) for band in mod.BANDS for seed in (0, 1)
            for n, bp in allocations_stage1(problems, budget, mod.B_MAX)[1]]
    journal = tmp_path / "j.jsonl"
    journal.write_text("".join(json.dumps({"key": mod._key(*j), "n": j[3]}) + "\n" for j in reversed(jobs)))

    def no_simulation(job):
        raise AssertionError(f"simulated {job} although the journal has it")

    monkeypatch.setattr(mod, "_simulate", no_simulation)
    recs = mod.simulate_all(journal, budget, (0, 1), 1, problems)
    assert [r["key"] for r in recs] == [mod._key(*j) for j in jobs]


def test_falling_curves_are_found_and_noted():
    """A curve that ends more than FALL_NOTED below its peak is reported with its fall; the note
    names the representatives when they stand for more problems, memorisation when they are the
    problems."""
    rows = []
    for n, ys in ((2, [0.1, 0.2, 0.3, 0.3]), (8, [0.1, 0.3, 0.29, 0.28]), (32, [0.1, 0.2, 0.25, 0.2499])):
        rows += [{"n": n, "B_problem": 16, "split": "val", "step": i, "avg@4": y} for i, y in enumerate(ys)]
    rows.append({"n": 2, "B_problem": 16, "split": "train", "step": 3, "avg@4": 0.0})  # not validation
    falls = falling_curves(pd.DataFrame(rows), "avg@4")
    assert list(falls) == [(8, 16)] and falls[(8, 16)] == pytest.approx(0.02)
    assert fall_notes({}, 1000, 256, "avg@4") == ()
    (note,) = fall_notes(falls, 100_000, 256, "avg@4")
    assert "n = 8" in note and "0.020" in note and "--representatives 1024" in note
    (note,) = fall_notes(falls, 200, 200, "avg@4")
    assert "memorises" in note and "--representatives" not in note


def test_a_plan_notes_curves_that_fall_on_its_representatives():
    values = np.random.default_rng(0).uniform(0.0, 0.0625, 20_000)
    p = plan(values, 3e6, 4096)
    assert p.representatives == MAX_TRAIN and len(p.notes) == 1 and "--representatives" in p.notes[0]
    assert p.to_json()["notes"] == list(p.notes)


def test_no_mechanism_is_named_when_nothing_moves():
    """Pass rates of 0 give no group any signal: no allocation moves best@4 or worst@4, and the
    reasoning names no mechanism."""
    p = plan(np.zeros(40), 2e4, 256)
    assert p.mechanism == "neither"
    assert "no mechanism can be named" in p.reasoning() and "dominates" not in p.reasoning()
    assert dominant_mechanism(0.01, 0.02, 1e-4) == "sharpening"
    assert dominant_mechanism(0.02, 0.01, 1e-4) == "coverage"
    assert dominant_mechanism(5e-5, -5e-5, 1e-4) == "neither"


def test_plans_share_curves_and_match_single_plans():
    """Planning three metrics at once ranks exactly what three single plans rank."""
    values = np.random.default_rng(3).beta(0.6, 1.6, 150)
    together = plans(values, 1.6e4, 256, ("avg@4", "best@4", "worst@4"))
    for metric, p in together.items():
        alone = plan(values, 1.6e4, 256, metric)
        assert [(c.n, c.b_problem, c.predicted[metric]) for c in p.ranked] == \
               [(c.n, c.b_problem, c.predicted[metric]) for c in alone.ranked]


def _check_ranking_file(data: dict) -> None:
    """Every number of a ranking-error file recomputed from its own per-seed simulations."""
    grid = data["grid"]
    metrics, seeds, k = grid["metrics"], grid["seeds"], grid["top_k"]
    assert len(data["cases"]) == len(grid["populations"]) * len(grid["models"]) * len(grid["budgets"])
    rows = {}
    for case in data["cases"]:
        cands = case["candidates"]
        assert len({(c["n"], c["B_problem"]) for c in cands}) == len(cands) <= len(metrics) * k
        for c in cands:
            assert c["n"] * c["B_problem"] <= case["b_max"]
            assert c["M"] == math.floor(case["budget"] / (c["n"] * c["B_problem"]))
            assert all(len(c["simulated"][m]) == seeds for m in metrics)
        for m in metrics:
            r = case["metrics"][m]
            y = np.array([np.mean(c["simulated"][m]) for c in cands])
            sd = np.array([np.std(c["simulated"][m], ddof=1) for c in cands])
            predicted = [cands[i]["predicted"][m] for i in r["top"]]
            assert r["top"][0] == r["pick"] and predicted == sorted(predicted, reverse=True)
            assert r["best"] == int(np.argmax(y))
            assert r["regret"] == pytest.approx(y[r["best"]] - y[r["pick"]], abs=1e-12)
            assert r["hit"] == (r["pick"] == r["best"] or y[r["pick"]] == y[r["best"]])
            assert r["noise"] == pytest.approx(np.sqrt(2 / seeds * np.mean(sd**2)))
            assert r["level_error"] == pytest.approx(cands[r["pick"]]["predicted"][m] - y[r["pick"]])
            rows.setdefault(m.split("@")[0], []).append((case["model"], r))
    assert set(data["summary"]) == {*rows, "all"}
    rows["all"] = [x for rs in rows.values() for x in rs]
    for family, rs in rows.items():
        summaries = [(data["summary"][family], [r for _, r in rs])]
        for kind, s in data["summary"][family]["by_model"].items():
            summaries.append((s, [r for model, r in rs if model == kind]))
        assert sum(s["cases"] for s, _ in summaries[1:]) == len(rs)
        for s, sub in summaries:
            regret = np.array([r["regret"] for r in sub])
            assert s["cases"] == len(sub) > 0 and 0 <= s["hit_rate"] <= 1
            assert s["hit_rate"] == pytest.approx(np.mean([r["hit"] for r in sub]))
            assert s["regret_mean"] == pytest.approx(regret.mean())
            assert s["regret_p90"] == pytest.approx(np.quantile(regret, 0.9))
            assert s["regret_max"] == pytest.approx(regret.max())
            assert sum(v["cases"] for v in s["by_confidence"].values()) == len(sub)


def test_ranking_error_script_small(tmp_path):
    """The generating script, as documented, on the small grid: the format and every number."""
    out = tmp_path / "ranking_error.json"
    r = subprocess.run([sys.executable, str(ROOT / "docs" / "planner_ranking_error.py"), "--small", "--quiet",
                        "--out", str(out)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["grid"] == ranking.SMALL.as_dict()
    _check_ranking_file(data)
    measured = ranking.ranking_error("worst@4", "strategies", str(out))
    assert (measured.family, measured.model) == ("worst", "strategies")
    assert measured.regret_p90 == data["summary"]["worst"]["by_model"]["strategies"]["regret_p90"]
    pooled = ranking.ranking_error("worst@4", "tabular", str(out))
    assert pooled.model == "all" and pooled.cases == data["summary"]["worst"]["cases"]


def test_shipped_ranking_error_file():
    """The file the planner reads is the documented full grid, consistent, and ships in a wheel."""
    data = ranking.load()
    assert data["grid"] == ranking.FULL.as_dict()
    _check_ranking_file(data)
    assert all(data["summary"][f]["cases"] >= 20 for f in ("avg", "best", "worst"))
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert ranking.DATA_FILE in package_data["isosim.plan"]
    p = plan(np.random.default_rng(4).beta(0.7, 1.3, 100), 1e4, 256, "best@16")
    measured = data["summary"]["best"]["by_model"]["strategies"]
    assert p.error == max(measured["regret_p90"], measured["noise_median"])
    assert p.ranking_error.cases == measured["cases"]
    assert p.confidence == ranking.confidence_level(p.gap, p.error)
    assert f"{measured['regret_p90']:.4f} in 90%" in p.reasoning()
    assert f"over {measured['cases']} planning cases of the strategies model" in p.reasoning()


def test_a_plan_with_other_knobs_says_the_ranking_error_was_measured_on_the_defaults(rates, tmp_path, capsys):
    """The shipped ranking error was measured with the default knobs; a plan on another model
    config (no ensemble) still quotes it, and says so."""
    cfg = tmp_path / "model.toml"
    cfg.write_text("[model]\nshared = 0.5\n")
    args = ["--pass-rates", str(rates), "--budget", "2e4", "--b-max", "256", "--json"]
    assert _run([*args, "--model-config", str(cfg)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["confidence"]["measured_on_these_knobs"] is False
    assert "with its default knobs (this plan uses others" in out["reasoning"]


def test_no_ensemble_plans_with_the_calibrated_best_fit_alone(rates, tmp_path, capsys):
    """``--no-ensemble`` keeps the model config's best fit (the same plan as its model and algo
    sections without the file's ensemble) and drops the ensemble's confidence; without it the
    ensemble sets the confidence."""
    from isosim.calibrate.config_file import model_config_text, read_model_config
    from isosim.sim.config import SimConfig
    from isosim.sim.population import load_pass_rates

    cfg = tmp_path / "calibrated.toml"
    cfg.write_text(model_config_text(SimConfig().replace(algo={"lr": 0.02}), [{"lr": 0.02}, {"lr": 0.04}],
                                     {"metric": "avg@4"}))
    args = ["--pass-rates", str(rates), "--budget", "2e4", "--b-max", "256", "--json", "--model-config", str(cfg)]
    outs = []
    for extra in ([], ["--no-ensemble"]):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing but the plan: no NaN warnings from the ensemble's band
            assert _run([*args, *extra]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    with_ensemble, alone = outs
    assert with_ensemble["confidence"]["source"] == "ensemble"
    assert "source" not in alone["confidence"] and all("n_low" not in pt for pt in alone["n_star_curve"])
    mc = read_model_config(cfg)
    direct = plan(load_pass_rates(rates), 2e4, 256, "avg@4", mc.config.model, mc.config.algo)
    assert (alone["n"], alone["B_problem"], alone["M"]) == (direct.best.n, direct.best.b_problem, direct.best.steps)
    assert (with_ensemble["n"], with_ensemble["B_problem"]) == (alone["n"], alone["B_problem"])


def test_no_ensemble_without_a_model_config_is_bad_input(rates):
    """``--no-ensemble`` on the defaults names what it needs (one line, exit 2 through the CLI)."""
    with pytest.raises(IsosimInputError, match="--no-ensemble needs --model-config"):
        _run(["--pass-rates", str(rates), "--budget", "2e4", "--b-max", "256", "--no-ensemble"])


def test_a_plan_imports_neither_scipy_special_nor_scipy_stats():
    """A plan's start-up stays short: building the population and integrating the mean field
    need neither ``scipy.special`` nor ``scipy.stats`` (0.1 s and more of a plan's start-up)."""
    import subprocess
    import sys

    code = ("import sys, numpy as np; from isosim.plan.planner import plan; "
            "p = plan(np.linspace(0.3, 0.6, 40), 2e3, 64); "
            "print(sorted(m for m in ('scipy.special', 'scipy.stats') if m in sys.modules), p.best.n)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "[]" and int(out[1]) >= 2


def test_reading_a_model_config_imports_neither_scipy_stats_nor_scipy_optimize(tmp_path):
    """``isosim plan --model-config`` reads the file through :mod:`isosim.calibrate`; the fit
    behind ``calibrate`` (``scipy.optimize``, ``scipy.stats``: about 1 s) loads only when used."""
    from isosim.calibrate.config_file import model_config_text
    from isosim.sim.config import SimConfig

    path = tmp_path / "model.toml"
    path.write_text(model_config_text(SimConfig(), [{"lr": 0.02}, {"lr": 0.04}], {"metric": "avg@4"}))
    code = ("import sys; from isosim.calibrate import read_model_config; "
            f"mc = read_model_config({str(path)!r}); "
            "print(sorted(m for m in ('scipy.optimize', 'scipy.stats') if m in sys.modules), len(mc.members())); "
            "from isosim.calibrate import calibrate; print(callable(calibrate), 'scipy.optimize' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:2] == ["[]", "2"] and out[2:] == ["True", "True"]
