"""Finding 4: with the total batch fixed, the best n and B_problem against the step count M."""
from style import COLORS, figure, main, save

from isosim.experiments.findings import fixed_batch_trend


def make(results, out):
    t = fixed_batch_trend(results.evals("q2-easy"))
    fig, (a,) = figure(1)
    a.step(t["M"], t["n_star"], where="post", color=COLORS[0], label="n*(M)")
    a.step(t["M"], t["B_problem_star"], where="post", color=COLORS[1], label="B_problem*(M)")
    a.set_xscale("log")
    a.set_yscale("log", base=2)
    a.set_xlabel("update steps M")
    a.set_title(f"easy, B = {results.specs['q2-easy'].total_batch}")
    a.legend()
    return save(fig, out, "fig04_fixed_batch")


if __name__ == "__main__":
    main(make)
