"""Finding 8: with D = 500, training reward keeps rising while validation stalls."""
from style import curves_by_n, figure, main, save

from isosim.experiments.findings import METRIC


def make(results, out):
    fig, (a, b) = figure(2)
    for ax, split in ((a, "train"), (b, "val")):
        curves_by_n(ax, results.evals("easy-d500", split), METRIC, f"D = 500: {split} {METRIC}")
    a.legend(title="n", fontsize=6, ncols=2)
    return save(fig, out, "fig08_train_test")


if __name__ == "__main__":
    main(make)
