"""Finding 5: final validation reward over n (B_problem = 32) and over B_problem (n = 16)."""
from style import COLORS, figure, main, save

from isosim.experiments.findings import final_by


def make(results, out):
    fig, (a, b) = figure(2, width=3.6)
    s = final_by(results.evals("easy"))
    a.plot(s.index, s.values, "o-")
    a.set_xscale("log", base=2)
    a.set_xlabel("n (B_problem = 32)")
    a.set_ylabel("final validation avg@4")
    s = final_by(results.evals("easy-b-problem"), by=("B_problem",))
    b.plot(s.index, s.values, "o-", color=COLORS[1])
    b.set_xscale("log", base=2)
    b.set_xlabel("B_problem (n = 16)")
    b.set_ylim(a.get_ylim())
    return save(fig, out, "fig05_sensitivity")


if __name__ == "__main__":
    main(make)
