"""Figures and the short Markdown report of ``isosim lm validate``."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .task import OPS


def write_figures(res, out: Path) -> list[Path]:
    """``lm_validation.png/pdf``: per subset, measured and surrogate validation avg@1 against
    compute (one line per n) and log2 n*(C) measured vs predicted; ``lm_base.png/pdf``: the
    base model's pass-rate histogram on the pool and its per-skill error against the teacher's."""
    import seaborn as sns

    from isosim.analysis.plotting import new_figure, save_figure, set_style

    set_style()
    names = list(res.measured)
    fig = new_figure(ncols=3, width=3.6, height=2.9 * len(names))[0]
    fig.clear()
    axes = fig.subplots(len(names), 3, squeeze=False)
    grid = res.plan["n_grid"]
    pal = dict(zip(grid, sns.color_palette("viridis", len(grid))))
    for row, name in enumerate(names):
        cur = res.curves[name]
        for col, (key, base, title) in enumerate((("measured", cur["base_value"], "LM (measured)"),
                                                  ("surrogate", cur["base_surrogate"], "surrogate (predicted)"))):
            ax = axes[row, col]
            for n in grid:
                pts = sorted(cur[key].get(n, {}).items())
                if pts:
                    c, v = zip(*pts)
                    ax.plot(c, v, "o-", ms=3, lw=1.2, color=pal[n], label=f"n={n}")
            ax.axhline(base, color="grey", lw=0.8, ls=":")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("compute C (rollouts)")
            ax.set_ylabel("validation avg@1")
            ax.set_title(f"{name}: {title}", fontsize="small")
            if col == 0:
                ax.legend(fontsize="x-small", ncols=2)
        ax = axes[row, 2]
        meas = res.measured[name]
        if meas and "n_low" in meas[0]:
            ax.fill_between([p["compute"] for p in meas], [math.log2(p["n_low"]) for p in meas],
                            [math.log2(p["n_high"]) for p in meas], color="tab:blue", alpha=0.15, step=None,
                            label=f"measured, {res.config.interval:.0%} interval")
        for key, mk, lab in (("measured", "o-", "measured"), ("predicted", "s--", "predicted")):
            pts = getattr(res, key)[name]
            ax.plot([p["compute"] for p in pts], [math.log2(p["n"]) for p in pts], mk, ms=4, label=lab)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("compute C (rollouts)")
        ax.set_ylabel("log2 n*")
        ax.set_title(f"{name}: n*(C), mean |log2 error| {res.agreement[name]['mean_abs_log2_error']:.2f}",
                     fontsize="small")
        ax.legend(fontsize="x-small")
    paths = save_figure(fig, out / "lm_validation")

    fig, (a0, a1) = new_figure(ncols=2, width=3.8, height=3.0)
    hist = np.asarray(res.pool["histogram"], float)
    edges = np.linspace(0, 1, len(hist) + 1)
    a0.bar(edges[:-1], hist, width=np.diff(edges), align="edge", color="#5c8fbf", edgecolor="white")
    for lo, hi, c in ((0.3, 0.6, "tab:green"), (0.0, 0.0625, "tab:red")):
        a0.axvspan(lo, hi, color=c, alpha=0.12)
    a0.set_xlabel(f"base avg@{res.config.measure_samples}")
    a0.set_ylabel("problems")
    a0.set_title("base pass rates on the pool (easy, hard bands)", fontsize="small")
    em, et = np.asarray(res.base["skill_error_model"]), np.asarray(res.base["skill_error_teacher"])
    for op in range(3):
        a1.scatter(et[op], em[op], s=14, label=f"op {OPS[op]}")
    a1.plot([0, 1], [0, 1], color="grey", lw=0.8)
    a1.set_xlabel("teacher error rate")
    a1.set_ylabel("base model error rate")
    a1.set_title("per-skill error (teacher forcing)", fontsize="small")
    a1.legend(fontsize="x-small")
    paths += save_figure(fig, out / "lm_base")
    return paths


def report_text(res) -> str:
    cfg, b = res.config, res.base
    lines = [
        f"# Small-LM validation ({cfg.name} configuration, device {res.device})",
        "",
        f"Base model: {cfg.model.n_layer}-layer GPT, n_embd {cfg.model.n_embd}, {b['params']:,} parameters, trained "
        f"from scratch on teacher traces ({b['steps']} steps of {cfg.sft.batch}, {b['seconds']:.0f} s, final loss "
        f"{b['final_loss']:.3f}). Task: k in [{cfg.task.k_min}, {cfg.task.k_max}] operations mod 10. Per-skill error "
        f"against the teacher's: mean |model - teacher| = {b['skill_error_mean_abs_diff']:.3f} over 30 skills.",
        "",
        f"Pool: {res.pool['size']} problems, base avg@{cfg.measure_samples} histogram (16 bins over [0, 1]): "
        f"{[int(h) for h in res.pool['histogram']]}; correlation with the teacher's exact pass rates "
        f"{res.pool['teacher_pass_rate_corr']:.2f}.",
        "",
        "| subset | train | validation | base avg@16 train | base avg@16 val |",
        "|---|---|---|---|---|",
    ]
    for name, s in res.subsets.items():
        lines.append(f"| {name} | {s['train']} | {s['val']} | {s['train_mean']:.3f} | {s['val_mean']:.3f} |")
    lines += [
        "",
        f"Q1 grid: B_problem = {cfg.b_problem}, n in {res.plan['n_grid']}, {cfg.seeds} training seed(s) per (subset, n)"
        f"{f' (indices {cfg.seed_indices()[0]} to {cfg.seed_indices()[-1]})' if cfg.first_seed else ''}, "
        f"C_max = {res.plan['budget']} rollouts"
        f"{' (shrunk to fit the time budget)' if res.plan['shrunk'] else ''}, GRPO {_lr_text(cfg)}, "
        f"scale_rewards={cfg.grpo.scale_rewards}, loss_agg={cfg.grpo.loss_agg}; validation avg@1 from "
        f"{cfg.eval_samples} samples per problem.",
        "n*(C): arg-max over n of the best-so-far validation avg@1 (mean over seeds) at each budget"
        + (f"; its {cfg.interval:.0%} interval [n_low, n_high] from {cfg.bootstrap} bootstrap replicates over seeds "
           "and validation problems" if cfg.bootstrap and _has_interval(res) else "")
        + ". ± s.e.: the standard error of that seed mean (the seeds' sd / sqrt(seeds)); with one seed, the "
        "binomial error of its samples. Surrogate: strategies model on "
        f"the measured pass rates ({cfg.pass_rate_estimate} estimate), same n, B_problem and M; its learning rate "
        "fitted to the LM's curve at the reference n only.",
        "",
    ]
    for name in res.measured:
        cal = res.calibration[name]
        lines += [f"## {name}", "",
                  f"Surrogate lr {cal['lr']:g} fitted at n = {cal['n_ref']} (rmse of the gain curve {cal['rmse']:.3f}).",
                  ""]
        iv = _has_interval(res)
        lines += (["| C (rollouts) | n* measured | interval | its avg@1 (± s.e.) | runner-up | n* predicted |",
                   "|---|---|---|---|---|---|"] if iv else
                  ["| C (rollouts) | n* measured | its avg@1 (± s.e.) | runner-up | n* predicted |", "|---|---|---|---|---|"])
        pm = {p["compute"]: p["n"] for p in res.predicted[name]}
        n_eval = res.subsets[name]["val"] * cfg.eval_samples * cfg.seeds
        for p in res.measured[name]:
            se = _seed_se(res.runs.get(name, []), p["n"], p["compute"], p["value"])
            if se is None:  # one seed: the binomial error of its samples
                se = math.sqrt(max(p["value"] * (1 - p["value"]), 0.0) / n_eval)
            ru = f"n={p['runner_up']}: {p['runner_up_value']:.3f}" if "runner_up" in p else "-"
            ivs = f" [{p['n_low']}, {p['n_high']}] |" if iv else ""
            lines.append(f"| {p['compute']} | {p['n']} |{ivs} {p['value']:.3f} ± {se:.3f} | {ru} | "
                         f"{pm.get(p['compute'], '-')} |")
        base = ", ".join(f"{k}: {v:.2f}" for k, v in res.baselines[name].items())
        lines += ["", f"Agreement: mean |log2 n*_measured - log2 n*_predicted| = "
                  f"{res.agreement[name]['mean_abs_log2_error']:.2f} (constant predictors: {base}).", ""]
        lines += train_validation_text(res, name)
        sh = res.shift.get(name)
        if sh:
            lines += [f"Does n* move? From C = {sh['from']}"
                      f"{' (the registered first budget)' if sh.get('registered_start') else ''} to {sh['to']}: log2 n* changes by {sh['log2_shift']:+.0f} "
                      f"(paired bootstrap, {sh['level']:.0%} interval [{sh['low']:+.0f}, {sh['high']:+.0f}]; "
                      f"{sh['p_rises']:.0%} of replicates rise, {sh['p_moves']:.0%} by at least {sh['doublings']:.0f} "
                      f"doublings). Moves by at least {sh['doublings']:.0f} doublings: **{sh['verdict']}**.", ""]
    fb = res.fixed_batch
    if fb:
        lines += ["## Fixed-batch grid", "",
                  f"Total batch B = n · B_problem = {fb['B']} rollouts per step, (n, B_problem) in "
                  f"{[tuple(x) for x in fb['splits']]}, M_max = {fb['m_max']} steps, evaluated at M in {fb['steps']} "
                  "(C = B · M). n*(M): arg-max over splits of the best-so-far validation avg@1 (ties: the smaller n); "
                  "predicted by the surrogate at the same (n, B_problem, M) with the learning rate fitted above.", ""]
        for name in fb["measured"]:
            pm = {p["M"]: p for p in fb["predicted"][name]}
            n_eval = res.subsets[name]["val"] * cfg.eval_samples
            lines += [f"**{name}**", "", "| M | C | n* (B_problem*) measured | its avg@1 (± s.e.) | runner-up | "
                      "n* (B_problem*) predicted |", "|---|---|---|---|---|---|"]
            for p in fb["measured"][name]:
                se = math.sqrt(max(p["value"] * (1 - p["value"]), 0.0) / n_eval)
                ru = f"n={p['runner_up']}: {p['runner_up_value']:.3f}" if "runner_up" in p else "-"
                q = pm.get(p["M"])
                pred = f"{q['n']} ({q['B_problem']})" if q else "-"
                lines.append(f"| {p['M']} | {p['M'] * fb['B']} | {p['n']} ({p['B_problem']}) | {p['value']:.3f} ± {se:.3f} "
                             f"| {ru} | {pred} |")
            lines += ["", f"Agreement: mean |log2 n*_measured - log2 n*_predicted| = "
                      f"{fb['agreement'][name]['mean_abs_log2_error']:.2f} over {fb['agreement'][name]['budgets']} steps.", ""]
    if res.held_out:
        lines += held_out_text(res)
    cpu = f" (CPU time of this invocation {res.cpu_seconds:.0f} s)" if res.cpu_seconds else ""
    lines.append(f"Wall time {res.seconds:.0f} s{cpu}. Figures: lm_validation.png, lm_base.png; raw data: results.jsonl.")
    return "\n".join(lines) + "\n"


def _seed_se(rows: list[dict], n: int, c: int, value: float) -> float | None:
    """The standard error of a seed mean, sd / sqrt(seeds), of n's validation avg@1 at the budget
    whose seed mean is ``value`` (the best so far up to ``c``; ``c`` itself if none matches);
    ``None`` with fewer than two seeds."""
    comp = sorted({b for r in rows if r["n"] == n for b in r["compute"] if b <= c})
    per = {b: _at(rows, n, b, "value") for b in comp}
    per = {b: v for b, v in per.items() if len(v) > 1}
    if not per:
        return None
    b = next((b for b in per if abs(np.mean(per[b]) - value) < 1e-12), c if c in per else max(per))
    return float(np.std(per[b], ddof=1) / math.sqrt(len(per[b])))


def _at(rows: list[dict], n: int, c: int, key: str) -> list:
    """``key`` (``value``, ``train_reward``) of every seed's run at n, at budget c where it was evaluated."""
    return [r[key][r["compute"].index(c)] for r in rows if r["n"] == n and c in r["compute"]]


def train_validation_text(res, name: str) -> list[str]:
    """Per n and budget: validation avg@1 and the training reward (the mean over the last quarter
    of the steps so far), each the mean over seeds with the seeds' standard deviation."""
    rows = [r for r in res.runs.get(name, []) if r["n"] > 0]
    if not rows or all(v is None for r in rows for v in r["train_reward"]):
        return []
    grid = sorted({r["n"] for r in rows})
    comp = sorted({c for r in rows for c in r["compute"]})
    lines = ["Training reward beside validation (mean over seeds ± their standard deviation; training reward: mean "
             "over the last quarter of the steps so far, on the training problems; validation: avg@1):", "",
             "| C (rollouts) | " + " | ".join(f"n={n} validation | n={n} training" for n in grid) + " |",
             "|---|" + "---|" * (2 * len(grid))]

    def cell(vals):
        vals = [v for v in vals if v is not None]
        if not vals:
            return "-"
        sd = f" ± {np.std(vals, ddof=1):.3f}" if len(vals) > 1 else ""
        return f"{np.mean(vals):.3f}{sd}"
    for c in comp:
        cells = []
        for n in grid:
            cells += [cell(_at(rows, n, c, "value")), cell(_at(rows, n, c, "train_reward"))]
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    return lines + [""]


def _lr_text(cfg) -> str:
    """The runs' learning rate as the report states it."""
    if cfg.lr_rule == "sqrt":
        return (f"lr {cfg.grpo.lr:g} x sqrt(n B_problem / {cfg.lr_ref_batch}) (AdamW, constant in time; the study's "
                f"sqrt(B) rule: {', '.join(f'n={n}: {cfg.run_lr(n, cfg.b_problem):.2g}' for n in cfg.n_grid)})")
    return f"lr {cfg.grpo.lr:g} (AdamW, constant)"


def _has_interval(res) -> bool:
    return any("n_low" in p for pts in res.measured.values() for p in pts)


ALT_TEXT = {
    "always_smallest_n": "always the smallest n of the grid",
    "always_largest_n": "always the largest n of the grid",
    "study_law": "the study's fitted n*(C) law, used as is (its easy / hard fit), nearest grid n",
    "default_surrogate": "isosim's default surrogate, only its learning rate fitted to the middle-n pilot",
    "scalerl_per_n": "ScaleRL curve per n, fitted to pilots at every n (cut at C_max / 16), extrapolated",
}


def held_out_text(res) -> list[str]:
    """The held-out table: every predictor's score per subset and its pilot cost."""
    h = res.held_out
    pr = h["protocol"]
    names = [k for k in res.measured]
    lines = ["## Held-out score of n*(C) predictors", "",
             f"Pilots: the runs at n in {pr['pilot_n']} (all seeds), cut at C_max / 16 = {pr['pilot_cut']} rollouts; "
             f"predictions at C in {pr['budgets']}. Score per subset: mean |log2 n*_measured - log2 n*_predicted| and "
             f"the share of budgets within one doubling (or inside the measured {pr['interval']:.0%} interval).", ""]
    head = "| predictor | " + " | ".join(f"{k}: mean abs log2 error | {k}: within one doubling" for k in names) \
        + " | pilot rollouts | predicted n*, " + ", ".join(names) + " |"
    lines += [head, "|" + "---|" * (2 * len(names) + 3)]
    rows = [("calibrated surrogate", h, None)] + [(k, v, ALT_TEXT.get(k)) for k, v in h["alternatives"].items()]
    for label, v, _ in rows:
        if v.get(names[0]) is None:
            lines.append(f"| {label} | " + " | ".join("pending | pending" for _ in names) + " | - | - |")
            continue
        cells = " | ".join(f"{v[k]['mean_abs_log2_error']:.2f} | {v[k]['share_within_one_doubling']:.0%}"
                           if v[k]["budgets"] else "no prediction | -" for k in names)
        preds = "; ".join(str([p["n"] for p in v["predicted"][k]]) for k in names)
        lines.append(f"| {label} | {cells} | {v['pilot_rollouts']:,} | {preds} |")
    lines += [""] + [f"- `{k}`: {t}." for k, _, t in rows[1:] if t] + [""]
    for k, d in (h.get("details") or {}).items():
        knobs = ", ".join(f"{name} {x:.3g}" for name, x in d.get("calibrated_knobs", {}).items())
        tr = d.get("calibrated_training")
        said = {"kept": "its training reward fitted beside validation",
                "set aside": "its training reward set aside (the best fit with it missed it by "
                             f"{d.get('calibrated_training_misfit', float('nan')):.1f} times its noise), "
                             "validation alone",
                "none": "validation alone (no training reward logged)"}.get(tr)
        if knobs or said:
            lines.append(f"Calibrated surrogate, {k}: {said or 'fitted'}; knobs {knobs}.")
    if h.get("details"):
        lines.append("")
    if h.get("easy") is None:
        why = h.get("status", "")
        lines += [f"The calibrated surrogate's row is {why}." if why.startswith("not scored") else
                  "The calibrated surrogate's row is pending: no calibrated predictor was plugged in.", ""]
    return lines
