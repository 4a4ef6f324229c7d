import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import comb

from isosim.errors import IsosimInputError
from isosim.sim.metrics import (
    estimated_metric,
    exact_metric,
    parse_metric,
    pass_at_k_unbiased,
    population_metric,
    worst_at_k_unbiased,
)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.integers(1, 64))
def test_exact_metrics_ordered_and_bounded(ps, k):
    p = np.array(ps)
    best, avg, worst = (exact_metric(p, kind, k) for kind in ("best", "avg", "worst"))
    for m in (best, avg, worst):
        assert np.all((m >= 0) & (m <= 1))
    assert np.all(best >= avg - 1e-12) and np.all(avg >= worst - 1e-12)
    np.testing.assert_allclose(best, 1 - (1 - p) ** k, atol=1e-12)
    np.testing.assert_allclose(worst, p**k, atol=1e-12)


@given(st.integers(1, 40), st.data())
def test_estimators_match_binomial_formulas(m, data):
    k = data.draw(st.integers(1, m))
    c = data.draw(st.integers(0, m))
    assert pass_at_k_unbiased(np.array([c]), m, k)[0] == pytest.approx(1 - comb(m - c, k) / comb(m, k), abs=1e-12)
    assert worst_at_k_unbiased(np.array([c]), m, k)[0] == pytest.approx(comb(c, k) / comb(m, k), abs=1e-12)


@pytest.mark.parametrize("p, m, k", [(0.05, 16, 4), (0.4, 8, 4), (0.8, 16, 8)])
def test_estimators_are_unbiased_monte_carlo(p, m, k):
    rng = np.random.default_rng(7)
    c = rng.binomial(m, p, 200_000)
    for kind in ("best", "worst", "avg"):
        est = estimated_metric(c, m, kind, k)
        se = est.std() / np.sqrt(len(est))
        assert abs(est.mean() - exact_metric(np.array([p]), kind, k)[0]) < 5 * se + 1e-12


def test_parse_metric_and_population_metric():
    assert parse_metric("worst@4") == ("worst", 4)
    with pytest.raises(IsosimInputError):
        parse_metric("best@0")
    with pytest.raises(IsosimInputError):
        parse_metric("median@4")
    assert population_metric(np.array([0.0, 1.0]), "avg@4") == 0.5
