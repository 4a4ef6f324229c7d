"""Record-breaking points, the frontier, ScaleRL curves, compute_optimal and sensitivity
(the n* arg-max itself: tests/test_n_star.py)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isosim.analysis.frontier import (
    compute_optimal,
    final_values,
    fit_groups,
    fit_reward_curve,
    frontier,
    frontier_at,
    initial_values,
    log_grid,
    record_breaking,
    sensitivity,
)
from isosim.errors import IsosimInputError

runs_tables = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.sampled_from([2, 8, 32]),
        st.sampled_from([16, 64]),
        st.integers(1, 40).map(float),
        st.floats(-1.0, 1.0, allow_nan=False) | st.sampled_from([0.1, 0.12, 0.5]),
    ),
    max_size=40,
).map(lambda rows: pd.DataFrame(rows, columns=["run", "n", "B_problem", "compute", "value"]))


def brute_frontier(df: pd.DataFrame, at: np.ndarray) -> np.ndarray:
    c, v = df["compute"].to_numpy(), df["value"].to_numpy()
    return np.array([v[c <= x].max() if np.any(c <= x) else np.nan for x in at])


def test_record_breaking_keeps_first_point_of_each_new_bucket():
    df = pd.DataFrame(
        {"run": "a", "compute": [1, 2, 3, 4, 5, 6], "value": [0.1, 0.105, 0.12, 0.11, 0.2, 0.205]}
    )
    assert record_breaking(df, bucket=0.01)["value"].tolist() == [0.1, 0.12, 0.2]
    assert record_breaking(df, bucket=0)["value"].tolist() == [0.1, 0.105, 0.12, 0.2, 0.205]
    assert record_breaking(df, bucket=None)["value"].tolist() == [0.1, 0.105, 0.12, 0.2, 0.205]


def test_record_breaking_is_per_run_in_compute_order_and_drops_nan():
    df = pd.DataFrame(
        {
            "run": ["a", "b", "a", "b", "a", "b"],
            "compute": [3.0, 1.0, 1.0, 2.0, 2.0, np.nan],
            "value": [0.9, 0.5, 0.2, 0.4, np.nan, 0.99],
        }
    )
    out = record_breaking(df, bucket=0)
    assert sorted(zip(out["run"], out["compute"], out["value"])) == [
        ("a", 1.0, 0.2), ("a", 3.0, 0.9), ("b", 1.0, 0.5),
    ]


def test_record_breaking_without_run_column_uses_n_and_b_problem():
    df = pd.DataFrame({"n": [2, 4, 2, 4], "B_problem": 8, "compute": [1, 1, 2, 2], "value": [0.3, 0.1, 0.2, 0.2]})
    out = record_breaking(df, bucket=0)
    assert sorted(zip(out["n"], out["value"])) == [(2, 0.3), (4, 0.1), (4, 0.2)]


@pytest.mark.parametrize("bucket", [-0.1, math.nan, math.inf])
def test_record_breaking_rejects_bad_bucket(bucket):
    with pytest.raises(IsosimInputError, match="bucket"):
        record_breaking(pd.DataFrame({"compute": [1.0], "value": [0.0]}), bucket=bucket)


def test_missing_columns_are_input_errors():
    with pytest.raises(IsosimInputError, match="'value'"):
        frontier(pd.DataFrame({"compute": [1.0]}))
    with pytest.raises(IsosimInputError, match="DataFrame"):
        record_breaking([1, 2, 3])


def test_frontier_table_and_identity_columns():
    df = pd.DataFrame(
        {
            "n": [2, 8, 2, 8], "B_problem": 32, "run": ["r2", "r8", "r2", "r8"],
            "compute": [1.0, 2.0, 3.0, 4.0], "value": [0.2, 0.1, 0.3, 0.5],
        }
    )
    f = frontier(df)
    assert f.columns.tolist() == ["compute", "value", "n", "B_problem", "run"]
    assert f["compute"].tolist() == [1.0, 3.0, 4.0]
    assert f["n"].tolist() == [2, 2, 8]
    assert np.allclose(frontier_at(f, [0.5, 1.0, 2.5, 10.0]), [np.nan, 0.2, 0.2, 0.5], equal_nan=True)


@settings(max_examples=150, deadline=None)
@given(runs_tables, st.sampled_from([0, None]))
def test_frontier_from_record_breaking_points_equals_full_frontier(df, bucket):
    full = frontier(df)
    rec = frontier(record_breaking(df, bucket=bucket))
    assert full["compute"].tolist() == rec["compute"].tolist()
    assert full["value"].tolist() == rec["value"].tolist()


@settings(max_examples=150, deadline=None)
@given(runs_tables)
def test_frontier_is_monotone_and_is_the_running_max(df):
    f = frontier(df)
    assert np.all(np.diff(f["compute"]) > 0)
    assert np.all(np.diff(f["value"]) > 0)
    at = np.unique(np.concatenate([df["compute"].to_numpy(), [0.5, 41.0]]))
    assert np.allclose(frontier_at(f, at), brute_frontier(df, at), equal_nan=True)


@settings(max_examples=100, deadline=None)
@given(runs_tables, st.sampled_from([0.01, 0.05, 0.3]))
def test_bucketed_frontier_is_within_one_bucket(df, bucket):
    at = np.unique(df["compute"].to_numpy())
    full = brute_frontier(df, at)
    rec = frontier_at(frontier(record_breaking(df, bucket=bucket)), at)
    assert np.all(rec <= full + 1e-12)
    assert np.all(rec > full - bucket * (1 + 1e-6))


def scalerl(c, R0, A, C_mid, B):
    return R0 + (A - R0) / (1 + (C_mid / c) ** B)


TRUE_CURVE = dict(R0=0.3, A=0.7, C_mid=1e6, B=1.5)


def standard_errors(c, sigma, p):
    """Asymptotic SEs of (R0, A, log10 C_mid, B) for Gaussian noise sigma at parameters p."""
    theta = np.array([p["R0"], p["A"], math.log10(p["C_mid"]), p["B"]])

    def model(t):
        return scalerl(c, t[0], t[1], 10 ** t[2], t[3])

    jac = np.column_stack(
        [(model(theta + h) - model(theta - h)) / (2e-6) for h in np.eye(4) * 1e-6]
    )
    return np.sqrt(np.diag(sigma**2 * np.linalg.inv(jac.T @ jac)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scalerl_curve_recovers_known_parameters(seed):
    rng = np.random.default_rng(seed)
    c = np.logspace(4, 8, 80)
    sigma = 0.01
    y = scalerl(c, **TRUE_CURVE) + rng.normal(0, sigma, c.size)
    fit = fit_reward_curve(c, y)
    se = standard_errors(c, sigma, TRUE_CURVE)
    est = np.array([fit.R0, fit.A, math.log10(fit.C_mid), fit.B])
    true = np.array([0.3, 0.7, 6.0, 1.5])
    assert np.all(np.abs(est - true) < 4 * se), (est, se)
    assert fit.r2 > 0.95
    assert (fit.c_min, fit.c_max) == (c.min(), c.max())
    assert fit.predict(fit.C_mid) == pytest.approx((fit.R0 + fit.A) / 2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scalerl_curve_with_a_measured_start_recovers_the_other_parameters(seed):
    rng = np.random.default_rng(seed)
    c = np.logspace(4, 8, 80)
    sigma = 0.01
    y = scalerl(c, **TRUE_CURVE) + rng.normal(0, sigma, c.size)
    fit = fit_reward_curve(c, y, r0=0.3)
    assert fit.R0 == pytest.approx(0.3, abs=1e-12)
    se = standard_errors(c, sigma, TRUE_CURVE)[1:]  # with R0 free: at least as wide as with it known
    est = np.array([fit.A, math.log10(fit.C_mid), fit.B])
    assert np.all(np.abs(est - np.array([0.7, 6.0, 1.5])) < 4 * se), (est, se)


def test_a_measured_start_keeps_a_late_rising_curve_at_its_start():
    # a curve that has barely moved at its first points, then rises: left free, R0 sits on those
    # first points (above where every run started); with R0 measured it starts there
    c = np.logspace(4.5, 7, 12)
    start = 0.023
    y = scalerl(c, start, 0.2, 2e6, 3.0) + np.where(c < 1e5, 0.004, 0.0)
    free = fit_reward_curve(c, y, loss="linear")
    pinned = fit_reward_curve(c, y, loss="linear", r0=start)
    assert free.predict(1e3) > start + 0.001
    assert pinned.predict(1e3) == pytest.approx(start, abs=1e-6)


def test_initial_values_are_each_groups_mean_before_training():
    df = pd.DataFrame({"run": ["a", "a", "b", "b", "c"], "n": [8, 8, 8, 8, 64],
                       "compute": [0.0, 10.0, 0.0, 10.0, 10.0], "value": [0.1, 0.5, 0.3, 0.6, 0.7]})
    assert initial_values(df) == {(8,): pytest.approx(0.2)}


def test_compute_optimal_starts_each_curve_from_its_evaluations_at_compute_0():
    df = two_n_runs()
    start = df.groupby("run", as_index=False).first().assign(compute=0.0, value=0.2)
    with_start = compute_optimal(pd.concat([start, df], ignore_index=True), bucket=0)
    assert with_start.attrs["r0"] == {(2,): pytest.approx(0.2), (64,): pytest.approx(0.2)}
    given = compute_optimal(df, bucket=0, r0={(2,): 0.2, (64,): 0.2})
    pd.testing.assert_frame_equal(with_start, given)
    assert compute_optimal(df, bucket=0).attrs["r0"] == {}


def test_compute_optimal_curves_start_from_the_given_values():
    df = two_n_runs()
    out = compute_optimal(df, bucket=0, r0={(2,): 0.2, (64,): 0.2})
    for fit in out.attrs["fits"].values():
        assert fit.R0 == pytest.approx(0.2, abs=1e-12)
    assert out["n"].is_monotonic_increasing


def test_scalerl_fit_is_robust_to_outliers():
    rng = np.random.default_rng(3)
    c = np.logspace(4, 8, 80)
    y = scalerl(c, **TRUE_CURVE) + rng.normal(0, 0.01, c.size)
    y[::10] += 0.3
    fit = fit_reward_curve(c, y)
    assert fit.A == pytest.approx(0.7, abs=0.03)
    assert math.log10(fit.C_mid) == pytest.approx(6.0, abs=0.1)
    ols = fit_reward_curve(c, y, loss="linear")
    assert abs(fit.A - 0.7) < abs(ols.A - 0.7)


def test_scalerl_fit_is_monotone_even_on_decreasing_data():
    c = np.logspace(3, 6, 20)
    fit = fit_reward_curve(c, np.linspace(0.8, 0.2, 20))
    assert np.all(np.diff(fit.predict(c)) >= -1e-12)
    # the best non-decreasing fit to data falling symmetrically about 0.5 is the constant 0.5
    np.testing.assert_allclose(fit.predict(c), 0.5, atol=1e-6)
    assert fit.r2 == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize(
    "compute, value, match",
    [
        ([1.0, 2.0, 3.0], [0.1, 0.2, 0.3], "4 distinct"),
        ([1.0, 2.0, 3.0, 4.0], [0.5, 0.5, 0.5, 0.5], "constant"),
        ([1.0, 2.0, 3.0, np.nan], [0.1, 0.2, 0.3, 0.4], "finite"),
        ([0.0, 2.0, 3.0, 4.0], [0.1, 0.2, 0.3, 0.4], "positive"),
        ([1.0, 2.0, 3.0, 4.0], [0.1, 0.2, 0.3], "differ in length"),
    ],
)
def test_scalerl_fit_input_errors(compute, value, match):
    with pytest.raises(IsosimInputError, match=match):
        fit_reward_curve(compute, value)


def two_n_runs(c_max_big=1e8):
    """n=2 saturates early at 0.5; n=64 rises later to 0.8: they cross near C = 1e6."""
    rows = []
    for n, curve, c_hi in [(2, dict(R0=0.2, A=0.5, C_mid=1e4, B=1.0), 1e8), (64, dict(R0=0.2, A=0.8, C_mid=1e6, B=1.0), c_max_big)]:
        for c in np.logspace(3, math.log10(c_hi), 60):
            rows.append(dict(run=f"r{n}", n=n, B_problem=32, compute=c, value=scalerl(c, **curve)))
    return pd.DataFrame(rows)


def crossing_of_two_n():
    c = np.logspace(3, 8, 100001)
    diff = scalerl(c, 0.2, 0.8, 1e6, 1.0) - scalerl(c, 0.2, 0.5, 1e4, 1.0)
    return c[np.argmax(diff > 0)]


def test_compute_optimal_switches_n_at_the_crossing():
    out = compute_optimal(two_n_runs(), bucket=0, points_per_decade=20)
    assert out.columns.tolist() == ["compute", "value", "n"]
    switch = out["compute"][out["n"] == 64].min()
    assert abs(math.log10(switch) - math.log10(crossing_of_two_n())) <= 1 / 20 + 1e-9
    assert out["n"].is_monotonic_increasing


def test_compute_optimal_never_extrapolates_a_curve():
    out = compute_optimal(two_n_runs(c_max_big=3e6), bucket=0, points_per_decade=20, slack_decades=0)
    assert set(out.loc[out["compute"] > 3e6, "n"]) == {2}


def test_compute_optimal_by_n_and_b_problem_reports_m():
    df = two_n_runs()
    df = pd.concat([df, df.assign(B_problem=128, value=df["value"] - 0.01, run=df["run"] + "b")])
    out = compute_optimal(df, group=("n", "B_problem"), bucket=0)
    assert out.columns.tolist() == ["compute", "value", "n", "B_problem", "M"]
    assert set(out["B_problem"]) == {32}
    assert np.allclose(out["M"], out["compute"] / (out["n"] * out["B_problem"]))


def test_fit_groups_skips_unfittable_groups_and_fails_when_none_fit():
    df = two_n_runs()
    df = pd.concat([df, pd.DataFrame({"run": "x", "n": 8, "B_problem": 32, "compute": [1.0, 2.0], "value": [0.1, 0.2]})])
    assert set(fit_groups(df)) == {(2,), (64,)}
    with pytest.raises(IsosimInputError, match="no group could be fitted"):
        fit_groups(df[df["n"] == 8])


def test_log_grid():
    g = log_grid(1e4, 1e6, 10)
    assert g[0] == 1e4 and g[-1] == 1e6 and g.size == 21
    with pytest.raises(IsosimInputError):
        log_grid(0.0, 1.0)


def test_sensitivity_definition():
    final = pd.DataFrame(
        {
            "n": [8, 16, 32, 16, 16, 16],
            "B_problem": [32, 32, 32, 64, 64, 128],
            "value": [0.50, 0.55, 0.60, 0.54, 0.56, 0.56],
        }
    )
    s = sensitivity(final)
    assert (s.at_B_problem, s.at_n) == (32, 16)
    assert s.over_n == pytest.approx((0.60 - 0.50) / 0.60 * 100)
    assert s.over_B_problem == pytest.approx((0.56 - 0.55) / 0.56 * 100)
    with pytest.raises(IsosimInputError, match="over n"):
        sensitivity(final, at_B_problem=64)
    with pytest.raises(IsosimInputError, match="over B_problem"):
        sensitivity(final, at_n=8)


def test_final_values_takes_the_last_evaluation_of_each_run():
    df = two_n_runs()
    last = final_values(df)
    assert last["run"].tolist() == ["r2", "r64"]
    assert np.allclose(last["value"], [scalerl(1e8, 0.2, 0.5, 1e4, 1.0), scalerl(1e8, 0.2, 0.8, 1e6, 1.0)])


def test_a_curve_that_never_rises_above_its_measured_start_cannot_be_fitted():
    c = np.logspace(3, 6, 10)
    with pytest.raises(IsosimInputError, match="never rises above its fixed lower level 0.5"):
        fit_reward_curve(c, np.linspace(0.45, 0.3, 10), r0=0.5)
