"""``isosim lm validate``: measured n*(C) of a real (small) language model trained by GRPO,
against the n*(C) that isosim's surrogate predicts from the model's pass-rate histogram.

Protocol (docs/lm.md has the details):

1. Train the base GPT from scratch on teacher traces (or reuse ``DIR/base.pt``).
2. Draw a problem pool, measure each problem's avg@16 under the base model, and pick the
   easy ([0.3, 0.6]) and hard ([0, 0.0625]) subsets, each split into train and validation.
3. Time a few GRPO steps at the smallest and largest n, and fix the largest budget C_max
   (shrinking the planned one, then the n grid, until the grid fits the time left).
4. Q1 grid per subset: B_problem fixed, one run per n up to C_max with a constant learning
   rate, so the run for n is also the run for every smaller budget; validation avg@1
   (``eval_samples`` samples per problem, not counted as compute) at C_max / 2^j.
5. Measured n*(C): at each budget, the n with the highest best-so-far validation avg@1
   (the frontier's definition applied per n; ties go to the smaller n).
6. Predicted n*(C): isosim's strategies surrogate built with
   ``population_from_pass_rates(train rates, val rates, model=ModelConfig())`` and run by
   ``isosim.simulate`` with the same n, B_problem and steps M (so the same rollouts C); its
   one free constant, the learning rate of its (logit-space) Adam, is fitted to the LM's
   learning curve at the reference n (the middle of the grid) and nothing else; then the
   same arg-max rule. Agreement: mean |log2 n*_measured - log2 n*_predicted| over budgets.
7. Fixed-batch grid per subset: total batch B = n * B_problem fixed (B_problem times the
   grid's middle n), one run per split (n, B / n) over the grid's n to M_max steps, evaluated
   at M_max / 2^j (nested, as above). Measured n*(M) and B_problem*(M) = B / n* by the same
   arg-max rule over splits; predicted by the surrogate at the same (n, B_problem, M) with the
   learning rate fitted in step 6. The time plan gives this grid at least ``fb_share`` of the
   grid time.

Everything is appended to ``DIR/results.jsonl`` as it happens; finished runs found there
(same configuration and plan) are reused, so an interrupted validation resumes.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from isosim.sim.config import ModelConfig

from .base import SFTConfig, skill_errors, train_base
from .grpo import GRPOConfig, GRPOTrainer, pass_rates
from .model import GPT, GPTConfig
from .task import TaskSpec, Teacher, Problems, VOCAB_SIZE, mixed_pool

BANDS = {"easy": (0.3, 0.6), "hard": (0.0, 0.0625)}


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

    def config_id(self) -> str:
        d = asdict(self)
        d.pop("time_budget_s")
        d.pop("reserve_s")
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


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


# --- results file --------------------------------------------------------------------------

class Journal:
    """Append-only JSON lines; every record carries the configuration id."""

    def __init__(self, path: Path, config_id: str):
        self.path, self.cid = path, config_id
        self.records = []
        if path.exists():
            text = path.read_text()
            if text and not text.endswith("\n"):  # a record cut short: start the next one on a new line
                with open(path, "a") as fh:
                    fh.write("\n")
            for line in text.splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:  # a line cut by an interruption
                    continue
                if rec.get("config_id") == config_id:
                    self.records.append(rec)

    def write(self, kind: str, **fields) -> dict:
        rec = {"kind": kind, "config_id": self.cid, "time": time.time(), **fields}
        with open(self.path, "a") as fh:
            fh.write(json.dumps(rec, default=_jsonable) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.records.append(rec)
        return rec

    def last(self, kind: str, **match) -> dict | None:
        for rec in reversed(self.records):
            if rec["kind"] == kind and all(rec.get(k) == v for k, v in match.items()):
                return rec
        return None


def _jsonable(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


# --- steps of the protocol -----------------------------------------------------------------

def base_model(cfg: ValidateConfig, out: Path, journal: Journal, device: str, log) -> tuple[GPT, Teacher, dict]:
    teacher = Teacher.default(cfg.teacher_seed, cfg.teacher_mean_error, cfg.teacher_concentration)
    path = out / "base.pt"
    rec = journal.last("base")
    if path.exists() and rec is not None:
        state = torch.load(path, map_location=device, weights_only=True)
        if state.get("config_id") == journal.cid:
            model = GPT(cfg.model).to(device)
            model.load_state_dict(state["model"])
            model.eval()
            log(f"base model: reused {path}")
            return model, teacher, rec
    log(f"base model: training a {cfg.model.n_layer}-layer GPT (n_embd {cfg.model.n_embd}) on teacher traces")
    model, info = train_base(cfg.task, teacher, cfg.model, cfg.sft, device=device, seed=cfg.seed, log=log)
    err = skill_errors(model, cfg.task, device=device)
    info.update(skill_error_model=err, skill_error_teacher=teacher.error,
                skill_error_mean_abs_diff=float(np.abs(err - teacher.error).mean()))
    torch.save({"config_id": journal.cid, "model": model.state_dict()}, path)
    rec = journal.write("base", **info)
    log(f"  {info['params']:,} parameters, {info['steps']} steps in {info['seconds']:.0f} s, loss {info['final_loss']:.3f}; "
        f"per-skill error vs teacher: mean |diff| {info['skill_error_mean_abs_diff']:.3f}")
    return model, teacher, rec


def measure_pool(cfg: ValidateConfig, model: GPT, teacher: Teacher, out: Path, journal: Journal, device: str, log):
    """The pool, its measured avg@16 and the subsets: {name: (train Problems, train counts, val Problems, val counts)}."""
    path = out / "pool.npz"
    rec = journal.last("pool")
    if path.exists() and rec is not None:
        data = np.load(path)
        pool, counts = Problems.from_arrays(data), data["correct"]
        log(f"pool: reused {path}")
    else:
        rng = np.random.default_rng([cfg.seed, 0x9001])
        pool = mixed_pool(cfg.pool_size, cfg.task, teacher, rng, {(0.2, 0.75): 0.45, (0.0, 0.15): 0.45, (0.0, 1.0): 0.1})
        t0 = time.perf_counter()
        rates = pass_rates(model, cfg.task, pool, cfg.measure_samples, device=device, seed=cfg.seed + 11)
        secs = time.perf_counter() - t0
        counts = np.round(rates * cfg.measure_samples).astype(np.int64)
        np.savez(path, correct=counts, **pool.to_arrays())
        hist = np.histogram(rates, bins=16, range=(0, 1))[0].tolist()
        rec = journal.write("pool", size=len(pool), histogram=hist, mean=float(rates.mean()),
                            gen_rollouts_per_s=len(pool) * cfg.measure_samples / secs,
                            teacher_pass_rate_corr=float(np.corrcoef(rates, teacher.pass_rates(pool))[0, 1]))
        log(f"pool: {len(pool)} problems, avg@{cfg.measure_samples} measured in {secs:.1f} s; histogram {hist}")
    rates = counts / cfg.measure_samples
    rng = np.random.default_rng([cfg.seed, 0x5B5])
    subsets = {}
    for name, (lo, hi) in BANDS.items():
        idx = rng.permutation(np.flatnonzero((rates >= lo - 1e-12) & (rates <= hi + 1e-12)))
        val, train = idx[:cfg.val_size], idx[cfg.val_size:cfg.val_size + cfg.train_size]
        if len(val) < cfg.val_size or len(train) < cfg.b_problem:
            raise RuntimeError(f"the pool has only {len(idx)} {name} problems: raise pool_size")
        subsets[name] = (pool.subset(train), counts[train], pool.subset(val), counts[val])
        log(f"  {name}: {len(train)} train, {len(val)} validation problems, base avg@{cfg.measure_samples} "
            f"{rates[train].mean():.3f} / {rates[val].mean():.3f}")
    return subsets, rec


def probe_throughput(cfg: ValidateConfig, model: GPT, train: Problems, device: str, steps: int = 3) -> dict:
    """Seconds per GRPO step at the smallest and largest n (the first step is a warm-up)."""
    out = {}
    for n in (min(cfg.n_grid), max(cfg.n_grid)):
        m = copy.deepcopy(model)
        tr = GRPOTrainer(m, cfg.task, train, replace(cfg.grpo, n=n, b_problem=cfg.b_problem), device=device, seed=999)
        tr.step()
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(steps):
            tr.step()
        _sync(device)
        out[n] = (time.perf_counter() - t0) / steps
    return out


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


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


def plan_grid(cfg: ValidateConfig, step_s: dict, eval_s: float, seconds_left: float, n_subsets: int = 2) -> dict:
    """The largest C_max = budget / 2^j (>= min_budget) whose Q1 grid fits its share of
    ``seconds_left`` (1 - fb_share), step time modelled as a + b * n * B_problem from the probe;
    then fewer n if it must. The fixed-batch grid gets the rest (at least ``fb_share``): the
    largest M_max = fb_steps / 2^j (>= fb_min_steps) that fits it."""
    (n0, t0), (n1, t1) = sorted(step_s.items())
    slope = max(0.0, (t1 - t0) / max(1, (n1 - n0) * cfg.b_problem))
    icpt = max(1e-4, t0 - slope * n0 * cfg.b_problem)
    grid = list(cfg.n_grid)
    q1_left = seconds_left * (1.0 - cfg.fb_share)

    def fixed_batch(ns, left):
        big_b, splits = fb_splits(cfg, ns)

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
        fb = fixed_batch(ns, max(seconds_left - q1, seconds_left * cfg.fb_share))
        return {"budget": int(c), "n_grid": ns, "predicted_s": q1, "shrunk": shrunk, "fixed_batch": fb,
                "predicted_total_s": q1 + fb["predicted_s"]}

    def cost(c_max, ns):
        tot = 0.0
        for n in ns:
            m = c_max // (n * cfg.b_problem)
            tot += m * (icpt + slope * n * cfg.b_problem) + len(eval_steps(c_max, cfg.n_budgets, n, cfg.b_problem)) * eval_s
        return n_subsets * tot

    while True:
        c = cfg.budget
        while c >= cfg.min_budget:
            if cost(c, grid) <= q1_left:
                return result(c, grid, c < cfg.budget or grid != list(cfg.n_grid))
            c //= 2
        if len(grid) <= 3:
            return result(cfg.min_budget, grid, True)
        grid = grid[:-1]  # drop the largest n: it has the fewest steps at every budget


def run_grid(cfg: ValidateConfig, plan: dict, base: GPT, subsets: dict, journal: Journal, device: str, log) -> list[dict]:
    """One GRPO run per (subset, n) up to the plan's C_max; returns the evaluation records."""
    c_max = plan["budget"]
    for name, (train, _, val, _) in subsets.items():
        base_rec = journal.last("eval", subset=name, n=0, budget=c_max)
        if base_rec is None:
            v = pass_rates(base, cfg.task, val, cfg.eval_samples, device=device, seed=cfg.seed + 101).mean()
            journal.write("eval", subset=name, n=0, budget=c_max, step=0, compute=0, tokens=0, value=float(v), attempt=0)
        for n in plan["n_grid"]:
            if journal.last("run_done", subset=name, n=n, budget=c_max) is not None:
                log(f"  {name} n={n}: reused")
                continue
            attempt = time.time_ns()
            model = copy.deepcopy(base)
            gcfg = replace(cfg.grpo, n=n, b_problem=cfg.b_problem)
            tr = GRPOTrainer(model, cfg.task, train, gcfg, device=device, seed=cfg.seed * 1000 + n)
            marks = eval_steps(c_max, cfg.n_budgets, n, cfg.b_problem)
            rewards, t0 = [], time.perf_counter()
            for step in range(1, max(marks) + 1):
                rewards.append(tr.step()["reward"])
                if step in marks:
                    v = pass_rates(model, cfg.task, val, cfg.eval_samples, device=device,
                                   seed=cfg.seed + 101 + tr.rollouts).mean()  # same eval noise at equal C
                    journal.write("eval", subset=name, n=n, budget=c_max, step=step, compute=tr.rollouts,
                                  tokens=tr.tokens, value=float(v), train_reward=float(np.mean(rewards[-max(1, step // 4):])),
                                  attempt=attempt)
            secs = time.perf_counter() - t0
            journal.write("run_done", subset=name, n=n, budget=c_max, steps=tr.steps, rollouts=tr.rollouts,
                          tokens=tr.tokens, seconds=secs, attempt=attempt)
            last = journal.last("eval", subset=name, n=n, budget=c_max, attempt=attempt)
            log(f"  {name} n={n:<4d} M={tr.steps:<5d} C={tr.rollouts:<8d} {secs:6.1f} s  val avg@1 {last['value']:.3f}")
    done = {(r["subset"], r["n"]): r["attempt"] for r in journal.records if r["kind"] == "run_done" and r["budget"] == c_max}
    return [r for r in journal.records if r["kind"] == "eval" and r["budget"] == c_max
            and (r["n"] == 0 or done.get((r["subset"], r["n"])) == r["attempt"])]


def run_fb_grid(cfg: ValidateConfig, plan: dict, base: GPT, subsets: dict, journal: Journal, device: str,
                log) -> list[dict]:
    """The fixed-batch grid: per subset, one GRPO run per split (n, B_problem = B / n) to M_max
    steps, evaluated at M_max / 2^j; returns the evaluation records (kind ``eval_fb``)."""
    fb = plan["fixed_batch"]
    big_b, m_max = fb["B"], fb["m_max"]
    marks = set(fb_marks(m_max, cfg.fb_n_budgets))
    key = {"B": big_b, "m_max": m_max}
    for name, (train, _, val, _) in subsets.items():
        for n, bp in fb["splits"]:
            if journal.last("run_fb_done", subset=name, n=n, **key) is not None:
                log(f"  {name} n={n} B_problem={bp}: reused")
                continue
            attempt = time.time_ns()
            model = copy.deepcopy(base)
            tr = GRPOTrainer(model, cfg.task, train, replace(cfg.grpo, n=n, b_problem=bp), device=device,
                             seed=cfg.seed * 1000 + 500_000 + n)
            rewards, t0 = [], time.perf_counter()
            for step in range(1, m_max + 1):
                rewards.append(tr.step()["reward"])
                if step in marks:
                    v = pass_rates(model, cfg.task, val, cfg.eval_samples, device=device,
                                   seed=cfg.seed + 101 + tr.rollouts).mean()  # same eval noise at equal M
                    journal.write("eval_fb", grid="fixed_batch", subset=name, n=n, b_problem=bp, step=step,
                                  compute=tr.rollouts, tokens=tr.tokens, value=float(v),
                                  train_reward=float(np.mean(rewards[-max(1, step // 4):])), attempt=attempt, **key)
            secs = time.perf_counter() - t0
            journal.write("run_fb_done", grid="fixed_batch", subset=name, n=n, b_problem=bp, steps=tr.steps,
                          rollouts=tr.rollouts, tokens=tr.tokens, seconds=secs, attempt=attempt, **key)
            last = journal.last("eval_fb", subset=name, n=n, attempt=attempt, **key)
            log(f"  {name} n={n:<4d} B_problem={bp:<4d} M={tr.steps:<5d} C={tr.rollouts:<8d} {secs:6.1f} s  "
                f"val avg@1 {last['value']:.3f}")
    done = {(r["subset"], r["n"]): r["attempt"] for r in journal.records
            if r["kind"] == "run_fb_done" and r["B"] == big_b and r["m_max"] == m_max}
    return [r for r in journal.records if r["kind"] == "eval_fb" and r["B"] == big_b and r["m_max"] == m_max
            and done.get((r["subset"], r["n"])) == r["attempt"]]


def fb_curves(evals: list[dict], subset: str) -> dict[int, dict[int, float]]:
    """``curves[n][M]``: the fixed-batch run n's validation avg@1 after M steps."""
    curves: dict[int, dict[int, float]] = {}
    for r in evals:
        if r["subset"] == subset:
            curves.setdefault(int(r["n"]), {})[int(r["step"])] = float(r["value"])
    return curves


def fb_n_star(curves: dict[int, dict[int, float]], steps: list[int], big_b: int) -> list[dict]:
    """n*(M) and B_problem*(M) = B / n*: the n_star rule over splits at each M."""
    out = []
    for p in n_star(curves, steps):
        rec = {"M": p.pop("compute"), "n": p["n"], "B_problem": big_b // p["n"]}
        rec.update((k, v) for k, v in p.items() if k != "n")
        out.append(rec)
    return out


def n_star(curves: dict[int, dict[int, float]], budget_list: list[int]) -> list[dict]:
    """n*(C) per budget: arg-max over n of the best-so-far value (ties: the smaller n).

    ``curves[n][C]`` is run n's value at compute C."""
    out = []
    for c in budget_list:
        cand = [(max(v for cc, v in curves[n].items() if cc <= c), -n) for n in curves if c in curves[n]]
        if not cand:
            continue
        ranked = sorted(cand, reverse=True)  # highest value first, then the smaller n
        (v, neg_n), rest = ranked[0], ranked[1:]
        rec = {"compute": int(c), "n": -neg_n, "value": float(v)}
        if rest:
            rec.update(runner_up=-rest[0][1], runner_up_value=float(rest[0][0]))
        out.append(rec)
    return out


def measured_curves(evals: list[dict], subset: str) -> dict[int, dict[int, float]]:
    curves: dict[int, dict[int, float]] = {}
    for r in evals:
        if r["subset"] == subset and r["n"] > 0:
            curves.setdefault(int(r["n"]), {})[int(r["compute"])] = float(r["value"])
    return curves


def surrogate_rates(counts: np.ndarray, m: int, how: str) -> np.ndarray:
    return (counts + 0.5) / (m + 1.0) if how == "jeffreys" else counts / m


def _surrogate_population(cfg: ValidateConfig, train_counts, val_counts):
    from isosim.sim.population import population_from_pass_rates

    m = cfg.measure_samples
    return population_from_pass_rates(surrogate_rates(train_counts, m, cfg.pass_rate_estimate),
                                      surrogate_rates(val_counts, m, cfg.pass_rate_estimate),
                                      model=cfg.surrogate, seed=cfg.seed)


def surrogate_curves(cfg: ValidateConfig, plan: dict, train_counts, val_counts, lr: float) -> dict[int, dict[int, float]]:
    """The surrogate's validation avg@1 at the plan's budgets for every n, mean over seeds."""
    pop = _surrogate_population(cfg, train_counts, val_counts)
    return {n: _surrogate_run(cfg, pop, len(train_counts), len(val_counts), n, cfg.b_problem,
                              eval_steps(plan["budget"], cfg.n_budgets, n, cfg.b_problem), lr)
            for n in plan["n_grid"]}


def surrogate_fb_curves(cfg: ValidateConfig, plan: dict, train_counts, val_counts, lr: float) -> dict[int, dict[int, float]]:
    """The surrogate's validation avg@1 at the fixed-batch evaluation steps M for every split
    (n, B_problem = B / n), keyed by n."""
    pop = _surrogate_population(cfg, train_counts, val_counts)
    fb = plan["fixed_batch"]
    marks = {s: s for s in fb_marks(fb["m_max"], cfg.fb_n_budgets)}
    return {n: _surrogate_run(cfg, pop, len(train_counts), len(val_counts), n, bp, marks, lr) for n, bp in fb["splits"]}


def _surrogate_run(cfg: ValidateConfig, pop, n_train: int, n_val: int, n: int, b_problem: int, marks: dict,
                   lr: float) -> dict[int, float]:
    """{marks[M]: mean over seeds of the surrogate's validation avg@1 after M steps}."""
    from isosim import AlgoConfig, Allocation, EvalConfig, SimConfig, simulate
    from isosim.sim.advantages import from_trl

    sim = SimConfig(
        population=_population_cfg(n_train, n_val),
        model=cfg.surrogate,
        algo=AlgoConfig(advantage=from_trl(cfg.grpo.scale_rewards).name,  # batch std ~ a constant under Adam
                        std_eps=cfg.grpo.std_eps, optimizer="adamw", lr=lr, lr_rule="constant", warmup=0,
                        beta1=cfg.grpo.betas[0], beta2=cfg.grpo.betas[1]),
        allocation=Allocation(n=n, b_problem=b_problem, steps=max(marks)),
        eval=EvalConfig(ks=(1,), n_evals=1, at_steps=tuple(sorted(marks))),
    )
    acc: dict[int, list[float]] = {}
    for seed in range(cfg.surrogate_seeds):
        tr = simulate(sim, seed=seed, population=pop).curve("avg@1", "val")
        for step, v in zip(tr["step"], tr["value"]):
            if int(step) in marks:
                acc.setdefault(marks[int(step)], []).append(float(v))
    return {c: float(np.mean(v)) for c, v in acc.items()}


def _population_cfg(train: int, val: int):
    from isosim import PopulationConfig

    return PopulationConfig(preset="easy", train_size=train, val_size=val, measure="exact")


def calibrate(cfg: ValidateConfig, plan: dict, train_counts, val_counts, measured: dict, base_value: float) -> tuple[float, dict]:
    """The surrogate learning rate whose avg@1 gain curve at the reference n (the grid's
    middle) is closest (least squares over budgets) to the LM's measured gain curve."""
    grid = plan["n_grid"]
    n_ref = grid[len(grid) // 2]
    sub = dict(plan, n_grid=[n_ref])
    target = measured[n_ref]
    base_sim = float(np.mean(surrogate_rates(val_counts, cfg.measure_samples, cfg.pass_rate_estimate)))
    errs = {}
    for lr in cfg.surrogate_lrs:
        sim = surrogate_curves(cfg, sub, train_counts, val_counts, lr)[n_ref]
        errs[lr] = float(np.mean([((sim[c] - base_sim) - (v - base_value)) ** 2 for c, v in target.items() if c in sim]))
    lr = min(errs, key=errs.get)
    return lr, {"n_ref": n_ref, "lr": lr, "rmse": math.sqrt(errs[lr]), "errors": errs}


def agreement(measured: list[dict], predicted: list[dict], key: str = "compute") -> dict:
    """Mean |log2 n*_measured - log2 n*_predicted| over the points (budgets C, or steps M with key="M")."""
    pm = {p[key]: p["n"] for p in predicted}
    diffs = [abs(math.log2(m["n"]) - math.log2(pm[m[key]])) for m in measured if m[key] in pm]
    return {"mean_abs_log2_error": float(np.mean(diffs)) if diffs else float("nan"), "budgets": len(diffs)}


# --- the whole validation ------------------------------------------------------------------

@dataclass
class Validation:
    config: ValidateConfig
    device: str
    plan: dict
    measured: dict
    predicted: dict
    agreement: dict
    baselines: dict
    calibration: dict
    curves: dict
    base: dict
    pool: dict
    subsets: dict
    seconds: float
    out: Path = field(default=Path("."))
    fixed_batch: dict = field(default_factory=dict)  # B, splits, m_max, measured, predicted, agreement, curves

    def to_json(self) -> dict:
        strip = lambda pts: [{"compute": p["compute"], "n": p["n"]} for p in pts]  # noqa: E731
        return {
            "measured": {k: strip(v) for k, v in self.measured.items()},
            "predicted": {k: strip(v) for k, v in self.predicted.items()},
            "agreement": self.agreement,
            "device": self.device,
            "baselines": self.baselines,
            "calibration": {k: {kk: vv for kk, vv in v.items() if kk != "errors"} for k, v in self.calibration.items()},
            "plan": self.plan,
            "seconds": self.seconds,
            "fixed_batch": self._fixed_batch_json(),
        }

    def _fixed_batch_json(self) -> dict:
        fb = self.fixed_batch
        if not fb:
            return {}
        strip = lambda pts: [{"M": p["M"], "n": p["n"], "B_problem": p["B_problem"]} for p in pts]  # noqa: E731
        return {"B": fb["B"], "m_max": fb["m_max"], "splits": fb["splits"],
                "measured": {k: strip(v) for k, v in fb["measured"].items()},
                "predicted": {k: strip(v) for k, v in fb["predicted"].items()},
                "agreement": {k: {"mean_abs_log2_error": v["mean_abs_log2_error"], "steps": v["budgets"]}
                              for k, v in fb["agreement"].items()}}


def run_validate(out: str | Path = "isosim-out/lm", *, quick: bool = False, device: str = "cpu",
                 config: ValidateConfig | None = None, log: Callable[[str], None] | None = None,
                 figures: bool = True) -> Validation:
    """Run the whole validation (see the module docstring); results, figure and report in ``out``."""
    t_start = time.perf_counter()
    user_log = log or (lambda s: None)

    def log(msg: str) -> None:
        user_log(f"[{time.perf_counter() - t_start:4.0f} s] {msg}")
    cfg = config or (quick_config() if quick else full_config())
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    journal = Journal(out / "results.jsonl", cfg.config_id())
    journal.write("start", config=asdict(cfg), device=device, torch=torch.__version__)
    model, teacher, base_rec = base_model(cfg, out, journal, device, log)
    subsets, pool_rec = measure_pool(cfg, model, teacher, out, journal, device, log)

    plan = journal.last("plan")
    if plan is None:
        step_s = probe_throughput(cfg, model, subsets["easy"][0], device)
        eval_s = cfg.val_size * cfg.eval_samples / pool_rec["gen_rollouts_per_s"]
        left = cfg.time_budget_s - (time.perf_counter() - t_start) - cfg.reserve_s
        p = plan_grid(cfg, step_s, eval_s, left)
        plan = journal.write("plan", **p, step_seconds={str(k): v for k, v in step_s.items()}, eval_seconds=eval_s,
                             seconds_left=left)
        fbp = plan["fixed_batch"]
        log(f"plan: step time {', '.join(f'n={k}: {v * 1e3:.0f} ms' for k, v in step_s.items())}; "
            f"{left:.0f} s left -> C_max {plan['budget']}, n in {plan['n_grid']} (predicted {plan['predicted_s']:.0f} s"
            f"{', shrunk' if plan['shrunk'] else ''}); fixed batch B {fbp['B']}, M_max {fbp['m_max']} "
            f"(predicted {fbp['predicted_s']:.0f} s{', shrunk' if fbp['shrunk'] else ''})")
    else:
        log(f"plan: reused (C_max {plan['budget']}, n in {plan['n_grid']}; fixed batch B {plan['fixed_batch']['B']}, "
            f"M_max {plan['fixed_batch']['m_max']})")
    plan = {k: plan[k] for k in ("budget", "n_grid", "predicted_s", "shrunk", "fixed_batch", "predicted_total_s")}

    blist = budgets(plan["budget"], cfg.n_budgets, min(plan["n_grid"]) * cfg.b_problem)
    log(f"Q1 grid: B_problem {cfg.b_problem}, budgets {blist}")
    evals = run_grid(cfg, plan, model, subsets, journal, device, log)
    fbp = plan["fixed_batch"]
    mlist = fb_marks(fbp["m_max"], cfg.fb_n_budgets)
    log(f"fixed-batch grid: B = n * B_problem = {fbp['B']}, (n, B_problem) in "
        f"{[tuple(x) for x in fbp['splits']]}, M in {mlist}")
    fb_evals = run_fb_grid(cfg, plan, model, subsets, journal, device, log)

    log("surrogate: calibrating its learning rate on the reference n, predicting n*(C)")
    measured, predicted, agree, base_lines, calib, curves = {}, {}, {}, {}, {}, {}
    fixed = {"B": fbp["B"], "m_max": fbp["m_max"], "splits": fbp["splits"], "steps": mlist,
             "measured": {}, "predicted": {}, "agreement": {}, "curves": {}}
    for name, (_, tc, _, vc) in subsets.items():
        mc = measured_curves(evals, name)
        base_value = next(r["value"] for r in evals if r["subset"] == name and r["n"] == 0)
        lr, cal = calibrate(cfg, plan, tc, vc, mc, base_value)
        sc = surrogate_curves(cfg, plan, tc, vc, lr)
        measured[name] = n_star(mc, blist)
        predicted[name] = n_star(sc, blist)
        agree[name] = agreement(measured[name], predicted[name])
        grid = plan["n_grid"]
        base_lines[name] = {f"always_n={g}": agreement(measured[name], [{"compute": p["compute"], "n": g}
                                                                       for p in measured[name]])["mean_abs_log2_error"]
                            for g in (grid[0], grid[-1])}
        calib[name] = cal
        fmc, fsc = fb_curves(fb_evals, name), surrogate_fb_curves(cfg, plan, tc, vc, lr)  # the same fitted lr
        fixed["measured"][name] = fb_n_star(fmc, mlist, fbp["B"])
        fixed["predicted"][name] = fb_n_star(fsc, mlist, fbp["B"])
        fixed["agreement"][name] = agreement(fixed["measured"][name], fixed["predicted"][name], key="M")
        fixed["curves"][name] = {"measured": fmc, "surrogate": fsc}
        journal.write("prediction_fb", grid="fixed_batch", subset=name, B=fbp["B"], measured=fixed["measured"][name],
                      predicted=fixed["predicted"][name], agreement=fixed["agreement"][name],
                      surrogate_curves={str(k): v for k, v in fsc.items()})
        curves[name] = {"measured": mc, "surrogate": sc, "base_value": base_value,
                        "base_surrogate": float(np.mean(surrogate_rates(vc, cfg.measure_samples, cfg.pass_rate_estimate)))}
        journal.write("prediction", subset=name, calibration={k: v for k, v in cal.items() if k != "errors"},
                      measured=measured[name], predicted=predicted[name], agreement=agree[name],
                      surrogate_curves={str(k): v for k, v in sc.items()})
        log(f"  {name}: surrogate lr {lr:g} (fitted at n={cal['n_ref']}, rmse {cal['rmse']:.3f}); "
            f"mean |log2 n* error| {agree[name]['mean_abs_log2_error']:.2f} over {agree[name]['budgets']} budgets; "
            f"fixed batch: n*(M) measured {[p['n'] for p in fixed['measured'][name]]}, predicted "
            f"{[p['n'] for p in fixed['predicted'][name]]}, mean |log2 error| "
            f"{fixed['agreement'][name]['mean_abs_log2_error']:.2f}")
    res = Validation(cfg, device, plan, measured, predicted, agree, base_lines, calib, curves, base_rec, pool_rec,
                     {k: {"train": len(v[0]), "val": len(v[2]),
                          "train_mean": float(v[1].mean() / cfg.measure_samples),
                          "val_mean": float(v[3].mean() / cfg.measure_samples)} for k, v in subsets.items()},
                     0.0, out, fixed)
    if figures:
        from .report import write_figures

        write_figures(res, out)
    res.seconds = time.perf_counter() - t_start
    from .report import report_text

    (out / "report.md").write_text(report_text(res))
    journal.write("result", **res.to_json())
    return res
