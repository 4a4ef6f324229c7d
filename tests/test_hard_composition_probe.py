"""The probe of the hard set's composition (paper_figures/hard_composition_probe.py): it makes exactly
the share of problems unsolvable that it names and changes nothing else, its narrower bands exist
only while it draws, and a problem no strategy solves gives no group any signal."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from isosim import SimConfig, build_population, simulate
from isosim.sim.config import BANDS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "paper_figures"))
import hard_composition_probe as hc  # noqa: E402

SMALL = {"preset": "hard", "train_size": 200, "val_size": 100, "seed": 3}


def _small():
    cfg = SimConfig().replace(population=SMALL, allocation={"n": 16, "b_problem": 8, "budget": 2.0**14})
    return cfg, build_population(cfg.population, cfg.model)


def test_unsolvable_takes_exactly_its_share_and_leaves_the_rest():
    _, pop = _small()
    out = hc.unsolvable(pop.train, 0.3, 11)
    before, after = pop.train.problems, out.problems
    chosen = np.random.default_rng(11).choice(200, 60, replace=False)
    rest = np.setdiff1d(np.arange(200), chosen)
    assert np.all(after.rewards[chosen] == 0) and np.all(out.base_pass[chosen] == 0)
    np.testing.assert_array_equal(after.rewards[rest], before.rewards[rest])
    np.testing.assert_array_equal(out.base_pass[rest], pop.train.base_pass[rest])
    for name in ("base_logits", "features", "execution"):
        assert getattr(after, name) is getattr(before, name)
    assert before.rewards[chosen].any()  # the drawn set itself is unchanged (a copy was zeroed)


def test_narrow_bands_exist_only_within_the_block_and_nest():
    table = dict(BANDS)
    with hc.narrow_bands():
        assert BANDS["one"] == (1 / 16, 1 / 16) and BANDS["zero"] == (0.0, 0.0)
        with hc.narrow_bands():
            pass
        assert "one" in BANDS  # the inner block leaves what the outer one added
    assert BANDS == table


def test_a_mixture_of_narrow_bands_has_the_named_shares():
    with hc.narrow_bands():
        cfg = SimConfig().replace(population={"preset": "mixture", "mixture_weights": (("zero", 0.4), ("one", 0.6)),
                                              "train_size": 100, "val_size": 50, "seed": 3})
        pop = build_population(cfg.population, cfg.model)
    assert sorted(pop.train.band.tolist()) == ["one"] * 60 + ["zero"] * 40
    assert sorted(pop.val.band.tolist()) == ["one"] * 30 + ["zero"] * 20


def test_problems_no_strategy_solves_give_no_signal_and_learn_nothing():
    cfg, pop = _small()
    none = hc.Population(hc.unsolvable(pop.train, 1.0, 0), pop.val)
    trace = simulate(cfg.replace(eval={"train_split": True}), 0, population=none)
    zero = trace.curve("zero_var_frac", "train")
    assert np.all(zero.loc[zero["compute_rollouts"] > 0, "value"] == 1.0)
    val = trace.curve("avg@4", "val")["value"].to_numpy()
    assert np.all(val == val[0])  # no group had reward variance: no parameter moved
    learned = simulate(cfg, 0, population=pop).curve("avg@4", "val")["value"].to_numpy()
    assert not np.all(learned == learned[0])
