"""The probe of collateral drift (paper_figures/drift_probe.py): with no drift it is the package
exactly, its one-step-at-a-time training is the package's, and its walk has the spread its
docstring states (sigma lr_t per step, warm-up included)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "paper_figures"))
import drift_probe as dp  # noqa: E402

import isosim.sim.kernels as kernels  # noqa: E402
from isosim import SimConfig, build_population, simulate  # noqa: E402
from isosim.sim.run import initial_state, kernel_params, train_data  # noqa: E402

CFG = SimConfig().replace(population={"preset": "easy", "train_size": 200, "val_size": 100},
                          allocation={"n": 8, "b_problem": 16, "budget": 8.0 * 16 * 40})


def _run(drift=None):
    pop = build_population(CFG.population, CFG.model)
    if drift is None:
        return simulate(CFG, 3, population=pop).table
    with drift:
        return simulate(CFG, 3, population=pop).table


def test_no_drift_is_the_package():
    plain = kernels.train_steps
    with dp.Drift(0.0, 3):
        assert kernels.train_steps is plain
    with dp.Drift(1.0, 3):
        assert kernels.train_steps is not plain
    assert kernels.train_steps is plain
    assert _run(dp.Drift(0.0, 3)).equals(_run())


class _Silent(dp.Drift):
    """The probe's stepping with a walk of zero draws."""

    def __init__(self):
        super().__init__(1.0, 3)
        self.rng = type("Zeros", (), {"standard_normal": staticmethod(np.zeros)})()


def test_one_step_at_a_time_is_the_packages_training():
    assert _run(_Silent()).equals(_run())
    assert not _run(dp.Drift(1.0, 3)).equals(_run())


def test_the_walk_spreads_by_sigma_lr_per_step_with_the_warm_up():
    pop = build_population(CFG.population, CFG.model)
    st = initial_state(len(pop.train), *pop.train.problems.base_logits.shape[1:], pop.train.problems.features.shape[1])
    fpar, ipar = kernel_params(CFG)
    drift = dp.Drift(2.0, 5)
    drift.saved = lambda *args: None  # no learning: the walk alone
    steps = 40
    drift.steps(None, train_data(pop.train, CFG), st, fpar, ipar, 0, steps)
    lr, warmup = fpar[kernels.F_LR], int(ipar[kernels.I_WARMUP])
    expected = (2.0 * lr) ** 2 * sum(min(1.0, (t + 1) / warmup) ** 2 for t in range(steps))
    x = np.concatenate([st.beta.ravel(), st.V.ravel()])
    # the variance of N normal draws has a relative standard error sqrt(2 / N)
    assert abs(x.var() / expected - 1.0) < 5 * np.sqrt(2 / x.size)
