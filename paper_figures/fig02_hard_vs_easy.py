"""Finding 2: hard saturates at a smaller n than easy; the zero-signal share of groups by n."""
from style import COLORS, figure, log2_axis, main, save

from isosim.findings import n_star_law


def make(results, out):
    fig, (a, b) = figure(2)
    for preset, color in (("easy", COLORS[0]), ("hard", COLORS[3])):
        ns = n_star_law(results.evals(preset))["n_star"]
        a.step(ns["compute"], ns["n"], where="post", color=color, label=preset)
        t = results.raw(preset)
        z = t[(t["metric"] == "zero_var_frac") & (t["step"] > 0)].groupby("n")["value"].mean()
        b.plot(z.index, z.values, "o-", color=color, label=preset)
    a.set_xscale("log")
    log2_axis(a, results.specs["easy"].n)
    a.set_xlabel("compute C (rollouts)")
    a.set_ylabel("n*(C)")
    a.legend()
    b.set_xscale("log", base=2)
    b.set_xlabel("n")
    b.set_ylabel("zero-signal share of groups")
    b.legend()
    return save(fig, out, "fig02_hard_vs_easy")


if __name__ == "__main__":
    main(make)
