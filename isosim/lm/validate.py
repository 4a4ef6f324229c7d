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
   (the frontier's definition applied per n; the raw arg-max of :mod:`isosim.analysis.n_star`,
   ties to the smaller n).
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

This module runs the steps (:func:`run_validate`); the configuration and grids are
:mod:`isosim.lm.protocol`, the results file :mod:`isosim.lm.journal`, the surrogate and the
comparison (steps 5 to 7) :mod:`isosim.lm.compare`.
"""
from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ..errors import IsosimInputError
from ..experiments.progress import progress_bar, write_above
from .base import skill_errors, train_base
from .compare import (
    agreement,
    calibrate,
    fb_curves,
    fb_n_star,
    measured_curves,
    n_star,
    surrogate_curves,
    surrogate_fb_curves,
    surrogate_rates,
)
from .grpo import GRPOTrainer, pass_rates
from .heldout import (
    SubsetRuns,
    alternatives,
    held_out_budgets,
    measured_with_interval,
    n_star_shift,
    pilot_ns,
    score_held_out,
)
from .journal import Journal
from .model import GPT
from .protocol import BANDS, ValidateConfig, budgets, eval_steps, fb_marks, full_config, plan_grid, quick_config
from .task import Problems, Teacher, mixed_pool

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
        pool = mixed_pool(cfg.pool_size, cfg.task, teacher, rng, {(lo, hi): w for lo, hi, w in cfg.pool_bands})
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
    for name in cfg.subsets:
        lo, hi = BANDS[name]
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
        tr = GRPOTrainer(m, cfg.task, train, cfg.run_grpo(n, cfg.b_problem), device=device, seed=999)
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


def _grid_steps(cfg: ValidateConfig, plan: dict, n: int) -> int:
    """Steps of the Q1 grid's run at group size n."""
    return max(eval_steps(plan["budget"], cfg.n_budgets, n, cfg.b_problem))


def grid_rollouts(cfg: ValidateConfig, plan: dict, subsets) -> int:
    """Training rollouts of both grids (Q1 and fixed batch) over all subsets: the progress bar's total."""
    fb = plan["fixed_batch"]
    per_subset = (cfg.seeds * sum(_grid_steps(cfg, plan, n) * n * cfg.b_problem for n in plan["n_grid"])
                  + (sum(fb["m_max"] * n * bp for n, bp in fb["splits"]) if cfg.fixed_batch else 0))
    return len(subsets) * per_subset


def _run_seed(cfg: ValidateConfig, n: int, seed: int) -> int:
    """The training seed of the Q1 run (n, seed index); seed index 0 keeps the single-seed value."""
    return cfg.seed * 1000 + n + 100_000 * seed


def train_q1_run(cfg: ValidateConfig, base_state: dict, train: Problems, val: Problems, subset: str, n: int,
                 seed: int, c_max: int, device: str = "cpu", threads: int = 0, on_step=None,
                 checkpoint: str | Path | None = None) -> list[dict]:
    """One Q1 run: GRPO at group size n from the base model to C_max rollouts, validation avg@1
    (and each problem's count of right answers among ``eval_samples``) at the budgets
    C_max / 2^j. Returns the records to journal: one ``eval`` per evaluation, then ``run_done``.
    The evaluation seed depends on the budget only, so every run meets the same sampling noise
    at equal C. Runs in a worker process when ``threads`` > 0 (torch threads of that process).

    Each ``eval`` record carries ``train_reward`` (the mean training reward over the last quarter
    of the steps so far) and ``train_reward_since`` (over the steps since the previous
    evaluation); ``run_done`` carries ``train_curve``, the training reward averaged over blocks of
    ``train_curve_block`` steps.

    ``checkpoint`` (a file path, optional): when the file holds this run (same configuration id,
    subset, n and seed) stopped at a step no later than this run's last, the run continues from
    it (model, AdamW state, the trainer's random states, problem order, counters and reward
    history) and its evaluations up to that step are taken from the file; the numbers are the
    same as those of a run trained straight through. When the run ends, its state is saved there
    (unless the file already holds a longer run)."""
    if threads > 0:
        torch.set_num_threads(threads)
    model = GPT(cfg.model).to(device)
    model.load_state_dict(base_state)
    attempt = time.time_ns()
    tr = GRPOTrainer(model, cfg.task, train, cfg.run_grpo(n, cfg.b_problem), device=device,
                     seed=_run_seed(cfg, n, seed))
    marks = eval_steps(c_max, cfg.n_budgets, n, cfg.b_problem)
    key = {"subset": subset, "n": n, "budget": c_max, "seed": seed}
    ident = {"config_id": cfg.config_id(), "subset": subset, "n": n, "seed": seed}
    recs, rewards, t0, c0 = [], [], time.perf_counter(), time.process_time()
    start, stored = 0, None
    path = Path(checkpoint) if checkpoint is not None else None
    if path is not None and path.exists():
        stored = torch.load(path, map_location=device, weights_only=False)
        by_step = {r["step"]: r for r in stored["evals"]}
        if stored["ident"] == ident and stored["steps"] <= max(marks) \
                and all(m in by_step for m in marks if m <= stored["steps"]):
            model.load_state_dict(stored["model"])
            tr.opt.load_state_dict(stored["optimizer"])
            tr.rng.bit_generator.state = stored["numpy_rng"]
            tr.gen.set_state(stored["torch_generator"].cpu())
            tr.order = np.asarray(stored["order"], dtype=np.int64)
            tr.steps, tr.rollouts, tr.tokens = stored["steps"], stored["rollouts"], stored["tokens"]
            rewards = [float(x) for x in stored["rewards"]]
            start = tr.steps
            recs = [{**by_step[m], **key, "attempt": attempt, "resumed": True} for m in sorted(marks) if m <= start]
    prev = max([m for m in marks if m <= start], default=0)
    for step in range(start + 1, max(marks) + 1):
        rewards.append(tr.step()["reward"])
        if on_step is not None:
            on_step(n * cfg.b_problem)
        if step in marks:
            rates = pass_rates(model, cfg.task, val, cfg.eval_samples, device=device, seed=cfg.seed + 101 + tr.rollouts)
            recs.append({"kind": "eval", **key, "step": step, "compute": tr.rollouts, "tokens": tr.tokens,
                         "value": float(rates.mean()), "train_reward": float(np.mean(rewards[-max(1, step // 4):])),
                         "train_reward_since": float(np.mean(rewards[prev:step])),
                         "counts": np.round(rates * cfg.eval_samples).astype(int).tolist(), "attempt": attempt})
            prev = step
    block = max(1, tr.steps // 128)
    curve = [float(np.mean(rewards[i:i + block])) for i in range(0, len(rewards) - block + 1, block)]
    done = {"kind": "run_done", **key, "steps": tr.steps, "rollouts": tr.rollouts, "tokens": tr.tokens,
            "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0, "attempt": attempt,
            "resumed_from_step": start, "train_curve_block": block, "train_curve": curve}
    if path is not None and (stored is None or stored["steps"] <= tr.steps):
        state = {"ident": ident, "model": model.state_dict(), "optimizer": tr.opt.state_dict(),
                 "numpy_rng": tr.rng.bit_generator.state, "torch_generator": tr.gen.get_state(),
                 "order": tr.order.copy(), "steps": tr.steps, "rollouts": tr.rollouts, "tokens": tr.tokens,
                 "rewards": np.asarray(rewards, dtype=np.float64),
                 "evals": [{k: v for k, v in r.items() if k not in ("attempt", "resumed", "budget")} for r in recs]}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save(state, tmp)
        tmp.replace(path)
    return recs + [done]


def checkpoint_path(out: Path, cfg: ValidateConfig, subset: str, n: int, seed: int) -> Path | None:
    """Where the Q1 run (subset, n, seed) is checkpointed (``None`` without ``cfg.checkpoints``)."""
    return Path(out) / "checkpoints" / f"{subset}-n{n}-seed{seed}.pt" if cfg.checkpoints else None


def _train_q1_job(args):  # a module-level function, so that a spawned worker can run it
    return train_q1_run(*args)


def in_workers(fn, jobs: list, workers: int, on_result) -> None:
    """``fn(job)`` for every job in ``workers`` spawned processes, ``on_result(result)`` as each
    ends. When anything stops the loop (an error, Ctrl-C, or SIGTERM, which ``isosim lm
    validate`` turns into an exit), the workers are terminated at once instead of being left to
    finish a run that nobody will read; the journal keeps every run that ended, so a rerun resumes."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    before = set(mp.active_children())
    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"))
    try:
        for fut in as_completed([pool.submit(fn, job) for job in jobs]):
            on_result(fut.result())
    except BaseException:
        manager = getattr(pool, "_executor_manager_thread", None)
        pool.shutdown(wait=False, cancel_futures=True)
        _stop(set(mp.active_children()) - before)
        # the pool's manager thread replaces a worker that exits cleanly on the shutdown signal, even
        # while the pool shuts down: once it has ended, stop any worker it started meanwhile
        if manager is not None:
            manager.join(20)
        _stop(set(mp.active_children()) - before)
        raise
    pool.shutdown()


def _stop(procs) -> None:
    """Terminate ``procs`` (SIGTERM, then SIGKILL for one not gone within 10 s) and reap them."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.join(10)
        if proc.is_alive():  # SIGKILL cannot be refused
            proc.kill()
            proc.join(10)


def run_grid(cfg: ValidateConfig, plan: dict, base: GPT, subsets: dict, journal: Journal, device: str, log,
             bar=None, workers: int = 1) -> list[dict]:
    """One GRPO run per (subset, n, seed) up to the plan's C_max; returns the evaluation records
    of the finished runs. ``bar`` (a tqdm bar, optional) advances by the rollouts trained. With
    ``workers`` > 1 the runs go to that many spawned processes (one torch thread each) and the
    records are journalled as each run ends; the runs are independent, so the results are the
    same as in one process."""
    c_max = plan["budget"]
    for name, (train, _, val, _) in subsets.items():
        if journal.last("eval", subset=name, n=0, budget=c_max) is None:
            rates = pass_rates(base, cfg.task, val, cfg.eval_samples, device=device, seed=cfg.seed + 101)
            journal.write("eval", subset=name, n=0, budget=c_max, step=0, compute=0, tokens=0, value=float(rates.mean()),
                          counts=np.round(rates * cfg.eval_samples).astype(int).tolist(), attempt=0)
    todo = []
    for name in subsets:
        for n in plan["n_grid"]:
            for seed in cfg.seed_indices():
                if _done(journal, "run_done", subset=name, n=n, budget=c_max, seed=seed) is not None:
                    log(f"  {name} n={n} seed {seed}: reused")
                    if bar is not None:
                        bar.update(_grid_steps(cfg, plan, n) * n * cfg.b_problem)
                else:
                    todo.append((name, n, seed))

    def finish(recs):
        for r in recs:
            journal.write(**r)
        done = recs[-1]
        if bar is not None and workers > 1:
            bar.update(done["rollouts"])
        resumed = f", continued from step {done['resumed_from_step']}" if done.get("resumed_from_step") else ""
        log(f"  {done['subset']} n={done['n']:<4d} seed {done['seed']} M={done['steps']:<6d} C={done['rollouts']:<8d} "
            f"{done['seconds']:6.1f} s (cpu {done['cpu_seconds']:.0f} s{resumed})  val avg@1 {recs[-2]['value']:.3f}  "
            f"train reward {recs[-2]['train_reward']:.3f}")

    if todo:
        state = {k: v.detach().cpu() for k, v in base.state_dict().items()}
        jobs = [(cfg, state, subsets[name][0], subsets[name][2], name, n, seed, c_max, device)
                for name, n, seed in sorted(todo, key=lambda j: j[1])]  # small n first: the longest runs
        ckpts = [checkpoint_path(journal.path.parent, cfg, job[4], job[5], job[6]) for job in jobs]
        if workers > 1 and device == "cpu":
            in_workers(_train_q1_job, [job + (1, None, ck) for job, ck in zip(jobs, ckpts)], workers, finish)
        else:
            step = bar.update if bar is not None else None
            for job, ck in zip(jobs, ckpts):
                finish(train_q1_run(*job, 0, step, ck))
    done = {(r["subset"], r["n"], r.get("seed", 0)): r["attempt"] for r in journal.records
            if r["kind"] == "run_done" and r["budget"] == c_max and r.get("seed", 0) in cfg.seed_indices()}
    return [r for r in journal.records if r["kind"] == "eval" and r["budget"] == c_max
            and (r["n"] == 0 or done.get((r["subset"], r["n"], r.get("seed", 0))) == r["attempt"])]


def _run_done(journal: Journal, c_max: int, evals: list[dict]) -> list[dict]:
    """The ``run_done`` records of the Q1 runs whose evaluations ``evals`` holds (same attempt)."""
    attempts = {(r["subset"], r["n"], r.get("seed", 0)): r["attempt"] for r in evals if r["n"] > 0 and "attempt" in r}
    return [r for r in journal.records if r["kind"] == "run_done" and r["budget"] == c_max
            and attempts.get((r["subset"], r["n"], r.get("seed", 0))) == r["attempt"]]


def _done(journal: Journal, kind: str, **match) -> dict | None:
    """The last record of ``kind`` matching ``match``; a record without a ``seed`` is seed 0 (files
    written before seeds were stored)."""
    seed = match.pop("seed", None)
    for rec in reversed(journal.records):
        if rec["kind"] == kind and all(rec.get(k) == v for k, v in match.items()) \
                and (seed is None or rec.get("seed", 0) == seed):
            return rec
    return None


def run_fb_grid(cfg: ValidateConfig, plan: dict, base: GPT, subsets: dict, journal: Journal, device: str,
                log, bar=None) -> list[dict]:
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
                if bar is not None:
                    bar.update(m_max * n * bp)
                continue
            attempt = time.time_ns()
            model = copy.deepcopy(base)
            tr = GRPOTrainer(model, cfg.task, train, cfg.run_grpo(n, bp), device=device,
                             seed=cfg.seed * 1000 + 500_000 + n)
            rewards, t0 = [], time.perf_counter()
            for step in range(1, m_max + 1):
                rewards.append(tr.step()["reward"])
                if bar is not None:
                    bar.update(n * bp)
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
    held_out: dict = field(default_factory=dict)  # the "calibrated" entry: protocol, alternatives (see heldout.py)
    cpu_seconds: float = 0.0  # of this process and its workers, this invocation
    shift: dict = field(default_factory=dict)  # per subset: how far n*(C) moves, first to last budget (heldout.n_star_shift)
    runs: dict = field(default_factory=dict)  # per subset: every Q1 run's validation and training-reward curves


    def to_json(self) -> dict:
        def strip(pts):
            return [{k: p[k] for k in ("compute", "n", "n_low", "n_high") if k in p} for p in pts]
        js = {
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
        if self.config.seeds > 1 or self.held_out:
            js["best_validation"] = {k: max(v for c in cur["measured"].values() for v in c.values())
                                     for k, cur in self.curves.items()}
            js["seeds"] = self.config.seeds
            js["scale"] = self.config.name
        if self.shift:
            js["n_star_shift"] = self.shift
        if self.runs:
            js["runs"] = self.runs
        if self.held_out:
            js["calibrated"] = self.held_out
        return js

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


def run_table(evals: list[dict], subset: str, samples: int) -> list[dict]:
    """Every Q1 run of ``subset`` (n, seed) with its curves at the evaluated budgets: ``compute``,
    validation avg@1 ``value``, the right answers ``correct`` summed over the validation problems
    (out of ``val_problems * samples``), and the training reward over the last quarter of the
    steps (``train_reward``) and since the previous evaluation (``train_reward_since``; null in
    results written before it was stored). The base model's evaluation is the entry with n = 0."""
    rows: dict = {}
    for r in sorted((r for r in evals if r["subset"] == subset), key=lambda r: r["compute"]):
        row = rows.setdefault((int(r["n"]), int(r.get("seed", 0))), {
            "n": int(r["n"]), "seed": int(r.get("seed", 0)), "val_problems": len(r.get("counts", [])),
            "samples": samples, "compute": [], "value": [], "correct": [], "train_reward": [],
            "train_reward_since": []})
        row["compute"].append(int(r["compute"]))
        row["value"].append(float(r["value"]))
        row["correct"].append(int(sum(r.get("counts", []))))
        row["train_reward"].append(r.get("train_reward"))
        row["train_reward_since"].append(r.get("train_reward_since"))
    return [rows[k] for k in sorted(rows)]


CALIBRATED_PENDING = ("pending: no calibrated predictor was scored; rerun with --calibrate (or pass "
                      "calibrated=isosim.lm.heldout.calibrated_surrogate(config) to run_validate)")


def _cpu_seconds() -> float:
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _all_done(cfg: ValidateConfig, plan: dict, journal: Journal, names) -> bool:
    """Every run of both grids is in the journal (nothing to train)."""
    c_max, fb = plan["budget"], plan["fixed_batch"]
    q1 = all(_done(journal, "run_done", subset=s, n=n, budget=c_max, seed=k) is not None
             for s in names for n in plan["n_grid"] for k in cfg.seed_indices())
    fbd = all(journal.last("run_fb_done", subset=s, n=n, B=fb["B"], m_max=fb["m_max"]) is not None
              for s in names for n, _ in fb["splits"]) if cfg.fixed_batch else True
    return q1 and fbd


def run_validate(out: str | Path = "isosim-out/lm", *, quick: bool = False, device: str = "cpu",
                 config: ValidateConfig | None = None, log: Callable[[str], None] | None = None,
                 figures: bool = True, progress: bool | None = None, workers: int = 1,
                 calibrated=None) -> Validation:
    """Run the whole validation (see the module docstring); results, figure and report in ``out``.

    ``log`` receives one line per event; ``progress`` shows a tqdm bar of the grids' training
    rollouts on stderr (``None``: when stderr is a terminal or in a notebook), with the log
    lines printed above it. ``workers`` > 1 trains the Q1 runs in that many processes. When the
    results file already holds every run (a rerun on the same ``out``), nothing is trained and
    neither the base model nor the pool file is needed: the comparison, the held-out scores, the
    report and the figures are recomputed from the stored records. ``calibrated`` (optional) is a
    predictor (see :mod:`isosim.lm.heldout`) scored as the ``calibrated`` entry's easy and hard."""
    t_start, cpu_start = time.perf_counter(), _cpu_seconds()
    user_log = log or (lambda s: None)
    live = {"bar": None}  # the progress bar while the grids run: log lines print above it

    def log(msg: str) -> None:
        with write_above(live["bar"]):
            user_log(f"[{time.perf_counter() - t_start:4.0f} s] {msg}")
    cfg = config or (quick_config() if quick else full_config())
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    journal = Journal(out / "results.jsonl", cfg.config_id())
    journal.write("start", config=asdict(cfg), device=device, torch=torch.__version__, workers=workers)
    # with checkpoints one results file holds the plans of several C_max (--max-budget): take this one's
    plan = journal.last("plan", requested=cfg.budget) if cfg.checkpoints else journal.last("plan")
    stored = journal.last("subsets")
    if plan is not None and stored is not None and journal.last("base") is not None \
            and (not cfg.checkpoints or plan.get("requested") == cfg.budget) \
            and _all_done(cfg, plan, journal, cfg.subsets):
        log("every run is stored in results.jsonl: recomputing the comparison from it (no training)")
        model, base_rec, pool_rec = None, journal.last("base"), journal.last("pool")
        subsets = {k: (None, np.asarray(v["train_counts"]), None, np.asarray(v["val_counts"]))
                   for k, v in stored["subsets"].items()}
    else:
        model, teacher, base_rec = base_model(cfg, out, journal, device, log)
        subsets, pool_rec = measure_pool(cfg, model, teacher, out, journal, device, log)
        if stored is None:
            journal.write("subsets", subsets={k: {"train_counts": v[1], "val_counts": v[3]} for k, v in subsets.items()})

    if plan is not None and cfg.checkpoints and plan.get("requested") != cfg.budget:
        plan = None  # another C_max (--max-budget): plan again; the checkpoints carry the runs on
    if plan is None:
        step_s = probe_throughput(cfg, model, next(iter(subsets.values()))[0], device)
        eval_s = cfg.val_size * cfg.eval_samples / pool_rec["gen_rollouts_per_s"]
        left = cfg.time_budget_s - (time.perf_counter() - t_start) - cfg.reserve_s
        p = plan_grid(cfg, step_s, eval_s, left, n_subsets=len(subsets), workers=workers)
        plan = journal.write("plan", **p, requested=cfg.budget, step_seconds={str(k): v for k, v in step_s.items()}, eval_seconds=eval_s,
                             seconds_left=left, workers=workers)
        fbp = plan["fixed_batch"]
        fb_text = (f"; fixed batch B {fbp['B']}, M_max {fbp['m_max']} (predicted {fbp['predicted_s']:.0f} s"
                   f"{', shrunk' if fbp['shrunk'] else ''})") if cfg.fixed_batch else "; no fixed-batch grid"
        log(f"plan: step time {', '.join(f'n={k}: {v * 1e3:.0f} ms' for k, v in step_s.items())}; "
            f"{left:.0f} s left -> C_max {plan['budget']}, n in {plan['n_grid']}, {cfg.seeds} seed(s), "
            f"{workers} worker(s) (predicted {plan['predicted_s']:.0f} s{', shrunk' if plan['shrunk'] else ''}){fb_text}")
    else:
        log(f"plan: reused (C_max {plan['budget']}, n in {plan['n_grid']}"
            + (f"; fixed batch B {plan['fixed_batch']['B']}, M_max {plan['fixed_batch']['m_max']})" if cfg.fixed_batch
               else ")"))
    plan = {k: plan[k] for k in ("budget", "n_grid", "predicted_s", "shrunk", "fixed_batch", "predicted_total_s")}

    blist = budgets(plan["budget"], cfg.n_budgets, min(plan["n_grid"]) * cfg.b_problem)
    log(f"Q1 grid: B_problem {cfg.b_problem}, budgets {blist}")
    fbp = plan["fixed_batch"]
    mlist = fb_marks(fbp["m_max"], cfg.fb_n_budgets) if cfg.fixed_batch else []
    with progress_bar(grid_rollouts(cfg, plan, subsets), "lm validate: GRPO", progress, unit="rollout",
                      unit_scale=True) as bar:
        live["bar"] = bar
        evals = run_grid(cfg, plan, model, subsets, journal, device, log, bar, workers=workers)
        if cfg.fixed_batch:
            log(f"fixed-batch grid: B = n * B_problem = {fbp['B']}, (n, B_problem) in "
                f"{[tuple(x) for x in fbp['splits']]}, M in {mlist}")
            fb_evals = run_fb_grid(cfg, plan, model, subsets, journal, device, log, bar)
    live["bar"] = None

    log("surrogate: calibrating its learning rate on the reference n, predicting n*(C)")
    measured, predicted, agree, base_lines, calib, curves, runs, shifts = {}, {}, {}, {}, {}, {}, {}, {}
    fixed = {"B": fbp["B"], "m_max": fbp["m_max"], "splits": fbp["splits"], "steps": mlist,
             "measured": {}, "predicted": {}, "agreement": {}, "curves": {}}
    for name, (_, tc, _, vc) in subsets.items():
        mc = measured_curves(evals, name)
        base_value = next(r["value"] for r in evals if r["subset"] == name and r["n"] == 0)
        lr, cal = calibrate(cfg, plan, tc, vc, mc, base_value)
        sc = surrogate_curves(cfg, plan, tc, vc, lr)
        if all("counts" in r for r in evals if r["subset"] == name):
            runs[name] = SubsetRuns.from_evals(evals, name, plan["n_grid"], blist, cfg.eval_samples,
                                               done=_run_done(journal, plan["budget"], evals))
            measured[name] = measured_with_interval(runs[name], cfg.bootstrap, cfg.interval, cfg.seed)
            if cfg.bootstrap > 0 and len(measured[name]) > 1:
                start = cfg.shift_start if cfg.shift_start in blist[:-1] else None  # not evaluated: from the first
                shifts[name] = n_star_shift(runs[name], cfg.bootstrap, cfg.interval, cfg.seed, start=start)
        else:  # results written before per-problem counts were stored: no interval
            measured[name] = n_star(mc, blist)
        predicted[name] = n_star(sc, blist)
        agree[name] = agreement(measured[name], predicted[name])
        grid = plan["n_grid"]
        base_lines[name] = {f"always_n={g}": agreement(measured[name], [{"compute": p["compute"], "n": g}
                                                                       for p in measured[name]])["mean_abs_log2_error"]
                            for g in (grid[0], grid[-1])}
        calib[name] = cal
        if cfg.fixed_batch:
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
        fb_text = (f"; fixed batch: n*(M) measured {[p['n'] for p in fixed['measured'][name]]}, predicted "
                   f"{[p['n'] for p in fixed['predicted'][name]]}, mean |log2 error| "
                   f"{fixed['agreement'][name]['mean_abs_log2_error']:.2f}") if cfg.fixed_batch else ""
        log(f"  {name}: surrogate lr {lr:g} (fitted at n={cal['n_ref']}, rmse {cal['rmse']:.3f}); "
            f"mean |log2 n* error| {agree[name]['mean_abs_log2_error']:.2f} over {agree[name]['budgets']} budgets"
            + fb_text)
    held = {}
    c_max = plan["budget"]
    if len(runs) == len(subsets) and held_out_budgets(blist, c_max) and any(c <= c_max // 16 for c in blist):
        log("held-out score: pilots at the smallest and middle n cut at C_max / 16, predictions at C_max / 8 .. C_max")
        preds = alternatives(cfg)
        counts = {k: (v[1], v[3]) for k, v in subsets.items()}
        alt = score_held_out(runs, measured, preds, c_max=c_max, b_problem=cfg.b_problem, counts=counts,
                             measure_samples=cfg.measure_samples)
        held = {"easy": None, "hard": None, "status": CALIBRATED_PENDING,
                "protocol": {"pilot_n": pilot_ns(plan["n_grid"], "two"), "pilot_cut": c_max // 16,
                             "budgets": held_out_budgets(blist, c_max), "interval": cfg.interval},
                "alternatives": alt}
        if calibrated is not None:
            try:
                got = score_held_out(runs, measured, {"calibrated": calibrated}, c_max=c_max, b_problem=cfg.b_problem,
                                     counts=counts, measure_samples=cfg.measure_samples)["calibrated"]
            except IsosimInputError as e:  # the pilots cannot be calibrated on: say so, keep the rest of the result
                held["status"] = f"not scored: the calibration on the pilots failed: {e}"
                log(f"  calibrated surrogate: {held['status']}")
            else:
                held.update({k: got[k] for k in subsets}, status="scored", pilot_rollouts=got["pilot_rollouts"],
                            predicted=got["predicted"], details=got.get("details", {}))
        journal.write("held_out", **held)
        for name, a in alt.items():
            log(f"  {name:<18s} " + "; ".join(f"{k}: mean |log2 error| {a[k]['mean_abs_log2_error']:.2f}, within one "
                                              f"doubling {a[k]['share_within_one_doubling']:.0%}" if a[k]["budgets"]
                                              else f"{k}: no prediction" for k in subsets)
                + f" (pilots {a['pilot_rollouts']:,} rollouts)")
    run_curves = {name: run_table(evals, name, cfg.eval_samples) for name in subsets}
    res = Validation(cfg, device, plan, measured, predicted, agree, base_lines, calib, curves, base_rec, pool_rec,
                     {k: {"train": len(v[1]), "val": len(v[3]),
                          "train_mean": float(np.mean(v[1]) / cfg.measure_samples),
                          "val_mean": float(np.mean(v[3]) / cfg.measure_samples)} for k, v in subsets.items()},
                     0.0, out, fixed if cfg.fixed_batch else {}, held, shift=shifts, runs=run_curves)
    if figures:
        from .report import write_figures

        write_figures(res, out)
    res.seconds = time.perf_counter() - t_start
    res.cpu_seconds = _cpu_seconds() - cpu_start
    from .report import report_text

    (out / "report.md").write_text(report_text(res))
    journal.write("result", **res.to_json(), cpu_seconds=res.cpu_seconds)
    return res
