"""Finding 6: the tabular model (no interference) keeps n* at the smallest n."""
from style import curves_by_n, figure, main, n_star_steps, save

from isosim.experiments.findings import METRIC


def make(results, out):
    ev = results.evals("easy-tabular", "train")
    fig, (a, b) = figure(2)
    curves_by_n(a, ev, METRIC)
    a.set_ylabel(f"training {METRIC}")
    a.legend(title="n", fontsize=6, ncols=2)
    n_star_steps(b, {"tabular": results.law("easy-tabular", "train")["n_star"]}, results.specs["easy-tabular"].n)
    b.set_title("tabular: n*(C)")
    return save(fig, out, "fig06_tabular")


if __name__ == "__main__":
    main(make)
