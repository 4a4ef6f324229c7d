"""Finding 6: the tabular model (no interference) keeps n* at the smallest n."""
from style import figure, log2_axis, main, mean_curve, n_colors, save

from isosim.findings import METRIC, n_star_law


def make(results, out):
    ev = results.evals("easy-tabular", "train")
    fig, (a, b) = figure(2)
    curves = mean_curve(ev, METRIC)
    colors = n_colors(curves["n"])
    for n, g in curves.groupby("n"):
        a.plot(g["compute"], g[METRIC], color=colors[n], label=str(n))
    a.set_xscale("log")
    a.set_xlabel("compute C (rollouts)")
    a.set_ylabel(f"training {METRIC}")
    a.legend(title="n", fontsize=6, ncols=2)
    ns = n_star_law(ev)["n_star"]
    b.step(ns["compute"], ns["n"], where="post")
    b.set_xscale("log")
    log2_axis(b, results.specs["easy-tabular"].n)
    b.set_title("tabular: n*(C)")
    return save(fig, out, "fig06_tabular")


if __name__ == "__main__":
    main(make)
