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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np
import torch

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


def _grid_steps(cfg: ValidateConfig, plan: dict, n: int) -> int:
    """Steps of the Q1 grid's run at group size n."""
    return max(eval_steps(plan["budget"], cfg.n_budgets, n, cfg.b_problem))


def grid_rollouts(cfg: ValidateConfig, plan: dict, subsets) -> int:
    """Training rollouts of both grids (Q1 and fixed batch) over all subsets: the progress bar's total."""
    fb = plan["fixed_batch"]
    per_subset = (sum(_grid_steps(cfg, plan, n) * n * cfg.b_problem for n in plan["n_grid"])
                  + sum(fb["m_max"] * n * bp for n, bp in fb["splits"]))
    return len(subsets) * per_subset


def run_grid(cfg: ValidateConfig, plan: dict, base: GPT, subsets: dict, journal: Journal, device: str, log,
             bar=None) -> list[dict]:
    """One GRPO run per (subset, n) up to the plan's C_max; returns the evaluation records.
    ``bar`` (a tqdm bar, optional) advances by the rollouts of each step."""
    c_max = plan["budget"]
    for name, (train, _, val, _) in subsets.items():
        base_rec = journal.last("eval", subset=name, n=0, budget=c_max)
        if base_rec is None:
            v = pass_rates(base, cfg.task, val, cfg.eval_samples, device=device, seed=cfg.seed + 101).mean()
            journal.write("eval", subset=name, n=0, budget=c_max, step=0, compute=0, tokens=0, value=float(v), attempt=0)
        for n in plan["n_grid"]:
            if journal.last("run_done", subset=name, n=n, budget=c_max) is not None:
                log(f"  {name} n={n}: reused")
                if bar is not None:
                    bar.update(_grid_steps(cfg, plan, n) * n * cfg.b_problem)
                continue
            attempt = time.time_ns()
            model = copy.deepcopy(base)
            gcfg = replace(cfg.grpo, n=n, b_problem=cfg.b_problem)
            tr = GRPOTrainer(model, cfg.task, train, gcfg, device=device, seed=cfg.seed * 1000 + n)
            marks = eval_steps(c_max, cfg.n_budgets, n, cfg.b_problem)
            rewards, t0 = [], time.perf_counter()
            for step in range(1, max(marks) + 1):
                rewards.append(tr.step()["reward"])
                if bar is not None:
                    bar.update(n * cfg.b_problem)
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
            tr = GRPOTrainer(model, cfg.task, train, replace(cfg.grpo, n=n, b_problem=bp), device=device,
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
                 figures: bool = True, progress: bool | None = None) -> Validation:
    """Run the whole validation (see the module docstring); results, figure and report in ``out``.

    ``log`` receives one line per event; ``progress`` shows a tqdm bar of the grids' training
    rollouts on stderr (``None``: when stderr is a terminal or in a notebook), with the log
    lines printed above it."""
    t_start = time.perf_counter()
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
    fbp = plan["fixed_batch"]
    mlist = fb_marks(fbp["m_max"], cfg.fb_n_budgets)
    with progress_bar(grid_rollouts(cfg, plan, subsets), "lm validate: GRPO", progress, unit="rollout",
                      unit_scale=True) as bar:
        live["bar"] = bar
        evals = run_grid(cfg, plan, model, subsets, journal, device, log, bar)
        log(f"fixed-batch grid: B = n * B_problem = {fbp['B']}, (n, B_problem) in "
            f"{[tuple(x) for x in fbp['splits']]}, M in {mlist}")
        fb_evals = run_fb_grid(cfg, plan, model, subsets, journal, device, log, bar)
    live["bar"] = None

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
