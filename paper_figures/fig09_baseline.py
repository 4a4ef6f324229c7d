"""Finding 9: n = 256 against (update on 64, baseline from 256) against n = 64, over steps."""
from style import curves_by_step, figure, main, save

from isosim.experiments.findings import METRIC


def make(results, out):
    fig, (a,) = figure(1)
    labels = {"n256": "n = 256", "decoupled": "update 64, baseline 256", "n64": "n = 64"}
    curves_by_step(a, {label: results.evals(f"baseline-{name}") for name, label in labels.items()}, METRIC,
                   f"easy, B_problem = {results.specs['baseline-n64'].b_problem[0]}")
    a.legend()
    return save(fig, out, "fig09_baseline")


if __name__ == "__main__":
    main(make)
