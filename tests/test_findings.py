"""One test per finding (the study's twelve, in its order) on the reduced sweeps that `reproduce --quick` runs,
and `isosim reproduce --quick` end to end (its JSON, figures and rerun). This is the one file whose
tests read the session's quick reproduction (tests/conftest.py), so that one test process runs them.

The finding tests assert mechanisms and invariants of the model, whatever a finding's verdict:
that each check reads the right sweeps and splits (its evidence recomputed here from the stored
runs), that an ablation differs from its sweep only in what it switches off, and what the model
guarantees by construction (no shared path: held-out problems never move; worst@4 <= avg@4 <=
best@4; the same LR at the reference batch under every rule). None asserts that a finding holds or
fails. The verdicts are pinned in ``tests/data/expected_verdicts_quick.json``
(``python tests/regenerate_expected_verdicts.py`` writes it), holds only: one test names every
pinned finding that no longer holds, and a finding that comes to hold never fails it. The numbers
come from the stored sweeps through :mod:`isosim.study.findings`; nothing here is a stored number.
"""
import dataclasses
import json
import math
import pkgutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from regenerate_expected_verdicts import lost_holds

import isosim.study.findings as findings_pkg
from isosim import IsosimInputError
from isosim.cli import main
from isosim.sim.config import LR_REFERENCE_BATCH
from isosim.study.findings import FINDINGS, METRIC, SCALES, VERDICTS, Results, _final_se, get_finding, sweep_specs
from isosim.study.findings._verdict import verdict_of
from isosim.study.registry import entries
from isosim.study.reproduce import STUDY_Q1, reproduce_specs

EXPECTED = Path(__file__).parent / "data" / "expected_verdicts_quick.json"


@pytest.fixture(scope="module")
def quick(quick_reproduction):
    out, res = quick_reproduction
    return {f["id"]: f for f in res["findings"]}, Results(out / "findings", "quick", run=False)


@pytest.fixture(scope="module")
def rerun(quick_reproduction):
    """``isosim reproduce --quick`` once more on the session's complete store, with its bootstrap:
    the text report, the reproduction it printed, and the stored runs' modification times before
    and after (it reads the stored sweeps instead of running them). One analysis for the two tests
    that read a rerun."""
    import contextlib
    import io

    import isosim.study.reproduce as rp

    out, _ = quick_reproduction

    def stored():
        return sorted(p.stat().st_mtime_ns for p in out.rglob("*.parquet"))

    before, seen, real = stored(), [], rp.run_reproduce

    def keep(*args, **kwargs):
        seen.append(real(*args, **kwargs))
        return seen[-1]

    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()) as text:
        mp.setattr(rp, "run_reproduce", keep)
        assert main(["reproduce", "--quick", "--out", str(out), "--n-boot", "5"]) == 0
    assert len(seen) == 1
    return text.getvalue(), seen[0], before, stored()


def _ev(quick, fid):
    return quick[0][fid]["evidence"]


def _cmp(quick, fid):
    return quick[0][fid]["compared"]


def test_every_finding_is_reported_with_a_three_valued_verdict(quick):
    findings, results = quick
    assert sorted(findings) == [f.id for f in FINDINGS] == list(range(1, 13))
    for fid, f in findings.items():
        assert f["title"] == get_finding(fid).title
        assert f["verdict"] in VERDICTS and f["holds"] == (f["verdict"] == "holds")
        assert 0 <= f["p_holds"] <= 1 and f["verdict"] == verdict_of(f["p_holds"])
        assert f["evidence"] and json.loads(json.dumps(f["evidence"])) == f["evidence"]
        assert f["compared"], fid  # every criterion names the quantities it compares
        for name, q in f["compared"].items():
            assert set(q) >= {"value", "se", "low", "high"}, (fid, name)
            if q["se"] is not None:
                assert q["se"] >= 0 and q["low"] <= q["high"], (fid, name)
        # two seeds at the quick scale: three distinct resamples, enumerated exactly
        seeds = {len(s.seeds) for s in (results.specs[n] for n in get_finding(fid).sweeps)}
        assert f["exact"] and f["resamples"] == {2: 3, 4: 35}[max(seeds)]
    # that recomputing them from the store gives the same verdicts, intervals and evidence is
    # test_figures_cli_draws_every_figure_from_the_stored_sweeps (its findings.json)


def test_quick_verdicts_keep_every_pinned_holds(quick):
    """The expected file pins only verdicts of holds: one that moves to fails or inconclusive is
    named; a finding that moves from fails (or inconclusive) to holds is not a failure."""
    expected = json.loads(EXPECTED.read_text())
    assert expected and all(v["verdict"] == "holds" for v in expected.values())
    assert set(map(int, expected)) <= set(quick[0])
    lost = lost_holds(expected, quick[0].values())
    assert not lost, ("pinned holds verdicts lost (regenerate with tests/regenerate_expected_verdicts.py if on "
                      "purpose):\n" + "\n".join(lost))


def _by_n(d):
    return {int(n): v for n, v in d.items()}


def _last(ev):
    """Each run's last evaluation (recomputed here, not with the checks' helpers)."""
    return ev[ev["compute"] == ev.groupby("run")["compute"].transform("max")]


def _curves(ev, metric=METRIC):
    """Per n, the mean over the seeds of ``metric`` against compute (> 0)."""
    d = ev[ev["compute"] > 0]
    return {int(n): g.groupby("compute")[metric].mean().sort_index() for n, g in d.groupby("n")}


def _frozen_validation(results, name):
    """Whether every validation value of a sweep equals its value before training (no path to held-out problems)."""
    ev = results.evals(name, "val")
    before = ev.loc[ev["compute"] == 0, METRIC]
    return before.nunique() == 1 and np.allclose(ev[METRIC], before.iloc[0], rtol=0, atol=1e-12)


def _spec_diff(results, a, b):
    """The config fields (section.field) in which two sweeps' base configs differ, leaving out
    whether the training problems are evaluated (what is measured, not what is run)."""
    da, db = (results.specs[x].base.replace(eval={"train_split": True}).to_dict() for x in (a, b))
    return {f"{sec}.{k}" for sec in da for k in set(da[sec]) | set(db[sec])
            if da[sec].get(k) != db[sec].get(k)}


def test_finding_01_reads_the_fits_and_the_raw_frontier_of_the_easy_sweep(quick):
    findings, results = quick
    f, e, c = findings[1], _ev(quick, 1), _cmp(quick, 1)
    ns = results.specs["easy"].n
    largest = max(ns)
    for key in ("n_star_min", "n_star_max", "n_star_top", "raw_n_star_top", "raw_n_star_max"):
        assert e[key] in ns, key
    # the raw frontier, recomputed from the stored validation evaluations of the easy sweep: at the
    # top budget it is held by the n with the highest mean curve, and its margin over the largest n
    # there is the smaller n's best minus the largest n's best
    curves = _curves(results.evals("easy", "val"))
    best = {n: float(cv.max()) for n, cv in curves.items()}
    assert e["raw_n_star_top"] == max(best, key=best.get)
    at_top = max(v for n, v in best.items() if n < largest) - best[largest]
    assert e["raw_margin_over_largest_n_at_top"] == pytest.approx(at_top, abs=2e-4)
    # the criterion's margin is the smallest over the largest n's evaluations, the top among them
    assert c["raw_margin_over_largest_n"]["value"] <= e["raw_margin_over_largest_n_at_top"] + 1e-4
    if c["raw_margin_over_largest_n"]["value"] > 0:  # a positive margin keeps the largest n off the frontier
        assert e["raw_n_star_max"] < largest
    assert e["saturates_on_raw_frontier"] == (c["raw_margin_over_largest_n"]["value"] > 0)
    assert f["holds_on_all_seeds"] == (e["rises"] and e["saturates_below_max_n"] and e["saturates_on_raw_frontier"])
    # the constant-LR ablation is the easy sweep with only the LR rule changed: at the n whose
    # batch is the LR's reference batch both rules give the same LR, so the runs are identical
    assert _spec_diff(results, "easy", "easy-lr-constant") == {"algo.lr_rule"}
    n_ref = LR_REFERENCE_BATCH // results.specs["easy"].b_problem[0]
    if n_ref in ns:
        a, b = (results.evals(name).query(f"n == {n_ref}").sort_values(["replicate", "step"]) for name in
                ("easy", "easy-lr-constant"))
        assert len(a) and np.array_equal(a[METRIC].to_numpy(), b[METRIC].to_numpy())
    # the interference-off ablation (shared = 0) cannot move held-out problems, hence its training read-out
    assert _frozen_validation(results, "dose-0"), "shared = 0 moves held-out problems: read the ablation there"


def test_finding_02_hard_has_more_groups_without_signal_at_every_n(quick):
    e = _ev(quick, 2)
    zero = {p: [v for _, v in sorted(_by_n(e["zero_signal_share_by_n"][p]).items())] for p in ("easy", "hard")}
    for p in zero:
        assert all(a > b for a, b in zip(zero[p], zero[p][1:]))  # larger n: fewer groups without signal
    assert all(h > x for h, x in zip(zero["hard"], zero["easy"]))  # rarer successes: more groups without one


def test_finding_02_reads_hard_on_the_studys_grid_and_asks_its_saturation_inside_it(quick):
    """The hard sweep stops where the study's does (n * B_problem <= 16,384), and a hard n* at the
    top budget on the grid's largest n does not count as saturating lower (the grid ends there)."""
    findings, results = quick
    e = _ev(quick, 2)
    spec = results.specs["hard"]
    assert spec.b_max == 16384 and max(spec.n) * 32 == 16384 and set(results.evals("hard")["n"]) == set(spec.n)
    top, largest = e["log2_n_star_top"]["hard"], math.log2(max(spec.n))
    assert e["hard_saturates_inside_its_grid"] == (top < largest)
    assert e["hard_saturates_lower"] == (e["hard_saturates_inside_its_grid"] and top <= e["log2_n_star_top"]["easy"] - 1)
    assert findings[2]["holds_on_all_seeds"] == (e["hard_rises"] and e["hard_saturates_lower"])
    assert findings[2]["compared"]["hard_log2_largest_n"]["value"] == largest


def test_finding_03_reads_the_split_across_b_problem(quick):
    findings, results = quick
    f, e = findings[3], _ev(quick, 3)
    for preset, b_max in (("easy", 65536), ("hard", 16384)):
        ev = results.evals(f"{preset}-split")
        assert set(ev["B_problem"]) == {64, 128, 256} and (ev["n"] * ev["B_problem"]).max() <= b_max
        assert min(ev["n"]) >= 8
        last = _last(ev)
        # per problem p^4 <= p <= 1 - (1 - p)^4, so the means keep the order
        assert (last["worst@4"] <= last[METRIC] + 1e-12).all() and (last[METRIC] <= last["best@4"] + 1e-12).all()
        per_bp = e[f"{preset}_by_B_problem"]
        assert set(per_bp) == {"64", "128", "256"}
        for bp, m in per_bp.items():
            for metric in ("worst@4", "best@4"):
                means = last[last["B_problem"] == int(bp)].groupby("n")[metric].mean()
                top = means[means == means.max()].index.min()  # ties to the smaller n
                assert m[f"n_best_{metric}"] == top, (preset, bp, metric)
        reads = e[f"{preset}_split"]
        assert reads["agrees"] + reads["reversed"] <= reads["of"] == 3
    assert e["easy_sharpening"] == (e["easy_split"]["agrees"] >= 2 and e["easy_split"]["reversed"] == 0)
    assert e["hard_coverage"] == (e["hard_split"]["agrees"] >= 2 and e["hard_split"]["reversed"] == 0)
    assert f["holds_on_all_seeds"] == (e["easy_sharpening"] and e["hard_coverage"] and e["extremely_hard_pattern"])
    # the split sweeps are the main sweeps at other B_problem: the same model and algorithm
    assert not _spec_diff(results, "easy", "easy-split") and not _spec_diff(results, "hard", "hard-split")


def test_finding_04_fixed_batch_and_its_ablation(quick):
    e = _ev(quick, 4)
    assert len(e["M"]) == len(e["n_star"]) == len(e["B_problem_star"])
    assert all(n * b == quick[1].specs["q2-easy"].total_batch for n, b in zip(e["n_star"], e["B_problem_star"]))
    assert e["M"] == sorted(e["M"])
    # without the shared path nothing reaches held-out problems: the ablation is read on training
    assert _frozen_validation(quick[1], "q2-easy-no-interference")


def test_finding_05_is_read_in_points_on_the_study_ranges(quick):
    findings, results = quick
    f, e = findings[5], _ev(quick, 5)
    horizon = min(2.0**22, results.specs["easy"].budget)
    assert e["horizon_rollouts"] == horizon
    levels = {}
    for name, by, lo, hi in (("easy", "n", 8, 1024), ("easy-b-problem", "B_problem", 32, 1024)):
        ev = results.evals(name)
        ev = ev[ev["compute"] <= horizon]
        best = ev.groupby(["run", by])[METRIC].max().groupby(by).mean()
        levels[by] = best[(best.index >= lo) & (best.index <= hi)]
    assert set(map(int, e["best_by_n"])) == set(levels["n"].index) and 8 in levels["n"].index
    assert set(map(int, e["best_by_B_problem"])) == set(levels["B_problem"].index)
    assert min(levels["B_problem"].index) >= 32
    for by, key in (("n", "over_n_points"), ("B_problem", "over_B_problem_points")):
        assert e[key] == pytest.approx(100 * (levels[by].max() - levels[by].min()), abs=2e-3)
    assert e["study_points"] == {"over_n": 9.2, "over_B_problem": 1.9}
    assert f["holds_on_all_seeds"] == (e["ratio"] >= 2)


def test_finding_06_tabular_null(quick):
    from isosim.study.findings.tabular_null import lead_over_smallest

    findings, results = quick
    e = _ev(quick, 6)
    # no shared parameters: held-out problems never change, so n* is read on the training set
    assert _frozen_validation(results, "easy-tabular")
    ns = results.specs["easy-tabular"].n
    assert e["n_star_max"] in ns and e["n_star_top"] in ns and e["smallest_n"] == sorted(ns)[:2]
    law = results.law("easy-tabular", "train")
    lead = lead_over_smallest(law, e["smallest_n"])
    # the lead is 0 exactly where one of the two smallest n is n*, positive where a larger n is
    on_top = law["n_star"]["n"].isin(e["smallest_n"]).to_numpy()
    assert np.all(lead[on_top] == 0) and np.all(lead[~on_top & np.isfinite(lead)] > 0)
    assert e["largest_lead_millionths"] == pytest.approx(1e6 * np.nanmax(lead), abs=1e-4)
    tolerance = 2 * np.sqrt(2) * _final_se(results.evals("easy-tabular", "train"))
    assert e["tie_tolerance_millionths"] == pytest.approx(1e6 * tolerance, abs=1e-4)
    assert findings[6]["holds_on_all_seeds"] == (e["n_star_top"] <= e["smallest_n"][-1]
                                                  and np.nanmax(lead) <= tolerance)


def test_finding_06_lead_is_read_on_the_fitted_curves_where_they_compete():
    from isosim.analysis.frontier import ScaleRLFit
    from isosim.study.findings.tabular_null import lead_over_smallest

    grid = np.array([1e2, 1e3, 1e4, 1e5])
    curves = {(2,): ScaleRLFit(A=0.9, C_mid=1e4, B=1.0, R0=0.4, c_min=1e2, c_max=1e5),
              (4,): ScaleRLFit(A=0.8, C_mid=1e4, B=1.0, R0=0.4, c_min=1e3, c_max=1e5),
              (64,): ScaleRLFit(A=0.5, C_mid=1e2, B=1.0, R0=0.4, c_min=1e2, c_max=1e5)}
    values = {k: f.predict(grid) for k, f in curves.items()}
    best = np.maximum.reduce(list(values.values()))
    table = pd.DataFrame({"compute": grid, "value": best,
                          "n": [max(curves, key=lambda k: values[k][i])[0] for i in range(grid.size)]})
    lead = lead_over_smallest({"n_star": table, "curves": curves}, [2, 4])
    expected = best - np.maximum(values[(2,)], np.where(grid >= 1e3 / 10**0.05, values[(4,)], -np.inf))
    assert np.allclose(lead, expected) and lead[0] > 0 and lead[-1] == 0
    # neither small n competes: no lead, not a lead of the envelope over nothing
    far = {(2,): ScaleRLFit(A=0.9, C_mid=1e4, B=1.0, R0=0.4, c_min=1e4, c_max=1e5), (64,): curves[(64,)]}
    assert np.isnan(lead_over_smallest({"n_star": table, "curves": far}, [2, 4])[:2]).all()


def test_finding_07_reads_the_doses_on_validation(quick):
    from isosim.study.findings.dose_response import DOSES, MIN_GAIN

    findings, results = quick
    e = _ev(quick, 7)
    assert e["metric_split"] == "val"
    # dose 0 has no shared path: validation does not move and the dose is left out
    assert _frozen_validation(results, "dose-0")
    assert e["validation_gain_by_dose"]["0"] == pytest.approx(0, abs=1e-9) and "0" not in e["doses_that_learn"]
    assert e["doses_that_learn"] == [d for d, g in e["validation_gain_by_dose"].items() if g >= MIN_GAIN]
    assert set(e["n_star_top_by_dose"]) == set(e["doses_that_learn"])
    assert all(v in results.specs["dose-1"].n for v in e["n_star_top_by_dose"].values())
    # the doses differ only in the scale of the shared path, in proportion to the dose
    shared = {d: results.specs[f"dose-{d:g}"].base.model.shared for d in DOSES}
    assert all(_spec_diff(results, "dose-1", f"dose-{d:g}") <= {"model.shared"} for d in DOSES)
    assert all(shared[d] == pytest.approx(d * shared[1.0]) for d in DOSES)
    vals = list(e["n_star_top_by_dose"].values())
    assert findings[7]["holds_on_all_seeds"] == (len(vals) >= 2 and vals == sorted(vals) and vals[-1] > vals[0])


def test_finding_08_peaks_are_read_per_n_at_both_training_set_sizes(quick):
    findings, results = quick
    e = _ev(quick, 8)
    assert _spec_diff(results, "easy", "easy-d500") == {"population.train_size"}
    assert results.specs["easy-d500"].base.population.train_size == 500
    for name, key in (("easy", "D6000"), ("easy-d500", "D500")):
        for n, curve in _curves(results.evals(name)).items():
            peak = e["validation_peaks"][str(n)][key]
            assert peak["value"] == pytest.approx(curve.max(), abs=1e-4)
            assert peak["compute"] == curve.idxmax()
    assert e["largest_n"] == max(results.specs["easy-d500"].n)
    # memorisation: only training problems get their own offsets, so with D = 500 training gains
    # more than validation at every n (each from its own value before training)
    tr, va = results.evals("easy-d500", "train"), results.evals("easy-d500", "val")
    gain = {s: _last(ev).groupby("n")[METRIC].mean() - ev[ev["compute"] == 0].groupby("n")[METRIC].mean()
            for s, ev in (("train", tr), ("val", va))}
    assert (gain["train"] > gain["val"]).all()
    assert findings[8]["holds_on_all_seeds"] == (e["every_n_peaks_lower"] and e["every_n_peaks_earlier"]
                                                 and e["largest_n_declines"] and e["largest_n_training_keeps_rising"])


def test_finding_09_baseline_runs_are_matched(quick):
    e = _ev(quick, 9)
    # the three runs see the same number of steps at the same B_problem; only n and the baseline differ
    assert e["B_problem"] == SCALES["quick"].baseline_b_problem
    assert e["steps"] == int(SCALES["quick"].budget // (256 * 32))
    assert all(v > 0 for v in e["se"].values())


def test_finding_10_lr_rules_run_at_the_same_batch(quick):
    e, c = _ev(quick, 10), _cmp(quick, 10)
    assert e["batch"] == 256 * 32
    v = e["final_avg@4"]
    assert math.isclose(c["sqrt_minus_constant"]["value"], v["sqrt"] - v["constant"], abs_tol=2e-4)


def test_finding_11_histograms_at_matched_compute(quick):
    findings, results = quick
    e = _ev(quick, 11)
    for name in ("hist-hard", "hist-hard-no-interference"):
        ev = results.evals(name, "train")
        last = _last(ev)
        assert last["compute"].nunique() == 1 and last["compute"].iloc[0] <= e["compute"]  # matched compute
        hist = last[[col for col in last.columns if str(col).startswith("hist:")]]
        assert hist.shape[1] >= 2 and np.allclose(hist.sum(axis=1), 1.0, atol=1e-9)  # shares of problems
    assert _frozen_validation(results, "hist-hard-no-interference")
    for key in ("zero_mass", "top_mass"):
        for n, v in _by_n(e[key]).items():
            # the evidence holds the shares rounded to 4 decimals: their sum may exceed 1 by two half-units
            assert 0 <= v <= 1 and _by_n(e["zero_mass"])[n] + _by_n(e["top_mass"])[n] <= 1 + 1e-4 + 1e-12
    zero, one = _by_n(e["zero_mass"]), _by_n(e["top_mass"])
    lo, hi = min(zero), max(zero)
    assert findings[11]["holds_on_all_seeds"] == (zero[lo] > zero[hi] and one[lo] >= one[hi])


def test_finding_12_forgetting_is_read_against_the_value_before_training(quick):
    findings, results = quick
    e = _ev(quick, 12)
    assert len(e["subsets"]) == 5  # val/easy and val/hard of 50/50; val/easy, val/hard, val/very-easy of 50/25/25
    for band in ("easy", "very-easy"):
        v = e["hard_only_on_val_band"][band]
        # before training the base policy is the same whatever the training data will be
        before = [results.evals(name, f"val/{band}").query("compute == 0")[METRIC] for name in
                  ("hard-only-val-mix", "mix3-val-mix")]
        assert before[0].nunique() == 1 and before[0].iloc[0] == pytest.approx(before[1].iloc[0], abs=1e-12)
        assert v["before"] == pytest.approx(before[0].iloc[0], abs=1e-4)
        final = _last(results.evals("hard-only-val-mix", f"val/{band}")).groupby("n")[METRIC].mean()
        assert v["best_final"] == pytest.approx(final.max(), abs=1e-4)
        assert v["before_minus_best_final"] == pytest.approx(v["before"] - v["best_final"], abs=2e-4)
    loses = all(v["before_minus_best_final"] > 0 for v in e["hard_only_on_val_band"].values())
    assert e["hard_only_forgets"] == loses


def test_figures_cli_draws_every_figure_from_the_stored_sweeps(quick_reproduction, tmp_path):
    out, res = quick_reproduction
    figs = tmp_path / "figs"
    assert main(["figures", "--quick", "--root", str(out / "findings"), "--out", str(figs)]) == 0
    for f in FINDINGS:
        pngs = list(figs.glob(f"fig{f.id:02d}_*.png"))
        assert len(pngs) == 1 and pngs[0].stat().st_size > 5000
        assert pngs[0].with_suffix(".pdf").exists()
    assert json.loads((figs / "findings.json").read_text()) == res["findings"]


def test_figures_cli_bad_input(tmp_path, capsys):
    assert main(["figures", "--quick", "--only", "99", "--root", str(tmp_path)]) == 2
    assert main(["figures", "--quick", "--only", "x", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("isosim figures: error:") for line in err)
    assert not list(tmp_path.iterdir())  # nothing run, nothing written


def test_figures_default_out_is_under_the_output_folder(quick_reproduction, tmp_path, monkeypatch):
    out, _ = quick_reproduction
    monkeypatch.chdir(tmp_path)
    assert main(["figures", "--quick", "--root", str(out / "findings"), "--only", "6"]) == 0
    assert sorted(p.name for p in (tmp_path / "isosim-out" / "figures-quick").iterdir()) == [
        "fig06_tabular.pdf", "fig06_tabular.png"]


def test_results_without_running_need_stored_sweeps(tmp_path):
    with pytest.raises(IsosimInputError, match="no stored sweep"):
        Results(tmp_path, "quick", run=False).raw("easy")


def test_only_sweeps_whose_training_split_is_read_evaluate_their_training_problems(tmp_path):
    """The training problems are evaluated (about 20 times the cost of the validation set) in the
    six sweeps whose training split a finding reads, and a read of another sweep's training
    split is refused before anything is read (the quick reproduction runs every check, so a
    finding that reads a split its sweep does not evaluate fails there)."""
    for scale in ("quick", "full"):
        specs = sweep_specs(scale)
        assert sorted(k for k, v in specs.items() if v.base.eval.train_split) == [
            "dose-0", "easy-d500", "easy-tabular", "hist-hard", "hist-hard-no-interference", "q2-easy-no-interference"]
    with pytest.raises(ValueError, match="does not evaluate its training problems"):
        Results(tmp_path, "quick", run=False).evals("easy", "train")
    assert not list(tmp_path.iterdir())


def test_finding_sweeps_are_plain_data_and_valid():
    for scale in ("quick", "full"):
        specs = sweep_specs(scale)
        assert len({s.id for s in specs.values()}) == len(specs)
        for f in FINDINGS:
            assert set(f.sweeps) <= set(specs)
        for s in specs.values():
            s.validate()
    with pytest.raises(IsosimInputError):
        get_finding(13)
    assert np.all(np.diff([f.id for f in FINDINGS]) == 1)


def test_finding_sweeps_run_on_the_studys_grid_of_n():
    """The Q1 sweeps of both scales use the study's n (powers of two from 8 to 2048; the quick
    scale a subset with both ends), the hard one only those its cap allows (n * 32 <= 16,384);
    only finding 6's tabular sweep adds the n below it."""
    from isosim.study.findings import sweep_specs
    from isosim.study.findings._common import SCALES, STUDY_B_MAX, STUDY_N

    assert STUDY_N == tuple(2**k for k in range(3, 12))
    for scale in ("full", "quick"):
        sc, specs = SCALES[scale], sweep_specs(scale)
        assert set(sc.n) <= set(STUDY_N) and {8, 2048} <= set(sc.n)
        for name in ("easy", "dose-0", "mix-hard-easy"):
            assert specs[name].n == sc.n
        assert specs["hard"].n == tuple(n for n in sc.n if n * 32 <= STUDY_B_MAX["hard"]) and max(specs["hard"].n) == 512
        assert specs["easy-tabular"].n == (*sc.n_below, *sc.n) and max(sc.n_below) < 8
    assert SCALES["full"].n == STUDY_N


def test_every_registered_finding_is_complete():
    """Each finding module is registered, in the study's order, with its sweeps (in the sweep
    registry at both scales), its check, its figure and its text."""
    modules = {m.name for m in pkgutil.iter_modules(findings_pkg.__path__)} - {"_common", "_verdict", "style"}
    assert set(findings_pkg._MODULES) == modules
    assert [f.id for f in FINDINGS] == list(range(1, len(FINDINGS) + 1))
    registry = entries()
    for f in FINDINGS:
        assert all(isinstance(t, str) and t.strip() for t in (f.title, f.study, f.mechanism, f.ablation)), f.id
        assert callable(f.check) and callable(f.figure)
        assert f.figure.__module__ == f.check.__module__ == f.sweeps_at.__module__
        assert f.sweeps
        for scale in SCALES:
            own = f.sweeps_at(SCALES[scale])
            assert tuple(own) == f.sweeps
            for name, spec in own.items():
                entry = registry[spec.id]
                assert entry.spec == spec and entry.name == name and entry.scale == scale
                assert f.id in entry.findings


def test_a_sweep_name_defined_twice_differently_is_refused(monkeypatch):
    first = FINDINGS[0]
    clash = dataclasses.replace(FINDINGS[1], sweeps_at=lambda sc: {
        name: dataclasses.replace(spec, seeds=(99,)) for name, spec in first.sweeps_at(sc).items()})
    monkeypatch.setattr(findings_pkg, "FINDINGS", (first, clash))
    with pytest.raises(ValueError, match="differs"):
        sweep_specs("quick")


def test_figures_only_draws_some_and_keeps_findings_json(quick_reproduction, tmp_path):
    out, _ = quick_reproduction
    figs = tmp_path / "figs"
    figs.mkdir()
    (figs / "findings.json").write_text("[]\n")
    assert main(["figures", "--quick", "--root", str(out / "findings"), "--out", str(figs), "--only", "2,11"]) == 0
    assert sorted(p.name for p in figs.glob("*.png")) == ["fig02_hard_vs_easy.png", "fig11_histograms.png"]
    assert (figs / "findings.json").read_text() == "[]\n"


def test_reproduce_quick_json_and_figures(quick_reproduction, rerun):
    out, res = quick_reproduction
    assert set(res) == {"easy", "hard", "findings"}
    for preset in ("easy", "hard"):
        fit = res[preset]
        assert fit["metric"] == "avg@4"
        assert {"sigmoid", "ci", "r2", "n_star", "frontier"} <= set(fit)
        spec = reproduce_specs(True)[preset]
        assert all(row["n"] in spec.n for row in fit["n_star"])
        comps = [row["compute"] for row in fit["n_star"]]
        assert comps == sorted(comps) and comps[-1] / comps[0] >= 100  # at least two decades
        if fit["sigmoid"] is not None:
            assert set(fit["sigmoid"]) == set(STUDY_Q1[preset])
    assert [f["id"] for f in res["findings"]] == list(range(1, 13))
    for name in ("frontier-easy", "frontier-hard", "n-star-easy", "n-star-hard"):
        assert (out / "figures" / f"{name}.png").stat().st_size > 1000
        assert (out / "figures" / f"{name}.pdf").exists()
    # a rerun reads the stored sweeps instead of recomputing them, and says the same
    text, _, before, after = rerun
    assert after == before
    assert "n*" in text and "study" in text and "== the study's twelve findings" in text
    for f in res["findings"]:
        assert f"{f['id']:>3}  {f['verdict']:<13} P = {f['p_holds']:<5.2f} {f['title']}" in text
    json.dumps(res)  # plain JSON all the way down


def test_reproduce_report_shows_the_laws_warnings(quick_reproduction, rerun, monkeypatch):
    """The text report prints every warning of a preset's n*(C) law (as ``isosim fit`` and the
    JSON do) and then speaks of its saturation as the fit's, not as a result; a law without
    warnings keeps the plain saturation line."""
    import isosim.analysis.fit as fit
    from isosim.study.reproduce import report

    _, res = quick_reproduction
    printed, rep = rerun[:2]  # the stored sweeps, with the fixture's bootstrap
    text = report(rep)
    assert text.strip() in printed
    for preset in ("easy", "hard"):
        assert fit.law_warnings(rep.presets[preset].analysis) == res[preset]["warnings"]
        for w in res[preset]["warnings"]:
            assert f"warning: {w}" in text
    monkeypatch.setattr(fit, "law_warnings", lambda result: ["R^2 0.100 is below 0.8: a test"])
    text = report(rep)
    assert text.count("warning: R^2 0.100 is below 0.8: a test") == 2
    assert text.count("which the warnings below put in doubt") == 2 and "(saturation: n* ->" not in text
    monkeypatch.setattr(fit, "law_warnings", lambda result: [])
    text = report(rep)
    assert "warning:" not in text and text.count("(saturation: n* ->") == 2


def test_reproduce_json_reports_levels_per_n(quick_reproduction):
    """``base_value`` and ``per_n`` recomputed from the stored long-format sweep: the best
    validation avg@4 each run reaches, mean and standard error over the replicates of each n."""
    import numpy as np

    from isosim.study.findings import Results

    out, res = quick_reproduction
    results = Results(out / "findings", "quick")
    for preset in ("easy", "hard"):
        raw = results.raw(preset)
        val = raw[(raw["split"] == "val") & (raw["metric"] == "avg@4")]
        assert res[preset]["base_value"] == pytest.approx(val.loc[val["step"] == 0, "value"].mean(), rel=1e-12)
        rows = res[preset]["per_n"]
        assert [r["n"] for r in rows] == sorted(reproduce_specs(True)[preset].n)
        for r in rows:
            best = val[val["n"] == r["n"]].groupby("run")["value"].max().to_numpy()
            assert r["best_value"] == pytest.approx(best.mean(), rel=1e-12)
            assert r["se"] == pytest.approx(best.std(ddof=1) / np.sqrt(len(best)), rel=1e-9)
            assert r["best_value"] > res[preset]["base_value"]  # every n learns something


def test_readme_fit_example_fits_the_quick_easy_sweep(quick_reproduction, capsys):
    """The README's first sweep to fit, ``f-easy-quick`` as ``isosim reproduce --quick`` stores it:
    ``isosim fit`` on the folder fits the law (a sigmoid, n*(C) over at least two n) and exits 0."""
    out, _ = quick_reproduction
    assert main(["fit", str(out / "findings" / "f-easy-quick"), "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert fit["sigmoid"] is not None and set(fit["sigmoid"]) == {"L", "k", "log10_C0", "b"}
    assert len({row["n"] for row in fit["n_star"]}) >= 2
