"""Finding 8: with D = 500, training reward keeps rising while validation stalls."""
from style import figure, main, mean_curve, n_colors, save

from isosim.findings import METRIC


def make(results, out):
    fig, (a, b) = figure(2)
    for ax, split in ((a, "train"), (b, "val")):
        curves = mean_curve(results.evals("easy-d500", split), METRIC)
        colors = n_colors(curves["n"])
        for n, g in curves.groupby("n"):
            ax.plot(g["compute"], g[METRIC], color=colors[n], label=str(n))
        ax.set_xscale("log")
        ax.set_xlabel("compute C (rollouts)")
        ax.set_title(f"D = 500: {split} {METRIC}")
    a.legend(title="n", fontsize=6, ncols=2)
    return save(fig, out, "fig08_train_test")


if __name__ == "__main__":
    main(make)
