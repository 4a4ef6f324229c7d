import json
import subprocess
import sys

import pytest

from isosim import Allocation, IsosimInputError, SimConfig
from isosim.sim.config import AlgoConfig, EvalConfig, ModelConfig, PopulationConfig


def test_round_trip_toml_json_dict():
    cfg = SimConfig(
        population=PopulationConfig(preset="mixture", mixture_weights=(("hard", 0.5), ("easy", 0.5))),
        model=ModelConfig(kind="features", common=0.3),
        algo=AlgoConfig(advantage="rloo", kl_coef=0.01, zero_var_filter=True),
        allocation=Allocation(n=8, b_problem=64, budget=1e6),
        eval=EvalConfig(ks=(1, 4, 16), snapshot_steps=(0, 10)),
    )
    assert SimConfig.from_toml(cfg.to_toml()) == cfg
    assert SimConfig.from_json(cfg.to_json()) == cfg
    assert SimConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert SimConfig.from_toml(cfg.to_toml()).config_id() == cfg.config_id()


def test_config_id_is_stable_across_processes_and_sensitive_to_changes():
    cfg = SimConfig()
    code = "from isosim import SimConfig; print(SimConfig().config_id())"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert other == cfg.config_id()
    assert len(other) == 16
    assert cfg.replace(allocation={"n": 32}).config_id() != cfg.config_id()
    assert cfg.replace(algo={"lr": 0.01}).config_id() != cfg.config_id()


def test_a_field_added_later_keeps_the_ids_of_configs_at_its_default():
    cfg = SimConfig()
    assert "drift" not in cfg.to_dict()["algo"] and cfg.replace(algo={"drift": 0.0}).config_id() == cfg.config_id()
    drifting = cfg.replace(algo={"drift": 0.5})
    assert drifting.to_dict()["algo"]["drift"] == 0.5 and drifting.config_id() != cfg.config_id()
    assert SimConfig.from_toml(drifting.to_toml()) == drifting


@pytest.mark.parametrize("section, change, message", [
    ("allocation", {"n": 0}, "n must be"),
    ("allocation", {"budget": 10.0}, "smaller than one step"),
    ("allocation", {"b_problem": 7000}, "exceeds the training set"),
    ("allocation", {"steps": 5}, "exactly one of steps"),
    ("model", {"kind": "transformer"}, "unknown model"),
    ("model", {"common": 1.5}, "common must be"),
    ("model", {"skill_link": 1.5}, "skill_link must be"),
    ("eval", {"hist_bins": -1}, "hist_bins must be"),
    ("population", {"val_mixture_weights": (("easy", 0.0),)}, "validation share"),
    ("algo", {"lr": -1.0}, "lr must be"),
    ("algo", {"advantage": "ppo"}, "unknown advantage"),
    ("population", {"preset": "medium"}, "unknown preset"),
    ("population", {"measure": "guess"}, "measure must be"),
])
def test_validation_errors(section, change, message):
    cfg = SimConfig().replace(**{section: change})
    with pytest.raises(IsosimInputError, match=message):
        cfg.validate()


def test_unknown_keys_are_rejected():
    with pytest.raises(IsosimInputError, match="unknown key"):
        SimConfig.from_dict({"allocation": {"rollouts": 4}})
    with pytest.raises(IsosimInputError, match="malformed TOML"):
        SimConfig.from_toml("[allocation\nn = 3")


@pytest.mark.parametrize("text", ['[algo]\nzero_var_filter = "false"\n', "[model]\nlocal_share = 3\n",
                                  '[model]\nlocal_share = "no"\n'])
def test_switches_take_only_true_or_false(text):
    """A boolean field read from a file is true or false, nothing that Python would call truthy
    (``bool("false")`` is True)."""
    with pytest.raises(IsosimInputError, match="must be true or false"):
        SimConfig.from_toml(text)
    assert SimConfig.from_toml("[model]\nlocal_share = true\n").model.local_share is True


def test_budget_gives_floor_steps_and_decoupled_baseline_costs_more():
    a = Allocation(n=16, b_problem=32, budget=10_000.0)
    assert a.resolved_steps(AlgoConfig()) == 10_000 // 512
    assert a.resolved_steps(AlgoConfig(baseline_n=64)) == 10_000 // (64 * 32)


def test_lr_rules():
    a = AlgoConfig(lr=1e-3)
    assert a.lr_at(1024) == pytest.approx(1e-3)
    assert AlgoConfig(lr=1e-3, lr_rule="sqrt").lr_at(4096) == pytest.approx(2e-3)
    assert AlgoConfig(lr=1e-3, lr_rule="linear").lr_at(4096) == pytest.approx(4e-3)
    assert AlgoConfig(lr=1e-3, lr_rule="constant").lr_at(4096) == pytest.approx(1e-3)


@pytest.mark.parametrize("sections", [{"population": {"seed": -1}}, {"population": {"seed": 2**63}},
                                      {"allocation": {"budget": 1e300}}, {"allocation": {"budget": 2.0**63}}])
def test_the_api_refuses_seeds_and_budgets_out_of_range(sections):
    """Out-of-range data seeds and budgets are refused by the config itself, not only by the CLI."""
    with pytest.raises(IsosimInputError):
        SimConfig().replace(**sections).validate()
