"""Finding 12: n*(C) per validation subset of the mixtures; hard-only vs mixed training on easy bands."""
from __future__ import annotations

from ...errors import IsosimInputError
from ._common import METRIC, Finding, Results, Scale, base, final_by, n_star_table, q1

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
    forget = {}
    for band in ("easy", "very-easy"):
        hard_only = final_by(r.evals("hard-only-val-mix", f"val/{band}"))
        mixed = final_by(r.evals("mix3-val-mix", f"val/{band}"))
        forget[band] = {"hard_only": float(hard_only.max()), "mixed": float(mixed.max())}
    loses = all(v["hard_only"] < v["mixed"] for v in forget.values())
    compared = {"share_of_subsets_where_larger_n_wins": wins / len(subsets)} | {
        f"{band}_mixed_minus_hard_only": v["mixed"] - v["hard_only"] for band, v in forget.items()}
    return most and loses, {"compared": compared, "subsets": subsets, "larger_n_wins_on": f"{wins}/{len(subsets)}",
                            "best_final_avg@4_on_val_band": forget, "hard_only_loses_ground": loses}


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
    c.set_xscale("log")
    c.set_xlabel("compute C (rollouts)")
    c.set_ylabel(f"validation {METRIC}")
    c.set_title("n = 32")
    c.legend(fontsize=6)
    return save(fig, out, "fig12_mixtures")


FINDING = Finding(
    12, "Mixtures: larger n wins on most subsets; hard-only training loses ground on easy",
    study="50/50 hard/easy and 50/25/25 hard/easy/very easy keep the crossover; hard-only training forgets "
          "(very) easy problems",
    mechanism="shared parameters pulled towards hard problems' strategies move away from what easy ones need",
    ablation="the mixed-data run is the comparison for the hard-only run",
    sweeps_at=sweeps, check=check, figure=make)
