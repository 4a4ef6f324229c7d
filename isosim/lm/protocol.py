"""The design of ``isosim lm validate``: its configuration (:class:`ValidateConfig`, the quick and
full presets, the pass-rate bands of the two subsets) and its grids: the evaluation budgets
C_max / 2^j, the steps at which each n is evaluated, the fixed-batch splits and marks, and the
time plan that sizes both grids (:func:`plan_grid`). Running it is :mod:`isosim.lm.validate`.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from isosim.sim.config import ModelConfig

from .base import SFTConfig
from .grpo import GRPOConfig
from .model import GPTConfig
from .task import VOCAB_SIZE, TaskSpec

BANDS = {"easy": (0.3, 0.6), "hard": (0.0, 0.0625)}
LR_RULES = ("constant", "sqrt")


@dataclass(frozen=True)
class ValidateConfig:
    name: str
    task: TaskSpec
    model: GPTConfig
    sft: SFTConfig
    grpo: GRPOConfig  # n and b_problem are set per run
    teacher_seed: int = 0
    teacher_mean_error: float = 0.25
    teacher_concentration: float = 2.0
    pool_size: int = 1500
    measure_samples: int = 16
    train_size: int = 256  # per subset, at most
    val_size: int = 100
    b_problem: int = 8
    n_grid: tuple[int, ...] = (2, 4, 8, 16, 32)
    budget: int = 8192  # planned C_max (rollouts)
    min_budget: int = 2048  # the plan never goes below this C_max
    n_budgets: int = 4  # evaluations at C_max / 2^j, j < n_budgets
    eval_samples: int = 16
    pass_rate_estimate: str = "jeffreys"  # what the surrogate is given: "jeffreys" (c+1/2)/(m+1) or "raw" c/m
    surrogate: ModelConfig = field(default_factory=ModelConfig)  # the surrogate model (default: isosim's default)
    surrogate_seeds: int = 4
    surrogate_lrs: tuple[float, ...] = tuple(float(x) for x in np.round(np.logspace(-3, 0, 16), 6))
    fb_steps: int = 256  # planned M_max of the fixed-batch grid (halved until it fits)
    fb_min_steps: int = 16  # the plan never goes below this M_max
    fb_n_budgets: int = 4  # fixed-batch evaluations at M_max / 2^j, j < fb_n_budgets
    fb_share: float = 0.25  # share of the grid time given to the fixed-batch grid (at least)
    time_budget_s: float = 150.0  # wall time of the whole validation
    reserve_s: float = 25.0  # kept for the surrogate, the figures and the report
    seed: int = 0
    seeds: int = 1  # training seeds per (subset, n) of the Q1 grid
    first_seed: int = 0  # the index of the first of them: seeds first_seed .. first_seed + seeds - 1 are trained
    fixed_batch: bool = True  # run the fixed-batch grid
    pool_bands: tuple[tuple[float, float, float], ...] = ((0.2, 0.75, 0.45), (0.0, 0.15, 0.45), (0.0, 1.0, 0.1))
    bootstrap: int = 1000  # bootstrap replicates of the n*(C) interval (seeds and validation problems resampled)
    interval: float = 0.9  # central probability of that interval
    shift_start: int | None = None  # the registered first budget of the n*(C) shift test (None: the first evaluated)
    lr_rule: str = "constant"  # "constant": grpo.lr for every run; "sqrt": grpo.lr * sqrt(n B_problem / lr_ref_batch)
    lr_ref_batch: int = 256  # the batch n * B_problem at which a "sqrt" run's lr is grpo.lr
    subsets: tuple[str, ...] = ("easy", "hard")  # which subsets (keys of BANDS) are picked and trained
    checkpoints: bool = False  # save each Q1 run when it ends, so a larger C_max continues it (see config_id)

    def __post_init__(self):
        if self.lr_rule not in LR_RULES:
            raise ValueError(f"lr_rule must be one of {LR_RULES}, got {self.lr_rule!r}")
        if self.lr_ref_batch < 1:
            raise ValueError("lr_ref_batch must be >= 1")
        if not self.subsets or any(k not in BANDS for k in self.subsets):
            raise ValueError(f"subsets must be a non-empty tuple of {tuple(BANDS)}, got {self.subsets!r}")

    def run_lr(self, n: int, b_problem: int) -> float:
        """The learning rate of a run with group size n and B_problem problems a step: ``grpo.lr``
        under the constant rule; under the study's sqrt(B) rule ``grpo.lr * sqrt(B / lr_ref_batch)``
        with B = n * B_problem, so a larger batch takes proportionally larger steps, by sqrt(B)."""
        if self.lr_rule == "constant":
            return self.grpo.lr
        return self.grpo.lr * math.sqrt(n * b_problem / self.lr_ref_batch)

    def seed_indices(self) -> range:
        """The training seed indices of every (subset, n): ``first_seed`` .. ``first_seed + seeds - 1``."""
        return range(self.first_seed, self.first_seed + self.seeds)

    def run_grpo(self, n: int, b_problem: int) -> GRPOConfig:
        """The GRPO settings of one run: ``grpo`` with this n, B_problem and :meth:`run_lr`."""
        return replace(self.grpo, n=n, b_problem=b_problem, lr=self.run_lr(n, b_problem))

    def config_id(self) -> str:
        """A hash of everything that decides the trained runs and their evaluations. The
        surrogate's settings, the time budget, the bootstrap and the shift test's first budget are left out (changing them
        recomputes the comparison from the stored runs without retraining), and so are fields
        added after results were first stored, while they keep their default values (old
        results files keep their id). With ``checkpoints`` the budget fields (``budget``,
        ``min_budget``, ``n_budgets``) and ``seeds`` are left out as well: a run to a larger C_max is
        the same run continued, and more training seeds are more runs of the same design (seed
        index k trains with the same seed whatever the count; ``first_seed`` picks which indices),
        so they share the results file, the base model, the pool and the checkpoints."""
        d = asdict(self)
        for key in ("time_budget_s", "reserve_s", "surrogate", "surrogate_seeds", "surrogate_lrs", "bootstrap",
                    "interval", "shift_start"):
            d.pop(key)
        if self.checkpoints:
            for key in ("budget", "min_budget", "n_budgets", "seeds", "first_seed"):
                d.pop(key)
        for key, default in _LATER_DEFAULTS.items():
            if key in d and d[key] == default:
                d.pop(key)
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


_LATER_DEFAULTS = {"seeds": 1, "first_seed": 0, "fixed_batch": True,
                   "pool_bands": ((0.2, 0.75, 0.45), (0.0, 0.15, 0.45), (0.0, 1.0, 0.1)),
                   "lr_rule": "constant", "lr_ref_batch": 256, "subsets": ("easy", "hard"), "checkpoints": False}


def with_max_budget(cfg: ValidateConfig, c_max: int) -> ValidateConfig:
    """``cfg`` with the planned and the smallest C_max set to ``c_max`` (a power-of-2 multiple or
    fraction of ``cfg.budget``) and as many evaluation budgets as keep the smallest one,
    ``cfg.budget / 2^(n_budgets - 1)``, where it was: ``--max-budget``. On a configuration with
    ``checkpoints`` this extends (or shortens) the same grid."""
    ratio = c_max / cfg.budget
    k = round(math.log2(ratio)) if ratio > 0 else 0
    if ratio <= 0 or 2.0**k != ratio:
        raise ValueError(f"the largest budget must be the configuration's ({cfg.budget}) times a power of 2, "
                         f"got {c_max}")
    if cfg.n_budgets + k < 1:
        raise ValueError(f"{c_max} is below the smallest evaluated budget {cfg.budget // 2**(cfg.n_budgets - 1)}")
    return replace(cfg, budget=int(c_max), min_budget=int(c_max), n_budgets=cfg.n_budgets + k)


def quick_config() -> ValidateConfig:
    """2 CPU cores, under 3 minutes: a one-layer GPT, k <= 4, B_problem 8, C up to 16384 (8192 on a busy machine);
    fixed batch B = 64, M up to 256 (128 on a busy machine)."""
    task = TaskSpec(1, 4)
    return ValidateConfig(
        name="quick", task=task,
        model=GPTConfig(vocab_size=VOCAB_SIZE, block_size=task.block_size, n_layer=1, n_head=4, n_embd=64),
        sft=SFTConfig(steps=900, batch=128, lr=3e-3, time_limit_s=45),
        grpo=GRPOConfig(lr=3e-4), budget=16384, min_budget=2048, n_budgets=5,
        fb_steps=256, fb_min_steps=16, fb_n_budgets=4, time_budget_s=165.0,
    )


def medium_config() -> ValidateConfig:
    """2 idle CPU cores, under 45 minutes with 2 workers: a one-layer GPT of width 24 (capacity
    limited, so RL plateaus below the ceiling) on longer chains (k in [1, 8]), B_problem 32,
    n = 2..64, 2 training seeds per (subset, n), evaluations at C = 2^12 .. 2^19 (8 budgets, a
    doubling apart); no fixed-batch grid. The grid is fixed (the time budget is set so that the
    plan never shrinks it)."""
    task = TaskSpec(1, 8)
    return ValidateConfig(
        name="medium", task=task,
        model=GPTConfig(vocab_size=VOCAB_SIZE, block_size=task.block_size, n_layer=1, n_head=4, n_embd=24),
        sft=SFTConfig(steps=1500, batch=128, lr=3e-3),
        grpo=GRPOConfig(lr=6e-4), pool_size=4500, train_size=512, val_size=200, b_problem=32,
        n_grid=(2, 4, 8, 16, 32, 64), budget=2**19, min_budget=2**19, n_budgets=8, seeds=2, fixed_batch=False,
        time_budget_s=36_000.0, reserve_s=300.0,
    )


def study_config() -> ValidateConfig:
    """2 CPU cores: about 3,800 s of CPU measured for the runs to 2^21 (about 31 minutes of 2 idle
    cores with 2 or more workers; 90 minutes on busy cores). The design whose n* should move,
    projected from the B_problem = 8 medium attempt, where the small n had levelled off at 2^19
    while n = 32 and 128 were still rising; in the committed run (paper_figures/lm/study) n = 8
    rose further instead and n* stayed at 8 up to 2^21. The medium model and pool, easy subset only,
    B_problem 8, n in {8, 32, 128}, 4 training seeds, evaluations at C = 2^13 .. 2^21 (9 budgets,
    a doubling apart); no fixed-batch grid. Every Q1 run is checkpointed when it ends (model,
    AdamW state, the trainer's random states and problem order, its reward history), so
    ``--max-budget`` with a larger C_max on the same folder continues the runs instead of
    retraining them, with the same numbers as runs trained straight through."""
    return replace(medium_config(), name="study", b_problem=8, n_grid=(8, 32, 128), budget=2**21, min_budget=2**21,
                   n_budgets=9, seeds=4, subsets=("easy",), checkpoints=True, time_budget_s=72_000.0)


def study_b32_config() -> ValidateConfig:
    """The study's backup design, about 2,500 s of CPU to 2^21 on 2 CPU cores (1,290 s to 2^20; about
    21 minutes of 2 idle cores in all; paper_figures/lm/study-b32): the study's model,
    pool, easy subset, n grid, seeds and checkpoints, with B_problem 32 and GRPO lr 1.2e-3 (twice
    the study's). Four times the problems per step gives each step four times the informative
    groups; the doubled learning rate keeps the step count's shortfall (a quarter of the study's
    steps at each budget) from leaving every n on its rising edge."""
    cfg = study_config()
    return replace(cfg, name="study-b32", b_problem=32, grpo=replace(cfg.grpo, lr=1.2e-3))


def study_lr_config() -> ValidateConfig:
    """The study at twice its learning rate (GRPO lr 1.2e-3, B_problem 8), evaluations at C = 2^13
    .. 2^20 (8 budgets): about 2,000 s of CPU (17 minutes of 2 idle cores with 2 workers;
    paper_figures/lm/study-lr). At 64 rollouts a step the n = 8 runs are noise-limited: the same
    Adam-normalised step that carries them ahead at small budgets levels them off near 0.65 (their
    training reward still rising), while n = 128, eight times less noisy a step, keeps rising
    (a one-seed probe: 0.65 against 0.83 at 2^20, after trailing up to 2^18)."""
    cfg = study_config()
    return replace(cfg, name="study-lr", grpo=replace(cfg.grpo, lr=1.2e-3), budget=2**20, min_budget=2**20,
                   n_budgets=8)


def study_crossover_config() -> ValidateConfig:
    """The confirmatory run of the crossover that the study-lr grid showed at lr 8.5e-4
    (paper_figures/lm/study-lr-8.5e-4: n = 8 ahead from 2^14 to 2^18 and n = 32 from 2^19, in
    point estimates its paired bootstrap did not resolve), designed from that run before this
    one: n in {8, 32} only, 8 training seeds, evaluations at C = 2^14 .. 2^20 (the first budget
    where those runs had separated), and ``seed`` 1, so the base model, the pool, the subsets
    and every training and evaluation seed are new. About 3,200 s of CPU (27 minutes of 2 idle
    cores with 2 workers)."""
    cfg = study_lr_config()
    return replace(cfg, name="study-crossover", grpo=replace(cfg.grpo, lr=8.5e-4), n_grid=(8, 32), seeds=8,
                   n_budgets=7, seed=1)


def study_confirm_config() -> ValidateConfig:
    """The second confirmatory run of the crossover, designed from the 16-seed study-crossover run
    before this one: there n* was resolved at 8 from 2^15 to 2^18 and at 32 at 2^20, while the first
    budget, 2^14, was a tie in every run at this rate (so a paired test from 2^14 cannot resolve a
    move). The same design with 16 training seeds, evaluations at C = 2^15 .. 2^20, and ``seed`` 2:
    a new base model, pool, subsets and training and evaluation seeds. The registered test:
    ``n_star_shift`` from 2^15 to 2^20, a move of at least 2 doublings with P >= 0.9. About
    5,900 s of CPU (about 50 minutes of 2 idle cores with 2 workers)."""
    return replace(study_crossover_config(), name="study-confirm", seeds=16, n_budgets=6, seed=2)


def study_replicate_config() -> ValidateConfig:
    """The third confirmatory run of the crossover, designed from study-crossover (16 seeds, base
    ``seed`` 1) and study-confirm (16 seeds, ``seed`` 2) before this one: in both, n* was resolved at
    8 at 2^16 .. 2^18 and both first budgets were ties, while the top moved with the base model
    (resolved at 32 at 2^20 for seed 1, ahead but unresolved for seed 2). The study-confirm design
    (16 training seeds, C = 2^15 .. 2^20) with ``seed`` 3, and the registered test ``n_star_shift``
    from 2^17 (where every earlier run had n* resolved at its smallest n) to 2^20, a move of at
    least 2 doublings with P >= 0.9. About 5,700 s of CPU (about 50 minutes of 2 idle cores with 2
    workers)."""
    return replace(study_confirm_config(), name="study-replicate", seed=3, shift_start=2**17)


def study_reseed_config() -> ValidateConfig:
    """The study-crossover base model retrained with fresh seeds, designed after three confirmatory
    runs on new base models failed their registered tests (study-crossover, seed 1: P 0.48 with 16
    seeds; study-confirm, seed 2: 0.33; study-replicate, seed 3: 0.53) while each showed n = 8
    ahead in the middle of its grid and n = 32 at the top, at budgets that moved with the base
    model. Of the three, only seed 1's base model had both ends resolved (n* = 8 from 2^15 to 2^18,
    32 at 2^20). This run asks whether that holds for the same base model under new training
    randomness: study-crossover's configuration (``seed`` 1: the same base model, pool, subsets and
    evaluation seeds) with 16 new training seeds, indices 16 .. 31, and the registered test
    ``n_star_shift`` from 2^17 to 2^20, a move of at least 2 doublings with P >= 0.9. It tests one
    base model, not base models in general. 5,005 s of CPU, measured (48 minutes of 2 cores with 2
    workers)."""
    return replace(study_crossover_config(), name="study-reseed", seeds=16, first_seed=16, shift_start=2**17)


def full_config() -> ValidateConfig:
    """One H200, under 8 minutes: a two-layer GPT, k <= 6, B_problem 32, n = 2..128, C up to 2^17;
    fixed batch B = 512, M up to 512."""
    task = TaskSpec(1, 6)
    return ValidateConfig(
        name="full", task=task,
        model=GPTConfig(vocab_size=VOCAB_SIZE, block_size=task.block_size, n_layer=2, n_head=4, n_embd=128),
        sft=SFTConfig(steps=3000, batch=512, lr=2e-3, time_limit_s=90),
        grpo=GRPOConfig(lr=2e-4),
        pool_size=8000, train_size=1024, val_size=256, b_problem=32, n_grid=(2, 4, 8, 16, 32, 64, 128),
        budget=2**17, min_budget=2**13, n_budgets=8, fb_steps=512, fb_min_steps=32, fb_n_budgets=6,
        time_budget_s=440.0, reserve_s=40.0,
    )


#: the named configurations of ``isosim lm validate --scale``
SCALES = {"quick": quick_config, "medium": medium_config, "study": study_config, "study-b32": study_b32_config,
          "study-lr": study_lr_config, "study-crossover": study_crossover_config,
          "study-confirm": study_confirm_config, "study-replicate": study_replicate_config,
          "study-reseed": study_reseed_config, "full": full_config}


# --- grids and the time plan ----------------------------------------------------------------

def budgets(c_max: int, n_budgets: int, min_rollouts: int = 1) -> list[int]:
    """The evaluation budgets C_max / 2^j, j < n_budgets, that are at least ``min_rollouts``."""
    return sorted({int(c_max // 2**j) for j in range(n_budgets) if c_max // 2**j >= min_rollouts})


def eval_steps(c_max: int, n_budgets: int, n: int, b_problem: int) -> dict[int, int]:
    """{step M: budget C} for the budgets with at least one step at this n."""
    return {c // (n * b_problem): c for c in budgets(c_max, n_budgets) if c >= n * b_problem}


def fb_splits(cfg: ValidateConfig, n_grid: list[int]) -> tuple[int, list[tuple[int, int]]]:
    """The fixed-batch grid's total batch B = B_problem * (the middle n of the grid) and its
    splits (n, B_problem = B / n) over the grid's n that divide B."""
    big_b = cfg.b_problem * n_grid[len(n_grid) // 2]
    return big_b, [(n, big_b // n) for n in n_grid if big_b % n == 0 and big_b // n >= 1]


def fb_marks(m_max: int, fb_n_budgets: int) -> list[int]:
    """The fixed-batch evaluation steps M_max / 2^j, j < fb_n_budgets (at least 1)."""
    return sorted({int(m_max // 2**j) for j in range(fb_n_budgets) if m_max // 2**j >= 1})


def plan_grid(cfg: ValidateConfig, step_s: dict, eval_s: float, seconds_left: float, n_subsets: int = 2,
              workers: int = 1) -> dict:
    """The largest C_max = budget / 2^j (>= min_budget) whose Q1 grid fits its share of
    ``seconds_left`` (1 - fb_share; all of it without the fixed-batch grid), step time modelled
    as a + b * n * B_problem from the probe, every (subset, n) run ``cfg.seeds`` times and the
    runs spread over ``workers`` processes (time / workers); then fewer n if it must. The
    fixed-batch grid gets the rest (at least ``fb_share``): the largest M_max = fb_steps / 2^j
    (>= fb_min_steps) that fits it."""
    (n0, t0), (n1, t1) = sorted(step_s.items())
    slope = max(0.0, (t1 - t0) / max(1, (n1 - n0) * cfg.b_problem))
    icpt = max(1e-4, t0 - slope * n0 * cfg.b_problem)
    grid = list(cfg.n_grid)
    share = cfg.fb_share if cfg.fixed_batch else 0.0
    q1_left = seconds_left * (1.0 - share)

    def fixed_batch(ns, left):
        big_b, splits = fb_splits(cfg, ns)
        if not cfg.fixed_batch:
            return {"B": int(big_b), "splits": [], "m_max": 0, "predicted_s": 0.0, "shrunk": False}

        def fb_cost(m):
            return n_subsets * len(splits) * (m * (icpt + slope * big_b) + len(fb_marks(m, cfg.fb_n_budgets)) * eval_s)
        m = cfg.fb_steps
        while m > cfg.fb_min_steps and fb_cost(m) > left:
            m //= 2
        m = max(m, cfg.fb_min_steps)
        return {"B": int(big_b), "splits": [[int(n), int(bp)] for n, bp in splits], "m_max": int(m),
                "predicted_s": fb_cost(m), "shrunk": m < cfg.fb_steps}

    def result(c, ns, shrunk):
        q1 = cost(c, ns)
        fb = fixed_batch(ns, max(seconds_left - q1, seconds_left * share))
        return {"budget": int(c), "n_grid": ns, "predicted_s": q1, "shrunk": shrunk, "fixed_batch": fb,
                "predicted_total_s": q1 + fb["predicted_s"]}

    def cost(c_max, ns):
        tot = 0.0
        for n in ns:
            m = c_max // (n * cfg.b_problem)
            tot += m * (icpt + slope * n * cfg.b_problem) + len(eval_steps(c_max, cfg.n_budgets, n, cfg.b_problem)) * eval_s
        return n_subsets * cfg.seeds * tot / max(1, workers)

    while True:
        c = cfg.budget
        while c >= cfg.min_budget:
            if cost(c, grid) <= q1_left:
                return result(c, grid, c < cfg.budget or grid != list(cfg.n_grid))
            c //= 2
        if len(grid) <= 3:
            return result(cfg.min_budget, grid, True)
        grid = grid[:-1]  # drop the largest n: it has the fewest steps at every budget
