"""Small-LM validation of isosim's predictions: a tiny GPT trained from scratch on a verifiable
chained-arithmetic task, real GRPO at equal compute, measured n*(C) against the surrogate's.

This subpackage needs PyTorch (the ``lm`` extra: ``pip install -e ".[lm]"``); nothing else
in isosim imports it.
"""
from .base import SFTConfig, skill_errors, train_base
from .bench import lm_benchmark
from .grpo import (
                   LOSS_AGG,
                   SCALE_REWARDS,
                   GRPOConfig,
                   GRPOTrainer,
                   aggregate,
                   group_advantages,
                   pass_rates,
                   policy_loss,
                   rollouts_for,
                   steps_for,
)
from .heldout import Pilots, Predictor, score_held_out
from .model import GPT, GPTConfig, KVCache
from .protocol import SCALES, ValidateConfig, full_config, medium_config, quick_config
from .task import Problems, TaskSpec, Teacher, Tokenizer, difficulty_pool, mixed_pool, sample_problems, score
from .validate import Validation, run_validate

__all__ = [
    "GPT", "GPTConfig", "KVCache", "GRPOConfig", "GRPOTrainer", "LOSS_AGG", "SCALES", "SCALE_REWARDS", "Pilots",
    "Predictor", "Problems", "SFTConfig", "medium_config", "score_held_out",
    "TaskSpec", "Teacher", "Tokenizer", "ValidateConfig", "Validation", "aggregate", "difficulty_pool", "full_config",
    "group_advantages", "lm_benchmark", "mixed_pool", "pass_rates", "policy_loss", "quick_config", "rollouts_for",
    "run_validate", "sample_problems", "score", "skill_errors", "steps_for", "train_base",
]
