"""Finding 7: n*(C) on the training set as the shared (interfering) path is turned up."""
from style import figure, main, n_star_steps, save

from isosim.experiments.findings import DOSES


def make(results, out):
    fig, (a,) = figure(1)
    tables = {f"shared = {d:g}": results.law(f"dose-{d:g}", "train")["n_star"] for d in DOSES}
    n_star_steps(a, tables, results.specs["easy"].n, "n*(C), training avg@4")
    return save(fig, out, "fig07_dose")


if __name__ == "__main__":
    main(make)
