"""The scaling-law fits, the bootstrap, run loading and the fit_runs pipeline."""
from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isosim.analysis.fit import (
    ScalingLawFit,
    analyse_runs,
    bootstrap_fit,
    bootstrap_mode,
    fit_m_law,
    fit_runs,
    fit_scaling_law,
)
from isosim.analysis.runs import load_runs, validate_runs
from isosim.errors import IsosimInputError

EASY = dict(L=6.09, k=4.75, log10_C0=5.84, b=2.73)
DOCS = Path(__file__).resolve().parents[1] / "docs"


def example_module():
    spec = importlib.util.spec_from_file_location("make_example_runs", DOCS / "make_example_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example():
    return example_module()


@pytest.fixture(scope="module")
def example_runs(example):
    return example.make_runs()


def sigmoid(x, L, k, x0, b):
    return L / (1 + np.exp(-k * (x - x0))) + b


def law_standard_errors(x, sigma, p):
    theta = np.array(list(p.values()))
    jac = np.column_stack(
        [(sigmoid(x, *(theta + h)) - sigmoid(x, *(theta - h))) / 2e-6 for h in np.eye(4) * 1e-6]
    )
    return np.sqrt(np.diag(sigma**2 * np.linalg.inv(jac.T @ jac)))


@pytest.mark.parametrize("seed", [0, 1])
def test_scaling_law_recovers_known_parameters_within_bootstrap_cis(seed):
    rng = np.random.default_rng(seed)
    x = np.linspace(4.7, 7.0, 40)
    sigma = 0.15
    y = sigmoid(x, *EASY.values()) + rng.normal(0, sigma, x.size)
    fit = fit_scaling_law(x, y)
    se = law_standard_errors(x, sigma, EASY)
    est = np.array(list(fit.params().values()))
    assert np.all(np.abs(est - np.array(list(EASY.values()))) < 4 * se), (est, se)
    assert fit.saturation == pytest.approx(fit.L + fit.b)
    assert fit.r2 > 0.95

    points = pd.DataFrame({"x": x, "y": y})
    warm = [tuple(fit.params().values())]
    boot = bootstrap_fit(
        points, lambda d: fit_scaling_law(d["x"], d["y"], starts=warm).params(),
        unit=None, strata=(), n_boot=60, seed=seed,
    )
    assert boot.mode == "points" and boot.n_ok >= 55
    for name, true in EASY.items():
        lo, hi = boot.ci[name]
        assert lo <= true <= hi, (name, lo, true, hi)
        assert lo <= fit.params()[name] <= hi


def test_scaling_law_is_robust_to_an_outlier():
    x = np.linspace(4.7, 7.0, 40)
    y = sigmoid(x, *EASY.values()) + np.random.default_rng(5).normal(0, 0.05, x.size)
    y[[5, 30]] += [4.0, -4.0]
    fit = fit_scaling_law(x, y)
    assert fit.log10_C0 == pytest.approx(5.84, abs=0.05)
    assert fit.saturation == pytest.approx(8.82, abs=0.15)


def test_scaling_law_fits_a_step_at_the_slope_cap():
    x = np.linspace(5.0, 7.0, 21)
    fit = fit_scaling_law(x, np.where(x < 6.05, 3.0, 7.0))
    assert fit.k > 20 and 6.0 <= fit.log10_C0 <= 6.1
    assert fit.b == pytest.approx(3.0, abs=0.02) and fit.saturation == pytest.approx(7.0, abs=0.02)


def test_m_law_recovers_the_studys_q2_forms():
    M = np.linspace(1, 1200, 60)
    rng = np.random.default_rng(7)
    n_law = dict(L=7.10, k=0.01, M0=91.7, b=2.00)
    y = sigmoid(M, *n_law.values()) + rng.normal(0, 0.05, M.size)
    fit = fit_m_law(M, y)
    assert fit.k == pytest.approx(0.01, rel=0.15)
    assert fit.saturation == pytest.approx(9.10, abs=0.1)
    assert np.allclose(fit.predict(M), sigmoid(M, *n_law.values()), atol=0.1)

    bp_law = dict(L=10.73, k=-0.01, M0=23.9, b=3.88)
    fit = fit_m_law(M, sigmoid(M, *bp_law.values()))
    assert fit.params() == pytest.approx(bp_law, rel=1e-6)  # noise-free: the falling law itself
    assert np.allclose(fit.predict(M), sigmoid(M, *bp_law.values()), atol=1e-3)


@pytest.mark.parametrize(
    "x, y, match",
    [
        ([5.0, 6.0, 7.0], [3.0, 4.0, 5.0], "4 distinct"),
        ([5.0, 5.0, 6.0, 6.0, 7.0], [3.0, 3.5, 4.0, 4.0, 5.0], "4 distinct"),
        ([5.0, 6.0, 7.0, 8.0], [3.0, 3.0, 3.0, 3.0], "constant"),
        ([5.0, 6.0, 7.0, np.nan], [3.0, 4.0, 5.0, 6.0], "finite"),
        ([5.0, 6.0, 7.0, 8.0], [3.0, 4.0, 5.0, np.inf], "finite"),
        ([5.0, 6.0, 7.0, 8.0], [3.0, 4.0], "differ in length"),
        ([[5.0, 6.0], [7.0, 8.0]], [[3.0, 4.0], [5.0, 6.0]], "one-dimensional"),
        (["a", "b", "c", "d"], [1, 2, 3, 4], "numbers"),
    ],
)
def test_scaling_law_input_errors(x, y, match):
    with pytest.raises(IsosimInputError, match=match):
        fit_scaling_law(x, y)


def test_unknown_loss_is_an_input_error():
    with pytest.raises(IsosimInputError, match="loss"):
        fit_scaling_law([1, 2, 3, 4], [1, 2, 3, 5], loss="l2")


finite_or_not = st.floats(allow_nan=True, allow_infinity=True) | st.floats(-10, 10)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 12).flatmap(
        lambda size: st.tuples(st.lists(finite_or_not, min_size=size, max_size=size),
                               st.lists(finite_or_not, min_size=size, max_size=size))
    )
)
def test_scaling_law_fit_succeeds_or_raises_input_error(xy):
    x, y = xy
    try:
        fit = fit_scaling_law(x, y)
    except IsosimInputError as exc:
        assert "\n" not in str(exc)
        return
    assert all(math.isfinite(v) for v in [*fit.params().values(), fit.r2])
    assert fit.L >= 0


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 5), st.sampled_from([1, 2, 8, 64]), st.sampled_from([8, 32]),
            st.integers(0, 30), st.floats(0, 1) | st.just(0.5),
        ),
        max_size=60,
    ),
    st.sampled_from([0.0, 0.01, 0.1]),
)
def test_fit_runs_succeeds_or_raises_input_error(rows, bucket):
    df = pd.DataFrame(rows, columns=["run", "n", "B_problem", "step", "avg@4"])
    df["n"] = df.groupby("run")["n"].transform("first") if len(df) else df["n"]
    df["B_problem"] = df.groupby("run")["B_problem"].transform("first") if len(df) else df["B_problem"]
    try:
        out = fit_runs(df, bucket=bucket, n_boot=3)
    except IsosimInputError as exc:
        assert "\n" not in str(exc)
        return
    assert set(out) == {"metric", "sigmoid", "ci", "r2", "warnings", "n_star", "frontier", "n_star_left_out"}


def test_bootstrap_is_reproducible_and_skips_failed_resamples():
    data = pd.DataFrame({"run": np.repeat(["a", "b", "c", "d"], 3), "n": np.repeat([1, 1, 2, 2], 3), "v": np.arange(12.0)})
    calls = []

    def refit(d):
        calls.append(d)
        if len(calls) % 4 == 0:
            raise IsosimInputError("unlucky")
        return {"mean": float(d["v"].mean())}

    one = bootstrap_fit(data, refit, n_boot=40, seed=3)
    two = bootstrap_fit(data, refit, n_boot=40, seed=3)
    assert one.ci == two.ci and one.mode == "runs" and one.n_ok == 30
    resample = calls[0]
    assert len(resample) == 12 and resample["run"].nunique() == 4
    assert sorted(resample.groupby("run")["n"].first()) == [1, 1, 2, 2]


def test_a_discrete_bootstrap_interval_ends_on_values_the_resamples_gave():
    """discrete=True: each end is a resample's value (lower end rounded down, upper up), where the
    interpolated percentile of the same draws would fall between two of them; non-finite draws
    are left out."""
    data = pd.DataFrame({"run": np.arange(8), "v": [0.0, 0.0, 0.0, 1.0, 1.0, 3.0, 3.0, 3.0]})

    def refit(d):
        m = d["v"].mean()
        return {"k": float(np.round(m)) if m < 2.4 else math.nan}

    d = bootstrap_fit(data, refit, strata=(), n_boot=300, seed=1, level=0.9, discrete=True)
    c = bootstrap_fit(data, refit, strata=(), n_boot=300, seed=1, level=0.9)
    assert set(d.ci["k"]) <= {0.0, 1.0, 2.0}
    assert d.ci["k"][0] <= c.ci["k"][0] and d.ci["k"][1] >= c.ci["k"][1]
    assert all(math.isfinite(x) for x in d.ci["k"])


def test_bootstrap_mode_falls_back_to_points_with_one_run_per_n():
    df = pd.DataFrame({"run": ["a", "b", "c", "c"], "n": [1, 1, 2, 2]})
    assert bootstrap_mode(df) == "points"
    assert bootstrap_mode(df.assign(run=["a", "b", "c", "d"])) == "runs"
    assert bootstrap_mode(df.drop(columns="run")) == "points"


def test_bootstrap_with_no_successes_gives_nan_cis():
    boot = bootstrap_fit(pd.DataFrame({"v": [1.0, 2.0]}), lambda d: {"x": 1.0}, unit=None, n_boot=1)
    assert math.isnan(boot.ci["x"][0])
    with pytest.raises(IsosimInputError):
        bootstrap_fit(pd.DataFrame({"v": [1.0]}), lambda d: {}, level=1.5)


def test_fit_runs_recovers_the_example_law(example, example_runs):
    out = fit_runs(example_runs, n_boot=8, seed=1)
    assert json.loads(json.dumps(out)) == out
    assert set(out) == {"metric", "sigmoid", "ci", "r2", "warnings", "n_star", "frontier", "n_star_left_out"}
    assert out["metric"] == "avg@4"
    assert set(out["sigmoid"]) == set(out["ci"]) == {"L", "k", "log10_C0", "b"}
    assert all(len(v) == 2 and v[0] <= v[1] for v in out["ci"].values())
    assert set(out["n_star"][0]) == {"compute", "n"}
    assert set(out["frontier"][0]) == {"compute", "value", "n", "B_problem"}
    assert all(isinstance(r["n"], int) for r in out["n_star"] + out["frontier"])
    s, true = out["sigmoid"], example.TRUE_LAW
    # n* is quantised to powers of two: the fitted law is the true one to about half a doubling
    assert abs(s["log10_C0"] - true["log10_C0"]) < 0.15
    assert abs(s["b"] - true["b"]) < 0.5
    assert abs(s["L"] + s["b"] - (true["L"] + true["b"])) < 0.5
    assert out["r2"] > 0.95
    ns = [r["n"] for r in out["n_star"]]
    assert ns[0] == 8 and ns[-1] == 512 and ns == sorted(ns)


def test_analyse_runs_points_bootstrap_with_one_run_per_n(example_runs):
    one_seed = example_runs[example_runs["run"].str.endswith("s0")]
    result = analyse_runs(one_seed, n_boot=4, seed=0)
    assert result.bootstrap.mode == "points"
    assert result.bootstrap.n_ok == 4


def test_n_star_that_never_changes_is_an_input_error(example_runs):
    flat = example_runs[example_runs["n"].isin([8, 16])].copy()
    flat.loc[flat["n"] == 16, "avg@4"] -= 0.2
    with pytest.raises(IsosimInputError, match="never changes"):
        fit_runs(flat, n_boot=0)


def test_runs_need_two_n_after_dropping_missing_metric_and_zero_compute():
    df = pd.DataFrame(
        {"run": ["a", "a", "b", "b"], "n": [2, 2, 4, 4], "B_problem": 8, "step": [0, 1, 0, 1], "m": [0.1, 0.2, 0.3, None]}
    )
    with pytest.raises(IsosimInputError, match="distinct n with compute > 0"):
        fit_runs(df, metric="m")
    with pytest.raises(IsosimInputError, match="distinct n to fit"):
        validate_runs(df.assign(m=[0.1, 0.2, None, None]), "m")


def test_validate_runs_derives_compute_from_step():
    df = pd.DataFrame({"run": ["a", "b"], "n": [2, 4], "B_problem": [8, 8], "step": [3, 5], "m": [0.1, 0.2]})
    out = validate_runs(df, "m")
    assert out["compute"].tolist() == [48.0, 160.0]


def write(tmp_path, text, name="runs.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, match",
    [
        ("run,n,compute,avg@4\na,2,10,0.1\nb,4,10,0.2\n", "missing column.*B_problem"),
        ("run,n,B_problem,avg@4\na,2,8,0.1\nb,4,8,0.2\n", "compute \\(or step\\)"),
        ("run,n,B_problem,compute,avg@4\na,0,8,10,0.1\nb,4,8,10,0.2\n", "'n' must hold positive integers"),
        ("run,n,B_problem,compute,avg@4\na,2.5,8,10,0.1\nb,4,8,10,0.2\n", "'n' must hold positive integers"),
        ("run,n,B_problem,compute,avg@4\na,2,x,10,0.1\nb,4,8,10,0.2\n", "'B_problem' must hold positive"),
        ("run,n,B_problem,compute,avg@4\na,2,8,-1,0.1\nb,4,8,10,0.2\n", "'compute' must hold numbers >= 0"),
        ("run,n,B_problem,compute,avg@4\na,2,8,10,0.1\na,4,8,10,0.2\n", "several values of n"),
        ("run,n,B_problem,compute,avg@4\na,2,8,10,0.1\nb,2,8,10,0.2\n", "distinct n"),
        ("run,n,B_problem,compute,avg@4\na,2,8,10,0.5\nb,4,8,10,0.5\n", "constant"),
        ("run,n,B_problem,compute,avg@4\na,2,8,10,oops\nb,4,8,10,0.5\n", "finite numbers"),
        ("run,n,B_problem,compute,best@4\na,2,8,10,0.1\nb,4,8,10,0.5\n", "no metric column 'avg@4'; metric columns: 'best@4'"),
        ("run,n,B_problem,compute,avg@4\n", "no rows"),
        ("", "cannot read"),
    ],
)
def test_load_runs_errors(tmp_path, text, match):
    with pytest.raises(IsosimInputError, match=match) as info:
        load_runs(write(tmp_path, text), metric="avg@4")
    assert "\n" not in str(info.value)


def test_load_runs_missing_file_and_directory(tmp_path):
    with pytest.raises(IsosimInputError, match="no such file"):
        load_runs(tmp_path / "nope.csv")
    with pytest.raises(IsosimInputError, match="directory"):
        load_runs(tmp_path)
    with pytest.raises(IsosimInputError, match="cannot read"):
        load_runs(write(tmp_path, "not parquet", "runs.parquet"))


def test_load_runs_reads_parquet_and_drops_missing_metric_rows(tmp_path):
    df = pd.DataFrame(
        {"run": ["a", "a", "b"], "n": [2, 2, 4], "B_problem": 8, "compute": [1.0, 2.0, 3.0], "avg@4": [0.1, None, 0.3]}
    )
    df.to_parquet(tmp_path / "runs.parquet")
    out = load_runs(tmp_path / "runs.parquet", metric="avg@4")
    assert len(out) == 2 and out["n"].dtype == np.int64


def test_scaling_law_fit_is_frozen():
    fit = ScalingLawFit(1.0, 2.0, 3.0, 4.0, 0.9)
    with pytest.raises(AttributeError):
        fit.L = 2.0
    assert fit.saturation == 5.0 and fit.predict(3.0) == pytest.approx(4.5)


def test_load_runs_reads_a_sweep_directory(tmp_path):
    from isosim.experiments.sweep import run_sweep
    from isosim.study.registry import get_spec

    store = run_sweep(get_spec("q1-hard-testing"), tmp_path / "sw", workers=1, progress=False)
    runs = load_runs(store.root, "best@4")
    assert {"run", "n", "B_problem", "compute", "best@4"} <= set(runs.columns)
    assert runs["n"].nunique() == 3


def test_analyse_runs_starts_each_curve_from_its_evaluations_before_training(example_runs):
    d = example_runs.copy()
    start = d.groupby("run", as_index=False).first().assign(step=0)
    start["avg@4"] = 0.2 + 0.001 * (start["n"] == 8)
    result = analyse_runs(pd.concat([start, d], ignore_index=True), n_boot=0)
    for (n,), curve in result.curves.items():
        assert curve.R0 == pytest.approx(0.201 if n == 8 else 0.2, abs=1e-12)
    without = analyse_runs(d, n_boot=0)
    assert all(c.R0 != pytest.approx(0.2, abs=1e-3) for c in without.curves.values())


def test_a_logistic_fit_of_the_same_points_is_solved_once(monkeypatch):
    """The memo returns the first call's fit for the same points in the same order, starts and
    options (bit for bit), solves again for anything else, and remembers errors as errors."""
    from isosim.analysis import _logistic

    monkeypatch.setattr(_logistic, "_memo", type(_logistic._memo)())
    solves = []
    real = _logistic._fit_logistic
    monkeypatch.setattr(_logistic, "_fit_logistic", lambda *a: solves.append(a) or real(*a))
    x = np.linspace(0.0, 4.0, 12)
    y = 0.1 + 0.5 / (1.0 + np.exp(-3.0 * (x - 2.0))) + np.random.default_rng(0).normal(0.0, 0.01, x.size)
    first = _logistic.fit_logistic(x, y, slope_sign=1)
    assert _logistic.fit_logistic(x.copy(), list(y), slope_sign=1) is first
    assert len(solves) == 1
    _logistic.fit_logistic(x[::-1], y[::-1], slope_sign=1)  # the same points in another order
    _logistic.fit_logistic(x, y, slope_sign=1, loss="linear")
    starts = iter([(0.5, 3.0, 2.0, 0.1)])  # an iterator is read once, for the key and the fit
    warm = _logistic.fit_logistic(x, y, slope_sign=1, starts=starts)
    assert _logistic.fit_logistic(x, y, slope_sign=1, starts=[[0.5, 3.0, 2.0, 0.1]]) is warm
    assert len(solves) == 4
    for _ in range(2):
        with pytest.raises(IsosimInputError, match="constant"):
            _logistic.fit_logistic(x, np.ones_like(x))
    assert len(solves) == 5
    monkeypatch.setattr(_logistic, "MEMO_SIZE", 2)
    for shift in (1.0, 2.0, 3.0):
        _logistic.fit_logistic(x + shift, y, slope_sign=1)
    assert len(_logistic._memo) == 2
