"""``isosim calibrate RUNS --pass-rates FILE``: fit the surrogate to a user's pilot runs and
predict the compute-optimal n with an interval."""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from ..errors import IsosimInputError
from . import _logs
from ._options import _int_like, int_range, output_file, rollout_budget

DESCRIPTION = """\
Fit the knobs of the surrogate that a pass-rate histogram cannot show (the learning-rate scale,
the base policy's concentration, the skill link; with a logged training reward, the
memorisation path too, with --fit-training) to a few short runs of your own model at two or
more values of n, so that the surrogate's mean-field reward curves at the pilots' (n,
B_problem, M) match the pilots' measured curves (validation, and with --fit-training the
training reward, which is set aside when the surrogate cannot reproduce it unless
--training-mode always). The knob sets that fit within the pilots' own
noise form an ensemble, which gives every predicted compute-optimal n an interval. Writes a
model config that `isosim plan --model-config` and `isosim simulate --config` read."""


def _knob_list(text: str) -> tuple[str, ...]:
    """argparse type: comma-separated names of registered knobs, each at most once (the registry
    is imported here, when the option is given, not when the parser is built)."""
    from ..calibrate.knobs import KNOBS

    names = tuple(part.strip() for part in str(text).split(","))
    if any(n not in KNOBS for n in names):
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated knob names from {', '.join(KNOBS)}")
    if len(set(names)) < len(names):
        raise argparse.ArgumentTypeError(f"{text!r}: a knob is named twice")
    return names


def _n_list(text: str) -> tuple[int, ...]:
    """argparse type: comma-separated n values, each an integer in [1, 2048]."""
    out = []
    for part in str(text).split(","):
        try:
            n = _int_like(part)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
        if not 1 <= n <= 2048:
            raise argparse.ArgumentTypeError(f"each n must be in [1, 2048], got {part.strip()!r}")
        out.append(n)
    return tuple(sorted(set(out)))


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("calibrate", help="fit the surrogate to pilot runs of your model",
                              description=DESCRIPTION)
    p.add_argument("runs", metavar="RUNS", nargs="+",
                   help="pilot run logs in the `isosim fit` format (CSV, TSV, Parquet or an isosim sweep folder: run, "
                        "n, B_problem, compute or step, metric), or trainers' logs (TRL output directories, verl .jsonl "
                        "logs, TensorBoard event directories, W&B / MLflow CSV exports; one per run, globs)")
    p.add_argument("--pass-rates", required=True, metavar="FILE",
                   help="the base model's per-problem pass rates on the training problems: CSV/Parquet with a "
                        "pass_rate (avg, avg@k) column, or correct and samples columns")
    p.add_argument("--val-pass-rates", metavar="FILE",
                   help="pass rates of the validation problems the pilots evaluate on (default: up to 300 of the "
                        "training ones)")
    p.add_argument("--metric", default="avg@1", help="the pilots' metric column: avg@k, best@k or worst@k "
                                                      "(default: avg@1)")
    p.add_argument("--budget", type=rollout_budget, metavar="C",
                   help="the largest budget to predict n* at, in rollouts (default: 16 times the pilots' budget); "
                        "the pilots must not run past it")
    p.add_argument("--n", type=_n_list, metavar="N,N", help="the n to predict n*(C) over (default: 2,4,...,128)")
    p.add_argument("--config", metavar="FILE", help="the base config whose other settings the surrogate keeps "
                                                    "(TOML or JSON; default: the defaults)")
    p.add_argument("--out", type=output_file(".toml"), metavar="FILE.toml",
                   help="write the calibrated model config (TOML)")
    p.add_argument("--fit-training", action="store_true",
                   help="fit the pilots' training reward too (the runs' train_reward column, or what the trainer "
                        "logged), and the memorisation knob with it")
    p.add_argument("--training-mode", choices=("auto", "always"),
                   help="with --fit-training: 'auto' (the default) sets the training reward aside and fits the "
                        "validation curves alone when the best fit misses it by more than 1.5 times its noise; "
                        "'always' keeps it")
    p.add_argument("--knobs", type=_knob_list, metavar="NAME,NAME",
                   help="the knobs to fit, comma-separated names from the knob registry (default "
                        "lr,prior_scale,skill_link, and local with --fit-training; adam_eps is the per-step signal "
                        "that stalls small n); an unknown name lists them")
    p.add_argument("--workers", type=int_range(1, 64), metavar="K",
                   help="worker processes (default: 2 where the machine has two or more cores)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _logs.add_log_options(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    cpu0 = _cpu()
    from ..analysis.logs import is_log
    from ..analysis.runs import load_runs
    from ..calibrate.calibration import calibrate, model_config_toml, n_grid, pilot_b_problem, prepare
    from ..calibrate.config_file import read_model_config
    from ..sim.population import load_pass_rates

    for flag, value in (("--pass-rates", args.pass_rates), ("--val-pass-rates", args.val_pass_rates),
                        ("--config", args.config)):
        if value is not None and not str(value).strip():
            raise IsosimInputError(f"{flag} needs a file path, got {value!r}")
    if args.training_mode is not None and not args.fit_training:
        raise IsosimInputError("--training-mode applies to --fit-training: add it, or leave --training-mode out")
    base = read_model_config(args.config).config if args.config else None
    values = load_pass_rates(args.pass_rates)
    val = load_pass_rates(args.val_pass_rates) if args.val_pass_rates else None
    logs = training = None
    if is_log(args.runs):
        logs = _logs.read(args.runs, args, args.metric)
        runs = logs.evaluations()
        if args.fit_training:
            training = _training_rows(logs.training(), runs)
    else:
        runs = load_runs(args.runs[0])
        training = True if args.fit_training else None
    pilots = prepare(runs, values, args.metric, val, base, knobs=args.knobs, training=training)[0]
    budget = args.budget if args.budget is not None else 16 * pilots.budget
    prepare(runs, values, args.metric, val, base, knobs=args.knobs, budget=budget, training=training)
    n_grid(args.n, pilot_b_problem(pilots), budget)
    cal = calibrate(runs, values, args.metric, val_pass_rates=val, base=base, knobs=args.knobs, budget=budget,
                    workers=args.workers, training=training, training_mode=args.training_mode or "auto")
    budgets = cal.budgets_to(budget)
    curve = cal.predict_n_star(budgets, args.n, workers=args.workers)
    zero = _zero_signal(cal, logs, pilots) if logs is not None else None
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(model_config_toml(cal, curve, budget, args.pass_rates))
        tmp.replace(out)
    seconds, cpu = time.perf_counter() - t0, _cpu() - cpu0
    if args.json:
        info = cal.to_json(curve)
        info["budget"] = budget
        info["details"] = {**info["details"], "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2)}
        if logs is not None:
            info["runs"] = _logs.summary(logs)
            info["zero_signal"] = zero
        print(json.dumps(info, indent=2))
    else:
        text = report(cal, curve, " ".join(args.runs), args.out, seconds, cpu)
        if logs is not None:
            head, _, rest = text.partition("\n")
            text = "\n".join([head, *_logs.report_lines(logs), rest, "", *_zero_lines(zero)])
        print(text)
    return 0


def _training_rows(rows, evaluations):
    """The logs' training rewards of the runs that have validation rows."""
    t = rows[rows["train_reward"].notna() & rows["run"].isin(set(evaluations["run"]))]
    if not len(t):
        raise IsosimInputError("--fit-training: the logs hold no training reward for the runs with validation rows")
    return t


def _zero_signal(cal, logs, pilots) -> list[dict]:
    """Per pilot allocation: the logged zero-signal share (mean over the runs' training steps) beside
    the calibrated surrogate's (isosim.calibrate.zero_signal)."""
    from ..calibrate.zero_signal import surrogate_shares

    t = logs.training()
    sur = surrogate_shares(cal, pilots.groups)
    out = []
    for row in sur.itertuples(index=False):
        g = t[(t["n"] == row.n) & (t["B_problem"] == row.B_problem)]["zero_std_share"].dropna()
        out.append({"n": row.n, "B_problem": row.B_problem, "steps": row.steps,
                    "logged": float(g.mean()) if len(g) else None, "surrogate": row.surrogate,
                    "base": row.base})
    return out


def _zero_lines(zero) -> list[str]:
    lines = ["share of zero-signal groups (all n rewards equal), mean over the pilots' training steps "
             "(reported, not fitted):",
             f"  {'n':>5} {'B_problem':>9} {'steps':>6} {'logged':>8} {'surrogate':>10} {'at base':>8}"]
    for z in zero:
        logged = "-" if z["logged"] is None else f"{z['logged']:.3f}"
        lines.append(f"  {z['n']:>5} {z['B_problem']:>9} {z['steps']:>6} {logged:>8} {z['surrogate']:>10.3f} "
                     f"{z['base']:>8.3f}")
    return lines


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the worker processes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def report(cal, curve, source: str, out: str | None, seconds: float, cpu: float) -> str:
    """The human-readable summary: the fitted knobs, the ensemble and n*(C) with its interval."""
    d = cal.details
    names = list(cal.knobs)
    how = "between seeds" if d.get("noise_between_seeds") is not None else "within runs"
    lines = [
        f"isosim calibrate {source}: pilots {', '.join(f'n = {n}' for n in cal.pilot_ns)} at B_problem "
        f"{cal.b_problem}, up to {cal.pilot_budget:.3g} rollouts; {len(cal.train)} problems; metric {cal.metric}",
        "",
        "fitted (mean field, scipy.optimize.least_squares): "
        + ", ".join(f"{k} = {v:.4g}" for k, v in cal.knobs.items()),
        (f"fit RMSE {cal.fit_rmse:.3g}, within the pilots' noise sd {cal.pilot_noise_sd:.3g} ({how}); "
         f"{len(cal.ensemble)} knob sets fit within it (95% likelihood-ratio region, {d['evaluations']} evaluated):"
         if cal.within_noise else
         f"fit RMSE {cal.fit_rmse:.3g}, {cal.noise_ratio:.1f} times the pilots' noise sd {cal.pilot_noise_sd:.3g} "
         f"({how}): outside the noise; {len(cal.ensemble)} knob sets fit about as well as the best (95% "
         f"likelihood-ratio region widened to the misfit, {d['evaluations']} evaluated):"),
        "",
        "  " + "".join(f"{k:>13}" for k in names) + f"{'rmse':>10}",
    ]
    for m, r in zip(cal.ensemble, d["ensemble_rmse"]):
        lines.append("  " + "".join(f"{m[k]:>13.4g}" for k in names) + f"{r:>10.3g}")
    tr = d.get("training")
    if tr and tr["used"]:
        lines += ["", f"also fitted: the pilots' training reward in {tr['bins']} bins; the best fit misses it by "
                      f"{tr['fit_ratio']:.2f} times its noise (the start by {tr['start_ratio']:.2f})"]
    elif tr:
        lines += ["", f"set aside: the pilots' training reward in {tr['bins']} bins; the best fit with it missed it by "
                      f"{tr['fit_ratio']:.2f} times its noise (" + ", ".join(f"{k} = {v:.4g}" for k, v in
                                                                           tr["knobs"].items())
                  + "), so the fit above is to the validation curves alone"]
    lines += ["", f"compute-optimal n*(C) at B_problem = {cal.b_problem} (the best fit; low-high over the ensemble):",
              f"  {'compute':>10} {'n*':>6} {'low':>6} {'high':>6} {'agree':>6}"]
    for c, n, lo, hi, a in curve[["compute", "n", "n_low", "n_high", "agree"]].itertuples(index=False):
        lines.append(f"  {c:>10.3g} {n:>6} {lo:>6} {hi:>6} {a:>6.0%}")
    warnings = cal.warnings(curve)
    if warnings:
        lines += ["", "do not trust this calibration as it stands:"] + [f"  warning: {w}" for w in warnings]
    if out:
        lines += ["", f"wrote {out} (isosim plan --model-config {out}; isosim simulate --config {out})"]
    lines += ["", f"{seconds:.1f} s ({cpu:.1f} CPU seconds)"]
    return "\n".join(lines)
