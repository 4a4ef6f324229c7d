"""The probe of memorisation in superposition (paper_figures/superposition_probe.py): its codes have
the stated overlap variance, it changes only what validation reads, and crosstalk takes from problems
the policy is sure of (the mechanism its docstring derives)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "paper_figures"))
import superposition_probe as sp  # noqa: E402


def test_code_overlaps_have_variance_one_over_the_memory():
    h = 1e4
    xi = sp.Superposed(h).xi(200, 300)
    # the sample variance of N standard draws has a relative standard error sqrt(2 / N), here 0.006
    assert abs(xi.var() * h - 1.0) < 5 * np.sqrt(2 / xi.size)
    assert abs(xi.mean()) * np.sqrt(h) < 5 / np.sqrt(xi.size)
    assert sp.Superposed(h).xi(200, 300) is not xi and np.array_equal(sp.Superposed(h).xi(200, 300), xi)


def test_only_validation_reads_the_crosstalk():
    plain = sp.cell({}, "hard", 32, 0, {"train_size": 200, "val_size": 100}, train=True)
    with sp.Superposed(1e5):
        crossed = sp.cell({}, "hard", 32, 0, {"train_size": 200, "val_size": 100}, train=True)
    np.testing.assert_array_equal(plain["train"][1], crossed["train"][1])
    assert plain["val"][1][0] == crossed["val"][1][0]  # nothing memorised before training: no crosstalk
    assert not np.array_equal(plain["val"][1], crossed["val"][1])


def test_crosstalk_from_memorised_hard_problems_takes_from_very_easy_ones():
    pop = {"train_size": 300, "val_mixture_weights": (("very-easy", 1.0),), "val_size": 200}
    plain = sp.cell({}, "hard", 32, 0, pop)["val"][1]
    with sp.Superposed(1e6):
        crossed = sp.cell({}, "hard", 32, 0, pop)["val"][1]
    assert plain[0] == crossed[0]
    assert crossed[-1] < plain[-1] - 0.02
