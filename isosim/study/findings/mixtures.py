"""Finding 12: n*(C) per validation subset of the mixtures; hard-only training's easy bands against their
values before training (forgetting)."""
from __future__ import annotations

from ...errors import IsosimInputError
from ._common import METRIC, Finding, Results, Scale, _series, base, final_by, n_star_table, q1

MIX2 = (("hard", 0.5), ("easy", 0.5))
MIX3 = (("hard", 0.5), ("easy", 0.25), ("very-easy", 0.25))
VAL3 = (("hard", 1 / 3), ("easy", 1 / 3), ("very-easy", 1 / 3))


def sweeps(sc: Scale) -> dict:
    return {
        "mix-hard-easy": q1("mix2", base("mixture", population={"mixture_weights": MIX2}), sc),
        "mix-hard-easy-very-easy": q1("mix3", base("mixture", population={"mixture_weights": MIX3}), sc),
        "hard-only-val-mix": q1("hard-valmix", base("hard", population={"val_mixture_weights": VAL3}), sc),
        "mix3-val-mix": q1("mix3-valmix", base("mixture", population={"mixture_weights": MIX3,
                                                                      "val_mixture_weights": VAL3}), sc),
    }


def _subset_n_star(ev):
    """n*(C) on one validation subset, or None when no n's curve rises enough to be fitted (every n
    loses ground there: the subset is forgotten, so no n is compute-optimal for it)."""
    try:
        return n_star_table(ev)
    except IsosimInputError:
        return None


def check(r: Results) -> tuple[bool, dict]:
    subsets, wins = {}, 0
    for name in ("mix-hard-easy", "mix-hard-easy-very-easy"):
        for split in sorted(s for s in r.raw(name)["split"].unique() if s.startswith("val/")):
            ns = _subset_n_star(r.evals(name, split))
            if ns is None:
                subsets[f"{name}:{split}"] = {"n_star_low_C": None, "n_star_top_C": None,
                                              "note": "no n's curve could be fitted (the subset loses ground)"}
                continue
            first, last = int(ns["n"].iloc[0]), int(ns["n"].iloc[-1])
            subsets[f"{name}:{split}"] = {"n_star_low_C": first, "n_star_top_C": last}
            wins += last > min(r.specs[name].n)
    most = wins > len(subsets) / 2
    forget = {band: forgetting(r, band) for band in ("easy", "very-easy")}
    loses = all(v["before_minus_best_final"] > 0 for v in forget.values())
    compared = {"share_of_subsets_where_larger_n_wins": wins / len(subsets)} | {
        f"{band}_before_minus_hard_only_best_final": v["before_minus_best_final"] for band, v in forget.items()}
    return most and loses, {"compared": compared, "subsets": subsets, "larger_n_wins_on": f"{wins}/{len(subsets)}",
                            "hard_only_on_val_band": forget, "hard_only_forgets": loses}


def forgetting(r: Results, band: str) -> dict:
    """Hard-only training's validation ``METRIC`` on ``band`` before training and at the end of each
    n's runs (mean over the seeds): it forgets when even the n that keeps the most ends below
    where it started. The mixed run's best final value is reported beside it (not compared)."""
    ev = r.evals("hard-only-val-mix", f"val/{band}")
    before = float(ev.loc[ev["compute"] == 0, METRIC].mean())
    final = final_by(ev)
    mixed = final_by(r.evals("mix3-val-mix", f"val/{band}"))
    return {"before": before, "final_by_n": _series(final), "best_final": float(final.max()),
            "before_minus_best_final": before - float(final.max()), "mixed_best_final": float(mixed.max())}


def make(results, out):
    from .style import COLORS, figure, log2_axis, mean_curve, save

    fig, (a, b, c) = figure(3, width=3.8)
    for ax, name in ((a, "mix-hard-easy"), (b, "mix-hard-easy-very-easy")):
        splits = sorted(s for s in results.raw(name)["split"].unique() if s.startswith("val/"))
        for i, split in enumerate(splits):
            ns = _subset_n_star(results.evals(name, split))
            if ns is None:
                continue
            ax.step(ns["compute"], ns["n"] * (1 + 0.04 * i), where="post", color=COLORS[i], label=split[4:])
        ax.set_xscale("log")
        log2_axis(ax, results.specs[name].n)
        ax.set_xlabel("compute C (rollouts)")
        ax.set_title(name.replace("mix-", "").replace("-", "/"))
        ax.legend(fontsize=7)
    a.set_ylabel("n*(C) on the subset")
    for i, (name, label) in enumerate((("hard-only-val-mix", "trained on hard"), ("mix3-val-mix", "trained on mix"))):
        for band, ls in (("easy", "-"), ("very-easy", "--")):
            curve = mean_curve(results.evals(name, f"val/{band}"), METRIC).query("n == 32")
            c.plot(curve["compute"], curve[METRIC], ls=ls, color=COLORS[i], label=f"{label}, {band}")
            if i == 0:  # where hard-only training started on this band: below it, the band is forgotten
                c.axhline(forgetting(results, band)["before"], ls=ls, color="0.5", lw=0.8)
    c.set_xscale("log")
    c.set_xlabel("compute C (rollouts)")
    c.set_ylabel(f"validation {METRIC}")
    c.set_title("n = 32 (grey: before training)")
    c.legend(fontsize=6)
    return save(fig, out, "fig12_mixtures")


FINDING = Finding(
    12, "Mixtures: larger n wins on most subsets; hard-only training loses ground on easy",
    study="50/50 hard/easy and 50/25/25 hard/easy/very easy keep the crossover; hard-only training forgets "
          "(very) easy problems",
    mechanism="shared parameters pulled towards hard problems' strategies move away from what easy ones need",
    ablation="hard-only training's easy and very-easy validation is compared with its value before training; "
             "the mixed-data run is drawn beside it",
    sweeps_at=sweeps, check=check, figure=make)
