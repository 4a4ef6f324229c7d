import numpy as np
import pandas as pd
import pytest

from isosim import IsosimInputError
from isosim.analysis.fixed_batch import analyse_fixed_batch, best_split
from isosim.experiments.sweep import evaluations, run_sweep
from isosim.study.registry import get_spec


def _synthetic(B=1024, steps=(10, 20, 40, 80, 160, 320, 640)):
    """Reward peaks at n*(M) = 2^(2 + 5 / (1 + exp(-0.02 (M - 150)))): a known rising n*(M)."""
    rows = []
    for M in steps:
        target = 2 + 5 / (1 + np.exp(-0.02 * (M - 150)))
        for j in range(1, 10):
            n = 2**j
            for rep in range(2):
                rows.append({"run": f"n{n}-r{rep}", "n": n, "B_problem": B // n, "step": M,
                             "avg@4": 0.5 - 0.01 * (j - target) ** 2 + 1e-4 * rep})
    return pd.DataFrame(rows)


def test_best_split_tracks_the_optimum_and_b_problem_falls():
    res = analyse_fixed_batch(_synthetic())
    t = res.table
    assert list(t["n"] * t["B_problem"]) == [1024] * len(t)
    assert t["n"].is_monotonic_increasing and t["B_problem"].is_monotonic_decreasing
    assert res.n_star is not None and res.n_star.k > 0
    assert res.b_problem_star is not None and res.b_problem_star.k < 0
    # the table's n* is the true n*(M) rounded to a power of two (within half a doubling), and so is
    # the fitted law over the whole M range; log2 n* + log2 B_problem* = log2 B for the two fits
    M = np.linspace(10, 640, 200)
    true_log2_n = 2 + 5 / (1 + np.exp(-0.02 * (M - 150)))
    assert np.abs(res.n_star.predict(M) - true_log2_n).max() < 0.5
    np.testing.assert_allclose(res.n_star.predict(M) + res.b_problem_star.predict(M), np.log2(1024), atol=1e-6)


def test_mixed_total_batch_is_an_error():
    df = _synthetic()
    df.loc[0, "B_problem"] = 3
    with pytest.raises(IsosimInputError, match="one total batch"):
        best_split(df)


def test_q2_testing_sweep_end_to_end(tmp_path):
    spec = get_spec("q2-easy-testing")
    ev = evaluations(run_sweep(spec, tmp_path / "q2", workers=1, progress=False).read())
    res = analyse_fixed_batch(ev, steps=spec.steps)
    assert set(res.table["M"]) == set(spec.steps)
    assert (res.table["n"] * res.table["B_problem"] == spec.total_batch).all()


def test_best_split_ties_go_to_the_smaller_n_and_missing_cells_do_not_compete():
    ev = pd.DataFrame({"n": [2, 4, 8, 2, 8], "B_problem": [32, 16, 8, 32, 8], "step": [10, 10, 10, 20, 20],
                       "avg@4": [0.5, 0.5, 0.4, np.nan, 0.3]})
    t = best_split(ev)
    assert t.columns.tolist() == ["M", "n", "B_problem", "value"]
    assert list(zip(t["M"], t["n"])) == [(10, 2), (20, 8)]
