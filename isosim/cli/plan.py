"""``isosim plan``: recommend n, B_problem and M for a pass-rate histogram, a budget and a batch cap."""
from __future__ import annotations

import argparse
import json
import math

import numpy as np

from ..errors import IsosimInputError
from ..sim.config import ModelConfig
from ..sim.models import MODELS
from ._options import int_range, positive_int, rollout_budget

DESCRIPTION = """\
Recommend the rollout allocation (n rollouts per problem, B_problem problems per batch, M steps,
n * B_problem <= B_max, n * B_problem * M <= C) for a base model's per-problem pass rates, from
the mean-field dynamics of a surrogate trained by GRPO (seconds, no simulation). --verify checks
the three best allocations with a small simulated sweep. --model-config plans with a model
calibrated to pilot runs (`isosim calibrate`), and takes the confidence from its ensemble;
--no-ensemble plans with its best fit alone, as fast as a plan with the defaults."""


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("plan", help="recommend n, B_problem and M for a budget", description=DESCRIPTION)
    p.add_argument("--pass-rates", required=True, metavar="FILE",
                   help="per-problem pass rates: CSV/Parquet with a pass_rate (avg, avg@k) column, "
                        "or correct and samples columns")
    p.add_argument("--budget", required=True, type=rollout_budget, metavar="C",
                   help="sampling budget in rollouts (2 to below 2**63)")
    p.add_argument("--b-max", required=True, type=int_range(2), metavar="B", help="largest rollout batch n * B_problem")
    p.add_argument("--metric", default="avg@4", help="validation metric to maximise: avg@k, best@k, worst@k "
                                                     "(default: avg@4)")
    p.add_argument("--model", choices=list(MODELS), help="surrogate model (default: strategies)")
    p.add_argument("--model-config", metavar="FILE",
                   help="plan with a calibrated model (the TOML `isosim calibrate --out` writes, or any config "
                        "file): its model and algo sections, and its ensemble for the confidence")
    p.add_argument("--no-ensemble", action="store_true",
                   help="with --model-config: plan with its best fit alone, without integrating every n once per "
                        "ensemble member (a plan with the defaults' speed; its confidence then comes from the "
                        "ranking error measured on the default knobs, as without a model config)")
    p.add_argument("--representatives", type=int_range(2), default=None, metavar="K",
                   help="training rows of the mean field, pass-rate quantile representatives of your problems "
                        "(default: 256). More follow the simulator on all problems more closely on a large "
                        "histogram, at a cost about in proportion")
    p.add_argument("--verify", action="store_true", help="simulate the three best allocations (2 seeds each)")
    p.add_argument("--seeds", type=positive_int, default=2, help="seeds per allocation with --verify (default: 2)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run, exit_at_once=True)  # it writes stdout only and joins its workers
    return p


def run(args: argparse.Namespace) -> int:
    from ..plan.planner import MAX_TRAIN, plan
    from ..sim.population import load_pass_rates

    if args.seeds < 1:
        raise IsosimInputError(f"--seeds must be >= 1, got {args.seeds}")
    if args.no_ensemble and args.model_config is None:
        raise IsosimInputError("--no-ensemble needs --model-config (only a calibrated model config has an ensemble)")
    model, algo, ensemble = ModelConfig(kind=args.model or "strategies"), None, None
    if args.model_config is not None:
        from ..calibrate.config_file import read_model_config

        if args.model is not None:
            raise IsosimInputError("give --model or --model-config, not both (the model config names its model)")
        mc = read_model_config(args.model_config)
        model, algo = mc.config.model, mc.config.algo
        ensemble = None if args.no_ensemble else mc.members()[1:]
    values = load_pass_rates(args.pass_rates)
    result = plan(values, args.budget, args.b_max, args.metric, model, algo, verify=args.verify, seeds=args.seeds,
                  ensemble=ensemble, representatives=args.representatives or MAX_TRAIN)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(report(result, args.pass_rates))
    return 0


def report(p, source: str = "") -> str:
    """The human-readable plan: the recommendation, the runner-ups, n*(C), the reasoning."""
    b, m = p.best, p.metric
    lines = [
        f"isosim plan {source}: {p.problems} problems, budget {p.budget:.3g} rollouts, B_max {p.b_max}, "
        f"metric {m} (mean field)".replace("  ", " "),
        "",
        f"recommended: n = {b.n}, B_problem = {b.b_problem}, M = {b.steps} steps "
        f"(batch {b.batch} rollouts, {b.batch * b.steps:,} rollouts in all)",
        f"predicted {m} = {b.predicted[m]:.4f} (base {p.base[m]:.4f}); confidence {p.confidence} " + (
            f"(gap to the runner-up {_fmt(p.gap)}, near-tie threshold {p.error:.4f} from the measured ranking error)"
            if p.ensemble is None else
            f"({p.ensemble.agree:.0%} of the {p.ensemble.members} ensemble members pick n = {b.n}; their n* "
            f"{p.ensemble.n_low} to {p.ensemble.n_high})"),
        "",
        f"  {'rank':>4} {'n':>6} {'B_problem':>9} {'M':>8}  " + "  ".join(f"{x:>8}" for x in _cols(p)),
    ]
    for i, c in enumerate(p.ranked[:6], 1):
        lines.append(f"  {i:>4} {c.n:>6} {c.b_problem:>9} {c.steps:>8}  "
                     + "  ".join(f"{c.predicted[x]:>8.4f}" for x in _cols(p)))
    ens = p.ensemble
    lines += ["", "compute-optimal n*(C) on the way to the budget:", f"  {'compute':>10} {'n*':>6} {'B_problem':>9}"
              + ("" if ens is None else f"  ensemble n* (B_problem {ens.b_problem})")]
    curve = p.n_star_curve
    rows = sorted(set(np.linspace(0, len(curve) - 1, min(len(curve), 12)).round().astype(int)))
    for i, (c, n, bp) in zip(rows, curve.iloc[rows][["compute", "n", "B_problem"]].itertuples(index=False)):
        extra = ""
        if ens is not None and math.isfinite(ens.curve["n_low"].iloc[i]):
            extra = f"  {int(ens.curve['n_low'].iloc[i])} to {int(ens.curve['n_high'].iloc[i])}"
        lines.append(f"  {c:>10.3g} {n:>6} {bp:>9}{extra}")
    lines += ["", "reasoning: " + p.reasoning()]
    lines += [f"note: {text}" for text in p.notes]
    if p.verification is not None:
        v = p.verification
        sims = ", ".join(f"n={c.n}/B={c.b_problem}: {s:.4f}" for c, s in zip(p.ranked, v.simulated))
        lines += ["", f"verify ({v.seeds} seed{'s' if v.seeds != 1 else ''} each, simulated {m}): {sims}; "
                      + _verdict(v)]
    return "\n".join(lines)


def _verdict(v) -> str:
    """The verification's verdict in words, with the first's leads and their standard errors."""
    if v.seeds < 2:
        return "ranking inconclusive (one seed: no estimate of the seeds' noise)"
    leads = ", ".join(f"{x:+.4f} (SE {e:.4f})" for x, e in zip(v.lead, v.lead_se))
    text = {"holds": "ranking holds", "fails": "ranking does NOT hold",
            "inconclusive": "ranking inconclusive (a lead within the seeds' noise)"}[v.ranking]
    return f"{text}: the first leads by {leads}" if leads else text


def _cols(p) -> list[str]:
    return list(dict.fromkeys([p.metric, "avg@4", "best@4", "worst@4"]))


def _fmt(x: float) -> str:
    return f"{x:+.4f}" if math.isfinite(x) else "none"
