"""The registries of advantage estimators and surrogate models: every registered entry runs
through the kernel, the NumPy twin, the config and the command line, and a new model is one
module plus one registration line."""
import dataclasses
import itertools
import types

import numpy as np
import pytest

from isosim import IsosimInputError, ModelConfig, simulate
from isosim.sim import advantages, kernels
from isosim.sim.models import MODELS, base, learn_mask, model_module
from isosim.theory import grpo as theory_grpo

PAIRS = list(itertools.product(MODELS, advantages.NAMES))


@pytest.mark.parametrize("model,advantage", PAIRS)
def test_every_model_and_advantage_runs_the_same_on_kernel_and_twin(small_cfg, model, advantage):
    cfg = small_cfg.replace(model={"kind": model, "local": 0.5}, algo={"advantage": advantage},
                            allocation={"steps": 25})
    a = simulate(cfg, 1).table
    b = simulate(cfg, 1, backend="numpy").table
    np.testing.assert_array_equal(a["step"].values, b["step"].values)
    np.testing.assert_allclose(a["value"], b["value"], rtol=1e-8, atol=1e-10)
    val = a[(a["split"] == "train") & (a["metric"] == "avg@1")]
    assert val["value"].iloc[-1] != val["value"].iloc[0]  # it learned something


def test_advantage_codes_are_distinct_and_the_kernel_uses_them():
    codes = [a.code for a in advantages.ADVANTAGES.values()]
    assert codes == list(range(len(codes)))
    assert (kernels.ADV_GRPO, kernels.ADV_DRGRPO, kernels.ADV_RLOO) == tuple(
        advantages.ADVANTAGES[n].code for n in ("grpo", "drgrpo", "rloo"))


@pytest.mark.parametrize("name", advantages.NAMES)
@pytest.mark.parametrize("n", [2, 3, 8, 33])
def test_registered_table_is_the_kernels_advantage(name, n):
    """The table the mean field integrates equals the kernel's per-rollout advantage."""
    adv = advantages.ADVANTAGES[name]
    eps = 1e-6
    plus, minus = adv.table(n, eps)
    for c in range(n + 1):
        if 0 < c:
            assert plus[c] == pytest.approx(kernels.advantage(1.0, float(c), n, adv.code, eps), rel=1e-12, abs=1e-12)
        if c < n:
            assert minus[c] == pytest.approx(kernels.advantage(0.0, float(c), n, adv.code, eps), rel=1e-12, abs=1e-12)
        # every estimator here sums to zero over a group
        assert c * plus[c] + (n - c) * minus[c] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("name", advantages.NAMES)
def test_theory_names_give_the_same_advantages(name):
    """isosim.theory's name for each estimator computes the same advantages (std_eps = 0)."""
    adv = advantages.ADVANTAGES[name]
    assert set(theory_grpo.ADVANTAGES) == {a.theory for a in advantages.ADVANTAGES.values()}
    n = 7
    plus, minus = adv.table(n, 0.0)
    c = np.arange(n + 1)
    th = theory_grpo.theory_name(name)
    inner = (c > 0) & (c < n)  # the theory's std estimator is 0 at c in {0, n}
    np.testing.assert_allclose(theory_grpo.advantage_value(c, 1, n, th)[inner], plus[inner], rtol=1e-12)
    np.testing.assert_allclose(theory_grpo.advantage_value(c, 0, n, th)[inner], minus[inner], rtol=1e-12)


def test_aliases_of_other_trainers():
    assert advantages.from_trl("group").name == "grpo"
    assert advantages.from_trl(True).name == "grpo"
    assert advantages.from_trl("none").name == "drgrpo"
    assert advantages.from_trl(False).name == "drgrpo"
    assert advantages.from_trl("batch").name == "drgrpo"
    assert advantages.from_verl(True).name == "grpo"
    assert advantages.from_verl(False).name == "drgrpo"
    assert advantages.get("STD").name == "grpo"
    assert advantages.get("mean").name == "drgrpo"
    with pytest.raises(IsosimInputError, match="unknown advantage"):
        advantages.get("ppo")
    aliases = [x for a in advantages.ADVANTAGES.values() for x in (a.name, *a.aliases)]
    assert len(aliases) == len(set(aliases))  # no alias names two estimators


def test_command_line_takes_registered_names_and_aliases():
    from isosim.cli import build_parser
    from isosim.cli._options import config_from_args

    parser = build_parser()
    for given, expected in [("rloo", "rloo"), ("scale_rewards=none", "drgrpo"), ("norm_adv_by_std_in_grpo=true", "grpo")]:
        args = parser.parse_args(["simulate", "--advantage", given, "--steps", "3"])
        assert config_from_args(args).algo.advantage == expected


@pytest.mark.parametrize("name", advantages.NAMES)
def test_min_n_is_enforced(small_cfg, name):
    need = advantages.ADVANTAGES[name].min_n
    if need > 1:
        with pytest.raises(IsosimInputError, match=f"needs n >= {need}"):
            small_cfg.replace(algo={"advantage": name}, allocation={"n": need - 1}).validate()
    small_cfg.replace(algo={"advantage": name}, allocation={"n": need}).validate()


FIELDS = {f.name for f in dataclasses.fields(ModelConfig)}
OTHER = set(base.ModelSection.__annotations__)  # the kind and the learning paths, read through path_scales
CHANGED = {"n_strategies": 12, "rank": 3, "generality_a": 0.9, "generality_b": 2.0, "prior_scale": 1.0,
           "embed_scale": 0.5, "skill_link": 0.2, "dim": 5, "common": 0.8, "logit_mean": 0.5, "logit_std": 1.0,
           "execution_a": 1.5, "execution_b": 0.7, "confidence_floor": 0.5, "confidence_knee": 0.3,
           "world_draw": "stratified"}


def _draw(cfg: ModelConfig):
    mod = model_module(cfg)
    rng = np.random.default_rng(4)
    world = mod.make_world(cfg, rng)
    return mod.draw(cfg, world, rng, 40)


def _same(a: base.Problems, b: base.Problems) -> bool:
    return all(x.shape == y.shape and np.array_equal(x, y)
               for x, y in ((a.base_logits, b.base_logits), (a.features, b.features), (a.rewards, b.rewards),
                            (a.execution, b.execution)))


@pytest.mark.parametrize("kind", list(MODELS))
def test_each_model_declares_exactly_the_knobs_it_reads(kind):
    mod = MODELS[kind]
    assert mod.NAME == kind
    assert set(mod.KNOBS) <= FIELDS - OTHER
    assert OTHER == {"kind", "shared", "local", "local_share"}
    assert set(CHANGED) == FIELDS - OTHER  # the test knows every knob
    # the model's Knobs protocol names its knobs with the config's types, so the config is one
    declared = {**base.ModelSection.__annotations__, **mod.Knobs.__annotations__}
    assert mod.KNOBS == tuple(mod.Knobs.__annotations__)
    assert declared == {k: ModelConfig.__dataclass_fields__[k].type for k in declared}
    # execution noise on (execution_a > 0; off by default), so that execution_b shapes the draws too
    cfg = ModelConfig(kind=kind, execution_a=2.0)
    ref = _draw(cfg)
    assert learn_mask(cfg).shape == (ref.base_logits.shape[1],)
    for knob, value in CHANGED.items():
        changed = _draw(dataclasses.replace(cfg, **{knob: value}))
        assert _same(ref, changed) == (knob not in mod.KNOBS), knob


def test_a_new_model_is_one_module_and_one_registration(small_cfg, monkeypatch):
    """A three-response-type model with one shared preference, registered at run time."""
    toy = types.ModuleType("toy")
    toy.NAME, toy.KNOBS = "toy", ("logit_mean",)
    toy.make_world = lambda cfg, rng: {}

    def draw(cfg, world, rng, size):
        logits = np.stack([rng.normal(cfg.logit_mean, 1.0, size), np.zeros(size), np.zeros(size)], axis=1)
        return base.Problems(logits, np.zeros((size, 0)), np.tile([1.0, 0.0, 1.0], (size, 1)))

    toy.draw = draw
    toy.path_scales = lambda cfg: base.PathScales(beta=cfg.shared, v=0.0, u=cfg.local)
    toy.learn_mask = lambda cfg: np.ones(3)
    monkeypatch.setitem(MODELS, "toy", toy)
    cfg = small_cfg.replace(model={"kind": "toy"}, population={"measure": "exact"}, allocation={"steps": 20})
    a, b = simulate(cfg, 0), simulate(cfg, 0, backend="numpy")
    np.testing.assert_allclose(a.table["value"], b.table["value"], rtol=1e-8, atol=1e-10)
    assert a.final("val")["avg@1"] > a.table.query("step == 0 and split == 'val' and metric == 'avg@1'")["value"].iloc[0]
