"""Finding 1: on easy, the compute-optimal n*(C) rises with C and saturates."""
from style import figure, main, save

from isosim.experiments.findings import METRIC
from isosim.analysis.frontier import frontier
from isosim.analysis.plotting import plot_frontier, plot_n_star


def make(results, out):
    ev = results.evals("easy")
    law = results.law("easy")
    d = ev.assign(value=ev[METRIC])
    d = d[d["compute"] > 0]
    fig, (a, b, c) = figure(3, width=4.0)
    plot_frontier(d, frontier(d), ax=a)
    a.set_title(f"easy: validation {METRIC}")
    plot_n_star(law["n_star"], law["fit"], ax=b)
    b.set_title("n*(C)" + (f", L={law['L']:.1f}, R²={law['r2']:.2f}" if law["fitted"] else ""))
    abl = results.law("dose-0", "train")
    plot_n_star(abl["n_star"], None, ax=c)
    c.set_ylim(b.get_ylim())
    c.set_title("ablation: interference off (train)")
    return save(fig, out, "fig01_easy_n_star")


if __name__ == "__main__":
    main(make)
