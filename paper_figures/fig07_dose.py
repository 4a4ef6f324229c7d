"""Finding 7: n*(C) on the training set as the shared (interfering) path is turned up."""
from style import COLORS, figure, log2_axis, main, save

from isosim.findings import DOSES, n_star_law


def make(results, out):
    fig, (a,) = figure(1)
    for i, dose in enumerate(DOSES):
        ns = n_star_law(results.evals(f"dose-{dose:g}", "train"))["n_star"]
        a.step(ns["compute"], ns["n"], where="post", color=COLORS[i], label=f"shared = {dose:g}")
    a.set_xscale("log")
    log2_axis(a, results.specs["easy"].n)
    a.set_xlabel("compute C (rollouts)")
    a.set_ylabel("n*(C), training avg@4")
    a.legend()
    return save(fig, out, "fig07_dose")


if __name__ == "__main__":
    main(make)
