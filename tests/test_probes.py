"""The probe of a learned confidence (paper_figures/temperature_probe.py): its rewritten twin is the
package's twin when the confidence does not learn, and the confidence moves the way its docstring
derives (the base sharpens on easy problems, flattens on hard ones)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from isosim import SimConfig, build_population, simulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "paper_figures"))
import temperature_probe as tp  # noqa: E402


def test_without_learning_the_probe_is_the_package_model():
    trace, pop, theta = tp.run(0.0, {}, "easy", 8, 2.0**15)
    cfg = SimConfig().replace(population={"preset": "easy", "seed": tp.WORLD},
                              allocation={"n": 8, "b_problem": 32, "budget": 2.0**15}, eval={"train_split": False})
    ref = simulate(cfg, 0, population=build_population(cfg.population, cfg.model))
    a, b = (t.curve("avg@4", "val")["value"].to_numpy() for t in (trace, ref))
    assert theta == 0.0
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_the_confidence_sharpens_on_easy_and_flattens_on_hard():
    # 512 steps of n = 8: every informative group pushes theta by the sign of sum_s g_s L0_s
    easy = tp.run(0.05, {}, "easy", 8, 2.0**17)[2]
    hard = tp.run(0.05, {}, "hard", 8, 2.0**17)[2]
    assert easy > 0 > hard
