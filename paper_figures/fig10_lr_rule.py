"""Finding 10: LR scaling rules at B = 8192: sqrt(B), constant and linear."""
from style import curves_by_step, figure, main, save

from isosim.experiments.findings import METRIC


def make(results, out):
    fig, (a,) = figure(1)
    curves_by_step(a, {rule: results.evals(f"lr-{rule}") for rule in ("sqrt", "constant", "linear")}, METRIC,
                   "easy, n = 256, B_problem = 32")
    a.legend(title="LR rule")
    return save(fig, out, "fig10_lr_rule")


if __name__ == "__main__":
    main(make)
