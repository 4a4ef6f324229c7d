"""Finding 11: pass@1 histograms of hard training problems at matched compute, by n."""
import numpy as np
from style import figure, main, n_colors, save

from isosim.experiments.findings import histogram_at


def make(results, out):
    fig, axes = figure(3, width=3.8)
    top = float(results.specs["hist-hard"].budget)
    panels = ((axes[0], "hist-hard", top / 64, "hard"), (axes[1], "hist-hard", top, "hard"),
              (axes[2], "hist-hard-no-interference", top, "hard, interference off"))
    for ax, name, compute, title in panels:
        h = histogram_at(results.evals(name, "train"), compute)
        title = f"{title}, C = {compute:.2g}"
        bins = h.shape[1]
        colors = n_colors(h.index)
        width = 0.8 / bins / len(h)
        for j, (n, row) in enumerate(h.iterrows()):
            x = (np.arange(bins) + 0.1) / bins + j * width
            ax.bar(x, row.values, width=width, align="edge", color=colors[n], label=f"n = {n}")
        ax.set_xlabel("pass@1 of a training problem")
        ax.set_title(title)
    axes[0].set_ylabel("share of problems")
    axes[0].legend()
    return save(fig, out, "fig11_histograms")


if __name__ == "__main__":
    main(make)
