"""Finding 3: which n is best for worst@4 (sharpening) and best@4 (coverage), per difficulty."""
from style import COLORS, figure, main, save

from isosim.experiments.findings import final_by


def make(results, out):
    panels = (("easy", "easy"), ("hard", "hard"), ("extremely-hard", "extremely hard"))
    fig, axes = figure(3, width=3.6)
    for ax, (name, title) in zip(axes, panels):
        ev = results.evals(name)
        for metric, color in (("worst@4", COLORS[0]), ("best@4", COLORS[1])):
            s = final_by(ev, metric)
            ax.plot(s.index, s.values, "o-", color=color, label=metric)
            ax.axvline(s.idxmax(), color=color, ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("n")
        ax.set_title(title)
    axes[0].set_ylabel("final validation metric")
    axes[0].legend()
    return save(fig, out, "fig03_mechanisms")


if __name__ == "__main__":
    main(make)
