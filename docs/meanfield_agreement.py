"""Mean field vs simulation on the Q1 sweeps of ``isosim reproduce``: the numbers in docs/planner.md.

    python docs/meanfield_agreement.py ISOSIM_OUT     # the --out folder of a full `isosim reproduce`
    python docs/meanfield_agreement.py ISOSIM_OUT --scale quick --max-train 256   # `reproduce --quick`,
                                                      # the mean field on the planner's 256 training rows
The mean field runs with the planner's integration options (`isosim.plan.planner.MEAN_FIELD_OPTIONS`).
"Within 1" compares the mean field's n* with the simulated one at each budget; "within 1 of the
90% interval" with the simulated n*'s interval over resamples of the seeds within each n (a
budget where the seeds cannot tell several n apart counts each of them), and "interval one n"
is the share of budgets where that interval is a single n.
"""
import argparse
import time
from pathlib import Path

import numpy as np

from isosim.errors import IsosimInputError
from isosim.experiments.store import RunStore
from isosim.experiments.sweep import SweepSpec, evaluations
from isosim.plan.agreement import agreement
from isosim.plan.planner import MEAN_FIELD_OPTIONS
from isosim.plan.predict import fit_n_star_law, n_star, predict
from isosim.study.findings import sweep_specs

#: seed resamples for the simulated n*'s 90% interval (isosim.plan.agreement.sim_n_star_interval)
N_BOOT = 200


def main(root: Path, scale: str = "full", max_train: int | None = None) -> None:
    for preset in ("easy", "hard"):
        store = RunStore.load(root / "findings" / sweep_specs(scale)[preset].id)
        spec = SweepSpec.from_dict(store.manifest["spec"])
        sim = evaluations(store.read(), "val")
        t0 = time.perf_counter()
        curves = predict(spec.base, spec.allocations(), spec.budget, max_train=max_train, **MEAN_FIELD_OPTIONS)
        took = time.perf_counter() - t0
        print(f"## {preset}: {len(spec.allocations())} allocations, mean field {took:.1f} s (incl. the population)")
        print("| metric | curve RMSE | max abs error | seed sd | log2 n* within 1 | within 1 of the 90% interval "
              "| interval one n | max abs d log2 n* | max regret |")
        print("|---|---|---|---|---|---|---|---|---|")
        for metric in ("avg@4", "best@4", "worst@4"):
            try:
                a = agreement(sim, curves, metric, n_boot=N_BOOT)
            except IsosimInputError as e:  # curves too flat for any per-n fit: no n* to compare
                print(f"| {metric} | no n*: {e} | | | | | | | |")
                continue
            print(f"| {metric} | {a.curve_rmse:.4f} | {a.curve_max:.4f} | {a.seed_sd:.4f} | "
                  f"{a.within_one:.0%} of {len(a.n_star)} | {a.within_one_interval:.0%} | {a.resolved:.0%} | "
                  f"{a.max_dlog2:.0f} | {a.regret:.4f} |")
        try:
            a = agreement(sim, curves, "avg@4", n_boot=N_BOOT)
        except IsosimInputError:
            continue
        t = a.n_star
        raw = (np.abs(np.log2(t["n_mf_raw"]) - np.log2(t["n_sim"])) <= 1).mean()
        print(f"avg@4, n* of the raw mean-field curves (the planner's arg-max) within one doubling of the simulated "
              f"n*: {raw:.0%} of {len(t)}; of its 90% interval: {a.within_one_of_interval('n_mf_raw'):.0%}; "
              f"of that interval or within 0.003 of its value: {a.within_one_or_close('n_mf_raw'):.0%} "
              f"(max regret {t['regret_raw'].max():.4f}); the same fits: {a.within_one_or_close('n_mf'):.0%}")
        print("\n| compute | n* sim [90% interval] | n* mean field (same fits) | n* mean field (raw curves) |")
        print("|---|---|---|---|")
        for i in range(0, len(t), 4):
            r = t.iloc[i]
            print(f"| {r.compute:.3g} | {int(r.n_sim)} [{int(r.n_sim_low)}, {int(r.n_sim_high)}] | {int(r.n_mf)} | "
                  f"{int(r.n_mf_raw)} |")
        laws = {
            "simulation": fit_n_star_law(t.rename(columns={"n_sim": "n"})),
            "mean field, same fits": fit_n_star_law(t.rename(columns={"n_mf": "n"})),
            "mean field, raw curves": fit_n_star_law(n_star(curves, "avg@4")),
        }
        print("\n| n*(C) sigmoid | L | k | log10 C0 | b | R^2 |\n|---|---|---|---|---|---|")
        for name, law in laws.items():
            print(f"| {name} | " + ("n* constant: no sigmoid | | | | |" if law is None else
                  f"{law.L:.2f} | {law.k:.2f} | {law.log10_C0:.2f} | {law.b:.2f} | {law.r2:.3f} |"))
        print()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default="isosim-out", type=Path, help="the --out folder of `isosim reproduce`")
    ap.add_argument("--scale", default="full", choices=("full", "quick"), help="which reproduction's sweeps")
    ap.add_argument("--max-train", type=int, default=None,
                    help="integrate the mean field on this many training problems (a random subset; all by default)")
    a = ap.parse_args()
    main(a.root, a.scale, a.max_train)
