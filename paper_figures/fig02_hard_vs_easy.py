"""Finding 2: hard saturates at a smaller n than easy; the zero-signal share of groups by n."""
from style import COLORS, figure, main, n_star_steps, save


def make(results, out):
    fig, (a, b) = figure(2)
    n_star_steps(a, {p: results.law(p)["n_star"] for p in ("easy", "hard")}, results.specs["easy"].n)
    for i, preset in enumerate(("easy", "hard")):
        t = results.raw(preset)
        z = t[(t["metric"] == "zero_var_frac") & (t["step"] > 0)].groupby("n")["value"].mean()
        b.plot(z.index, z.values, "o-", color=COLORS[i], label=preset)
    b.set_xscale("log", base=2)
    b.set_xlabel("n")
    b.set_ylabel("zero-signal share of groups")
    b.legend()
    return save(fig, out, "fig02_hard_vs_easy")


if __name__ == "__main__":
    main(make)
