"""n*(C) (isosim.analysis.n_star): the tie rule, the edge rule, and the raw and fitted versions
agreeing on noiseless curves."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from isosim.analysis.frontier import ScaleRLFit, compute_optimal, log_grid
from isosim.analysis.n_star import argmax_rows, best_key, n_star_envelope, n_star_raw
from isosim.errors import IsosimInputError

NAN = math.nan


def wide(rows: dict, columns, names=("n",)) -> pd.DataFrame:
    """{key: values per column} as an n_star_raw table (keys: scalars or tuples)."""
    keys = list(rows)
    index = (pd.MultiIndex.from_tuples(keys, names=list(names)) if len(names) > 1
             else pd.Index(keys, name=names[0]))
    return pd.DataFrame([rows[k] for k in keys], index=index, columns=list(columns))


def test_argmax_rows_first_finite_maximum():
    v = np.array([[1.0, NAN, 2.0, NAN], [3.0, 5.0, 2.0, math.inf], [3.0, NAN, -math.inf, NAN]])
    best, ok = argmax_rows(v)
    assert best[:3].tolist() == [1, 1, 0] and ok.tolist() == [True, True, True, False]
    best, ok = argmax_rows(np.empty((0, 3)))
    assert best.tolist() == [0, 0, 0] and not ok.any()
    with pytest.raises(IsosimInputError):
        argmax_rows([1.0, 2.0])


def test_ties_go_to_the_smaller_n_whatever_the_row_order():
    rows = {8: [0.5, 0.7], 2: [0.5, 0.6], 4: [0.4, 0.7]}
    out = n_star_raw(wide(rows, [10, 20]))
    assert out["n"].tolist() == [2, 4] and out["value"].tolist() == [0.5, 0.7]
    assert out.columns.tolist() == ["compute", "value", "n"]


def test_ties_by_n_then_b_problem_and_extra_levels_are_ignored():
    rows = {("r3", 4, 32): [0.6], ("r2", 4, 16): [0.6], ("r1", 8, 8): [0.6]}
    out = n_star_raw(wide(rows, [100.0], ("run", "n", "B_problem")), ["n", "B_problem"])
    assert (out["n"].item(), out["B_problem"].item()) == (4, 16)
    with pytest.raises(IsosimInputError, match="must name levels"):
        n_star_raw(wide(rows, [100.0], ("run", "n", "B_problem")), ["n", "M"])


def test_edges_missing_values_single_group_and_uncovered_points():
    rows = {2: [0.1, 0.3, NAN, NAN], 4: [NAN, 0.2, 0.9, NAN]}
    out = n_star_raw(wide(rows, [1, 2, 3, 4]), runner_up=True)
    assert out["compute"].tolist() == [1, 2, 3]  # C = 4: no group has a value, so no row
    assert out["n"].tolist() == [2, 2, 4]  # n = 4 has no value at C = 1, n = 2 none at C = 3
    assert out["runner_up_n"].tolist()[1] == 4 and out["runner_up_value"].tolist()[1] == 0.2
    assert out[["runner_up_n", "runner_up_value"]].iloc[[0, 2]].isna().all().all()  # competed alone
    assert n_star_raw(wide({}, [1, 2])).empty


def test_runner_up_of_a_tie_is_the_larger_n():
    out = n_star_raw(wide({4: [0.5], 2: [0.5], 8: [0.1]}, [1]), runner_up=True)
    assert (out["n"].item(), out["runner_up_n"].item(), out["runner_up_value"].item()) == (2, 4, 0.5)


def test_best_key():
    assert best_key({8: 0.5, 2: 0.5, 4: 0.1}) == 2
    assert best_key({(4, 16): 0.3, (2, 64): NAN, (4, 8): 0.3}) == (4, 8)
    assert best_key({2: NAN}) is None and best_key({}) is None


def test_envelope_respects_ranges_and_drops_uncovered_points():
    fits = {
        (1,): ScaleRLFit(R0=0.0, A=1.0, C_mid=10.0, B=1.0, c_min=1.0, c_max=100.0),
        (2,): ScaleRLFit(R0=0.0, A=2.0, C_mid=10.0, B=1.0, c_min=50.0, c_max=1000.0),
    }
    out = n_star_envelope(fits, [0.5, 10.0, 60.0, 500.0, 5000.0])
    assert out["compute"].tolist() == [10.0, 60.0, 500.0]
    assert out["n"].tolist() == [1, 2, 2]
    # slack widens each range by that many decades: n = 2 now reaches 5000 = 1000 * 10^0.7
    wider = n_star_envelope(fits, [0.5, 10.0, 60.0, 500.0, 5000.0], slack_decades=0.7)
    assert wider["compute"].tolist() == [0.5, 10.0, 60.0, 500.0, 5000.0]


def test_envelope_ties_and_m_column():
    curve = dict(R0=0.1, A=0.6, C_mid=1e3, B=1.0, c_min=10.0, c_max=1e5)
    fits = {(8, 4): ScaleRLFit(**curve), (2, 16): ScaleRLFit(**curve), (2, 8): ScaleRLFit(**curve)}
    out = n_star_envelope(fits, [100.0, 1000.0], ("n", "B_problem"))
    assert out.columns.tolist() == ["compute", "value", "n", "B_problem", "M"]
    assert set(zip(out["n"], out["B_problem"])) == {(2, 8)}
    assert np.allclose(out["M"], out["compute"] / 16)
    assert n_star_envelope({}, [1.0, 2.0]).empty
    with pytest.raises(IsosimInputError, match="tuples"):
        n_star_envelope({(2, 8): ScaleRLFit(**curve)}, [1.0])


TRUE = {  # three ScaleRL curves that cross: small n early, large n late
    2: dict(R0=0.2, A=0.5, C_mid=1e4, B=1.0),
    16: dict(R0=0.2, A=0.65, C_mid=1e5, B=1.0),
    128: dict(R0=0.2, A=0.8, C_mid=1e6, B=1.0),
}


def test_raw_and_fitted_agree_on_noiseless_curves():
    grid = log_grid(1e3, 1e8, 10)
    fits = {(n,): ScaleRLFit(**p, c_min=1e3, c_max=1e8) for n, p in TRUE.items()}
    table = wide({n: fits[(n,)].predict(grid) for n in TRUE}, grid)
    raw = n_star_raw(table)
    env = n_star_envelope(fits, grid)
    pd.testing.assert_frame_equal(raw, env)
    assert raw["n"].nunique() == 3 and raw["n"].is_monotonic_increasing
    # the whole pipeline on exact samples of the curves fits them back: the same n* everywhere
    rows = [dict(run=f"r{n}", n=n, B_problem=32, compute=c, value=fits[(n,)].predict(c))
            for n in TRUE for c in np.logspace(3, 8, 80)]
    fitted = compute_optimal(pd.DataFrame(rows), bucket=0, grid=grid)
    assert fitted["n"].tolist() == raw["n"].tolist()
    assert np.allclose(fitted["value"], raw["value"], atol=1e-6)


def test_finding_one_check_passes_only_a_rising_law_that_saturates_below_the_largest_n():
    from isosim.study.findings import finding_one_check

    ns = (2, 8, 32, 128, 512, 1024)
    law = {"fitted": True, "k": 4.0, "L": 8.0, "log10_C0": 6.0, "b": 1.0, "r2": 0.9, "saturation_log2": 9.0,
           "n_star_top": 512, "n_star_max": 512}
    assert finding_one_check(law, ns)["passes"]
    for change in ({"saturation_log2": 10.0}, {"n_star_max": 1024}, {"k": -1.0}, {"L": 1.5}, {"r2": 0.5}):
        assert not finding_one_check({**law, **change}, ns)["passes"], change
    row = finding_one_check({"fitted": False, "n_star_top": 2, "n_star_max": 2}, ns)
    assert row == {"n_star_top": 2, "largest_n_on_frontier": False, "passes": False}


def test_flat_curves_give_n_star_from_the_empirical_frontier():
    """Curves that rise by less than one record-breaking bucket (0.01) leave too few points for
    any per-n fit: n*(C) is then the n that attains the empirical frontier at each of its steps,
    and the law is reported as not fitted, instead of the whole check failing."""
    from isosim.study.findings import n_star_law

    rows = []
    for n, values in ((2, (0.010, 0.012, 0.013, 0.014)), (8, (0.010, 0.011, 0.016, 0.017))):
        for j, (c, v) in enumerate(zip((100.0, 1000.0, 10000.0, 100000.0), values)):
            rows.append({"run": f"n{n}", "n": n, "B_problem": 8, "compute": c, "avg@4": v, "step": j})
    law = n_star_law(pd.DataFrame(rows))
    assert not law["fitted"] and "no group could be fitted" in law["error"]
    assert law["curves"] == {}
    table = law["n_star"]
    assert list(table["compute"]) == [100.0, 1000.0, 10000.0, 100000.0]
    assert list(table["n"]) == [2, 2, 8, 8] and list(table["value"]) == [0.010, 0.012, 0.016, 0.017]
    assert law["n_star_top"] == 8 and law["n_star_min"] == 2
