"""Finding 10: LR scaling rules at B = 8192: sqrt(B), constant and linear."""
from style import COLORS, figure, main, save

from isosim.findings import METRIC


def make(results, out):
    fig, (a,) = figure(1)
    for i, rule in enumerate(("sqrt", "constant", "linear")):
        ev = results.evals(f"lr-{rule}")
        c = ev[ev["step"] > 0].groupby("step")[METRIC].mean()
        a.plot(c.index, c.values, color=COLORS[i], label=rule)
    a.set_xscale("log")
    a.set_xlabel("update steps M")
    a.set_ylabel(f"validation {METRIC}")
    a.set_title("easy, n = 256, B_problem = 32")
    a.legend(title="LR rule")
    return save(fig, out, "fig10_lr_rule")


if __name__ == "__main__":
    main(make)
