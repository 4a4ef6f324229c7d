"""Finding 9: n = 256 against (update on 64, baseline from 256) against n = 64, over steps."""
from style import COLORS, figure, main, save

from isosim.findings import METRIC


def make(results, out):
    fig, (a,) = figure(1)
    labels = {"n256": "n = 256", "decoupled": "update 64, baseline 256", "n64": "n = 64"}
    for i, (name, label) in enumerate(labels.items()):
        ev = results.evals(f"baseline-{name}")
        c = ev[ev["step"] > 0].groupby("step")[METRIC].mean()
        a.plot(c.index, c.values, color=COLORS[i], label=label)
    a.set_xscale("log")
    a.set_xlabel("update steps M")
    a.set_ylabel(f"validation {METRIC}")
    a.set_title(f"easy, B_problem = {results.specs['baseline-n64'].b_problem[0]}")
    a.legend()
    return save(fig, out, "fig09_baseline")


if __name__ == "__main__":
    main(make)
