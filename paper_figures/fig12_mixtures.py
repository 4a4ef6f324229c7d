"""Finding 12: n*(C) per validation subset of the mixtures; hard-only vs mixed training on easy bands."""
from style import COLORS, figure, log2_axis, main, mean_curve, save

from isosim.experiments.findings import METRIC, n_star_table


def make(results, out):
    fig, (a, b, c) = figure(3, width=3.8)
    for ax, name in ((a, "mix-hard-easy"), (b, "mix-hard-easy-very-easy")):
        splits = sorted(s for s in results.raw(name)["split"].unique() if s.startswith("val/"))
        for i, split in enumerate(splits):
            ns = n_star_table(results.evals(name, split))
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


if __name__ == "__main__":
    main(make)
