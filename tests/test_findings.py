"""One test per finding (the study's twelve, in its order) on the reduced sweeps that `reproduce --quick` runs,
and `isosim reproduce --quick` end to end (its JSON, figures and rerun). This is the one file whose
tests read the session's quick reproduction (tests/conftest.py), so that one test process runs them.

Each finding test asserts mechanism-level facts that the quick sweeps resolve: orderings whose
bootstrap interval over the seeds (``compared``) excludes the boundary, or margins of two or
more standard errors. Verdicts are not asserted one by one: the expected quick-scale verdicts
live in ``tests/data/expected_verdicts_quick.json`` (``python tests/regenerate_expected_verdicts.py``
writes it) and one test compares against it, naming every verdict that moved. The numbers come
from the stored sweeps through :mod:`isosim.study.findings`; nothing here is a stored number.
"""
import dataclasses
import json
import math
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import isosim.study.findings as findings_pkg
from isosim import IsosimInputError
from isosim.cli import main
from isosim.study.findings import FINDINGS, SCALES, VERDICTS, Results, get_finding, sweep_specs
from isosim.study.findings._verdict import verdict_of
from isosim.study.registry import entries
from isosim.study.reproduce import STUDY_Q1, reproduce_specs

EXPECTED = Path(__file__).parent / "data" / "expected_verdicts_quick.json"


@pytest.fixture(scope="module")
def quick(quick_reproduction):
    out, res = quick_reproduction
    return {f["id"]: f for f in res["findings"]}, Results(out / "findings", "quick", run=False)


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


def test_quick_verdicts_match_the_expected_file(quick):
    expected = json.loads(EXPECTED.read_text())
    assert sorted(map(int, expected)) == sorted(quick[0])
    moved = [f"finding {fid} ({f['title']}): expected {expected[str(fid)]['verdict']} "
             f"(P = {expected[str(fid)]['p_holds']}), got {f['verdict']} (P = {f['p_holds']})"
             for fid, f in sorted(quick[0].items()) if f["verdict"] != expected[str(fid)]["verdict"]]
    assert not moved, ("verdicts moved (regenerate with tests/regenerate_expected_verdicts.py if on purpose):\n"
                       + "\n".join(moved))


def _by_n(d):
    return {int(n): v for n, v in d.items()}


def test_finding_01_easy_n_star_rises_through_the_lr_rule(quick):
    e, c = _ev(quick, 1), _cmp(quick, 1)
    assert c["k"]["low"] > 0 and c["L"]["low"] >= 2  # n*(C) rises in every resample of the seeds
    assert e["n_star_min"] == 2 and e["n_star_top"] >= 128
    final, se = _by_n(e["final_by_n"]), e["final_se"]
    assert max(final[2], final[8]) + 2 * se < final[128]  # small n plateaus lower, by more than 2 SE
    # ablation: without the shared path n* on the training set stays small
    assert e["ablation_no_interference_train"]["n_star_max"] <= 8
    # ablation: with a constant LR (n = 2048 gets no larger step than n = 2) n* never leaves the
    # small n and ends below the sqrt(B) rule's in every resample: the LR rule carries the rise
    assert e["ablation_constant_lr"]["n_star_max"] <= 8
    assert c["constant_lr_log2_n_star_top"]["high"] < c["log2_n_star_top"]["low"]


def test_finding_02_hard_has_more_groups_without_signal_at_every_n(quick):
    e = _ev(quick, 2)
    zero = {p: [v for _, v in sorted(_by_n(e["zero_signal_share_by_n"][p]).items())] for p in ("easy", "hard")}
    for p in zero:
        assert all(a > b for a, b in zip(zero[p], zero[p][1:]))  # larger n: fewer groups without signal
    assert all(h > x + 0.05 for h, x in zip(zero["hard"], zero["easy"]))


def test_finding_03_larger_n_raises_both_metrics_together_on_easy(quick):
    e = _ev(quick, 3)
    m = e["easy"]
    for metric in ("worst@4", "best@4"):  # the smallest n is below the best by more than 2 SE
        assert m[metric]["2"] + 2 * m[f"se_{metric}"] < max(m[metric].values()), metric
    # both metrics pick the same n on easy and on hard, so sharpening and coverage do not separate
    assert m["n_best_worst@4"] == m["n_best_best@4"] and e["hard"]["n_best_worst@4"] == e["hard"]["n_best_best@4"]


def test_finding_04_fixed_batch_and_its_ablation(quick):
    e = _ev(quick, 4)
    assert len(e["M"]) == len(e["n_star"]) == len(e["B_problem_star"])
    assert all(n * b == 4096 for n, b in zip(e["n_star"], e["B_problem_star"]))
    # without interference n* does not rise with M (on the training set)
    abl = e["ablation_no_interference_train"]
    assert not abl["rises"] and abl["spearman_n"] < 0 < _cmp(quick, 4)["spearman_n"]["low"]


def test_finding_05_n_moves_the_final_reward_more_than_b_problem(quick):
    c = _cmp(quick, 5)
    assert c["over_B_problem_percent"]["low"] > 0
    assert c["over_n_percent"]["low"] > c["over_B_problem_percent"]["high"]  # resolved in every resample


def test_finding_06_tabular_null(quick):
    e, c = _ev(quick, 6), _cmp(quick, 6)
    assert c["log2_n_star_max"]["high"] == 1 and e["n_star_max"] == 2 and not e["law_fitted"]


def test_finding_07_memorisation_sets_n_star_on_the_training_set_at_every_dose(quick):
    c = _cmp(quick, 7)
    # with per-problem offsets this fast, the training set is memorised whatever the shared path
    # does: n* at the top is the same small n at every dose, in every resample
    tops = [c[f"log2_n_star_top_dose_{d}"] for d in ("0", "0.5", "1")]
    assert all(t["low"] == t["high"] == tops[0]["value"] <= 3 for t in tops)


def test_finding_08_small_training_set_gap(quick):
    e = _ev(quick, 8)
    gap = _by_n(e["final_train_minus_val_by_n"])
    assert all(v > 0.01 for v in gap.values())  # D = 500: training ends above validation at every n
    assert gap[min(gap)] > gap[max(gap)] + 0.02  # the smallest n, with the most epochs, memorises most


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


def test_finding_11_histograms(quick):
    e, c = _ev(quick, 11), _cmp(quick, 11)
    assert c["zero_mass_smallest_minus_largest_n"]["low"] > 0  # small n leaves more problems unsolved
    assert c["top_mass_smallest_minus_largest_n"]["high"] < 0  # but does not pile more mass near 1
    # interference off: nothing transfers between problems, and at the largest n more stay unsolved
    zero = _by_n(e["zero_mass"])
    abl = _by_n(e["ablation_no_interference"]["zero_mass"])
    assert abl[256] > zero[256]


def test_finding_12_mixtures(quick):
    e, c = _ev(quick, 12), _cmp(quick, 12)
    assert all(s["n_star_top_C"] >= s["n_star_low_C"] for s in e["subsets"].values())
    assert c["share_of_subsets_where_larger_n_wins"]["low"] > 0.5  # a larger n wins on most subsets
    assert c["easy_mixed_minus_hard_only"]["low"] > 0  # hard-only training loses ground on easy


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


def test_reproduce_quick_json_and_figures(quick_reproduction, capsys):
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
    stored = sorted(p.stat().st_mtime_ns for p in out.rglob("*.parquet"))
    assert main(["reproduce", "--quick", "--out", str(out), "--n-boot", "0"]) == 0
    assert sorted(p.stat().st_mtime_ns for p in out.rglob("*.parquet")) == stored
    text = capsys.readouterr().out
    assert "n*" in text and "study" in text and "== the study's twelve findings" in text
    for f in res["findings"]:
        assert f"{f['id']:>3}  {f['verdict']:<13} P = {f['p_holds']:<5.2f} {f['title']}" in text
    json.dumps(res)  # plain JSON all the way down


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
