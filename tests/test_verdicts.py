"""The bootstrap over seeds behind the three-valued verdicts, and the seeds kept apart for calibration."""
import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from isosim.experiments.sweep import derive_seed
from isosim.study.findings import CALIBRATION_SEEDS, EVALUATION_SEEDS, FAILS, HOLDS, INCONCLUSIVE, Finding, decide
from isosim.study.findings._verdict import SeedResample, resamples, summarise, verdict_of


class _Stored:
    """A stand-in for :class:`isosim.study.findings.Results`: one sweep, one value per replicate."""

    def __init__(self, values):
        self.specs = {}
        rows = [{"run": f"r{i}", "replicate": i, "n": 2, "compute": 1.0, "avg@4": v} for i, v in enumerate(values)]
        self.table = pd.DataFrame(rows)

    def raw(self, name):
        return self.table

    def evals(self, name, split="val"):
        return self.table


def _mean_positive(values):
    def check(r):
        m = float(r.evals("s")["avg@4"].mean())
        return m > 0, {"compared": {"mean": m}}

    return Finding(99, "mean > 0", "", "", "", sweeps_at=lambda sc: {"s": None}, check=check, figure=None), \
        _Stored(values)


def test_verdict_thresholds():
    assert verdict_of(1.0) == verdict_of(0.95) == HOLDS
    assert verdict_of(0.0) == verdict_of(0.05) == FAILS
    assert verdict_of(0.5) == verdict_of(0.949) == verdict_of(0.051) == INCONCLUSIVE


@pytest.mark.parametrize("s", [1, 2, 3, 4, 5])
def test_exact_resamples_are_every_multiset_with_multinomial_weights(s):
    reps = tuple(range(s))
    draws, w, exact = resamples([reps], n_boot=200)
    assert exact and len(draws) == math.comb(2 * s - 1, s)
    assert math.isclose(w.sum(), 1.0)
    # the weight of a multiset is the chance that s draws with replacement give it
    rng = np.random.default_rng(0)
    sims = [tuple(sorted(rng.integers(0, s, s))) for _ in range(20000)]
    for d, wi in zip(draws, w):
        freq = sum(x == tuple(sorted(d[reps])) for x in sims) / len(sims)
        assert abs(freq - wi) < 5 * math.sqrt(wi * (1 - wi) / len(sims)) + 1e-9  # 5 binomial SE


def test_large_or_several_groups_are_sampled_with_a_fixed_seed():
    draws, w, exact = resamples([tuple(range(12))], n_boot=50, seed=3)
    assert not exact and len(draws) == 50 and np.allclose(w, 1 / 50)
    again, _, _ = resamples([tuple(range(12))], n_boot=50, seed=3)
    assert draws == again
    two, _, exact = resamples([(0, 1), (0, 1, 2, 3)], n_boot=20)
    assert not exact and all(set(d) == {(0, 1), (0, 1, 2, 3)} for d in two)


def test_a_resample_repeats_a_drawn_replicate_as_its_own_run():
    _, stored = _mean_positive([1.0, 5.0, 9.0])
    view = SeedResample(stored, {(0, 1, 2): (2, 2, 0)}, {})
    t = view.evals("s")
    assert t["run"].nunique() == 3 and sorted(t["replicate"]) == [0, 1, 2]
    assert math.isclose(t["avg@4"].mean(), (9 + 9 + 1) / 3)


def test_a_resample_reads_its_tolerances_on_the_results_it_draws_from(tmp_path):
    from isosim.study.findings import Results

    results = Results(tmp_path, "quick", run=False)
    assert results.all_seeds() is results
    _, stored = _mean_positive([1.0, 5.0, 9.0])
    view = SeedResample(stored, {(0, 1, 2): (2, 2, 2)}, {})
    assert view.all_seeds() is stored
    # one replicate drawn three times has no spread between seeds; the results drawn from have
    assert view.evals("s")["avg@4"].std() == 0 and view.all_seeds().evals("s")["avg@4"].std() > 0


def test_bootstrap_probability_is_the_exact_share_of_resamples():
    # two seeds, values -1 and +3: resamples {-1,-1} (1/4), {-1,3} (1/2), {3,3} (1/4); mean > 0 in 3/4
    finding, stored = _mean_positive([-1.0, 3.0])
    d = decide(finding, stored)
    assert d["exact"] and d["resamples"] == 3 and math.isclose(d["p_holds"], 0.75)
    assert d["verdict"] == INCONCLUSIVE and d["holds_on_all_seeds"]
    assert d["compared"]["mean"]["value"] == 1.0
    assert d["compared"]["mean"]["low"] == -1.0 and d["compared"]["mean"]["high"] == 3.0
    # the bootstrap SE of a mean of two: sd over the resample distribution = |a - b| / (2 sqrt 2)
    assert math.isclose(d["compared"]["mean"]["se"], 4 / (2 * math.sqrt(2)))


def test_clear_effects_hold_or_fail_and_small_ones_are_inconclusive():
    rng = np.random.default_rng(1)
    assert decide(*_mean_positive(list(2 + 0.1 * rng.standard_normal(4))))["verdict"] == HOLDS
    assert decide(*_mean_positive(list(-2 + 0.1 * rng.standard_normal(4))))["verdict"] == FAILS
    assert decide(*_mean_positive([-1.0, 1.2, -0.9, 1.1]))["verdict"] == INCONCLUSIVE


def test_summarise_reports_undefined_shares():
    s = summarise({"x": 1.0}, [{"x": 1.0}, {"x": float("nan")}], np.array([0.5, 0.5]))
    assert s["x"]["share_defined"] == 0.5 and s["x"]["low"] == s["x"]["high"] == 1.0


def test_calibration_and_evaluation_share_no_seed():
    assert EVALUATION_SEEDS["data_seed"] not in CALIBRATION_SEEDS["data_seeds"]
    cal = {derive_seed(CALIBRATION_SEEDS["root_seed"], r) for r in range(256)}
    ev = {derive_seed(EVALUATION_SEEDS["root_seed"], r) for r in range(256)}
    assert not cal & ev


@pytest.mark.parametrize("script, stages", [("calibrate.py", ("evaluate",)),
                                            ("calibrate_levels.py", ("levels", "finding_one"))])
def test_the_calibration_scripts_run_on_the_calibration_seeds(monkeypatch, tmp_path, script, stages):
    path = Path(__file__).parent.parent / "paper_figures" / script
    spec = importlib.util.spec_from_file_location(f"script_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    seen = {}

    def fake_run_sweep(sweep, out, progress=False, root_seed=0):
        seen.setdefault("root_seeds", set()).add(root_seed)
        seen.setdefault("data_seeds", set()).add(sweep.base.population.seed)
        raise RuntimeError("stop")

    monkeypatch.setattr(mod, "run_sweep", fake_run_sweep)
    if hasattr(mod, "BASE_SHAPES"):
        # stage 0 builds each shape's population in every world: one shape shows which worlds it reads
        monkeypatch.setattr(mod, "BASE_SHAPES", mod.BASE_SHAPES[-1:])
        real_base = mod._base

        def recording_base(model, algo, data_seed, *args, **kw):
            seen.setdefault("stage0_data_seeds", set()).add(data_seed)
            return real_base(model, algo, data_seed, *args, **kw)
        monkeypatch.setattr(mod, "_base", recording_base)
    monkeypatch.setattr("sys.argv", [script, "--root", str(tmp_path), "--out", str(tmp_path / "c.md")])
    with pytest.raises(RuntimeError, match="stop"):
        mod.main()
    if hasattr(mod, "BASE_SHAPES"):
        assert seen.pop("stage0_data_seeds") == set(CALIBRATION_SEEDS["data_seeds"])
        monkeypatch.setattr(mod, "_base", real_base)
    for w in CALIBRATION_SEEDS["data_seeds"]:
        for stage in stages:
            with pytest.raises(RuntimeError, match="stop"):
                getattr(mod, stage)(*mod.CANDIDATES[0], tmp_path, w)
    assert seen == {"root_seeds": {CALIBRATION_SEEDS["root_seed"]}, "data_seeds": set(CALIBRATION_SEEDS["data_seeds"])}
    assert not list(tmp_path.iterdir())


def test_the_expected_verdicts_pin_holds_only():
    """The regression check on the quick verdicts: only holds are pinned, so a finding that moves
    from fails or inconclusive to holds passes, and one that moves from holds to anything else is named."""
    from regenerate_expected_verdicts import OUT, expected, lost_holds

    def report(*verdicts):
        return [{"id": i + 1, "title": f"t{i + 1}", "verdict": v, "p_holds": {HOLDS: 1.0, FAILS: 0.0}.get(v, 0.5)}
                for i, v in enumerate(verdicts)]

    pinned = expected(report(HOLDS, FAILS, INCONCLUSIVE, HOLDS))
    assert set(pinned) == {"1", "4"} and all(v["verdict"] == HOLDS for v in pinned.values())
    assert lost_holds(pinned, report(HOLDS, HOLDS, HOLDS, HOLDS)) == []  # fails / inconclusive -> holds: fine
    lost = lost_holds(pinned, report(FAILS, FAILS, INCONCLUSIVE, INCONCLUSIVE))
    assert len(lost) == 2 and lost[0].startswith("finding 1 (t1)") and "got inconclusive" in lost[1]
    assert len(lost_holds(pinned, report(HOLDS))) == 1  # a pinned finding no longer reported is named
    # the committed file pins holds only
    import json

    assert all(v["verdict"] == HOLDS for v in json.loads(OUT.read_text()).values())
