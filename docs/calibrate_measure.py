"""Measurements behind docs/calibrate.md: mean field or simulator for the calibration's objective.

For a few knob sets, on 500 problems of the hard band (base pass rates uniform in [0, 1/16]) and
on 500 problems with Beta(0.6, 1.6) pass rates, with the pilots' allocations (B_problem 16,
n = 2 and 16, 2^15 rollouts), it prints:

* the mean field's error against the mean of 4 simulated seeds at the pilots' evaluation points
  (RMSE), beside the seed-to-seed standard deviation there;
* the CPU seconds of one evaluation of the objective (both pilot allocations) by the mean field
  and by one simulated seed;
* n*(C) at 16 times the pilots' budget (2^19 rollouts, n = 2 ... 128) from the mean field and
  from the mean of 4 simulated seeds, with the same knobs and world.

    python docs/calibrate_measure.py          # about 5 minutes on one core
"""
from __future__ import annotations

import time

import numpy as np

from isosim.calibrate import knobs as K
from isosim.plan.meanfield import mean_field
from isosim.sim.config import SimConfig
from isosim.sim.population import population_from_pass_rates
from isosim.sim.run import simulate

B, PILOT_NS, PILOT_C, NS, SEEDS = 16, (2, 16), 2**15, (2, 4, 8, 16, 32, 64, 128), 4


def main() -> None:
    rng = np.random.default_rng(0)
    hists = {"hard": rng.uniform(0, 1 / 16, 500), "beta(0.6,1.6)": rng.binomial(16, rng.beta(0.6, 1.6, 500)) / 16}
    knob_sets = [{}, {"lr": 0.003, "prior_scale": 3.0, "skill_link": 0.4}, {"lr": 0.1, "skill_link": 0.2}]
    for name, train in hists.items():
        val = rng.choice(train, 300)
        for knobs in knob_sets:
            cfg = K.apply(SimConfig(), knobs).replace(population={"train_size": 500, "val_size": 300},
                                                      eval={"ks": (1,), "n_evals": 12})
            pop = population_from_pass_rates(train, val, model=cfg.model, seed=0)
            err, sds, t_mf, t_sim = [], [], 0.0, 0.0
            for n in PILOT_NS:
                c = cfg.replace(allocation={"n": n, "b_problem": B, "budget": float(PILOT_C), "steps": 0})
                t = time.process_time()
                mf = mean_field(c, pop).curve("avg@1")
                t_mf += time.process_time() - t
                runs = []
                for s in range(SEEDS):
                    t = time.process_time()
                    cur = simulate(c, s, population=pop).curve("avg@1")
                    t_sim += (time.process_time() - t) / SEEDS
                    runs.append(cur)
                x = runs[0]["compute_rollouts"].to_numpy(float)
                y = np.array([r["value"].to_numpy(float) for r in runs])
                m = np.interp(np.log(np.maximum(x, 1)), np.log(np.maximum(mf["compute_rollouts"].to_numpy(float), 1)),
                              mf["value"].to_numpy(float))
                err.append(m - y.mean(axis=0))
                sds.append(y.std(axis=0, ddof=1))
            e, sd = np.concatenate(err), np.concatenate(sds)
            mf_star, sim_star = n_star(cfg, pop)
            print(f"{name:14s} {str(knobs):50s} mean field RMSE {np.sqrt(np.mean(e**2)):.4f} "
                  f"(max {np.abs(e).max():.4f}), "
                  f"seed sd {np.sqrt(np.mean(sd**2)):.4f}; CPU s per objective: mean field {t_mf:.2f}, "
                  f"one simulated seed {t_sim:.2f}; n*(2^19): mean field {mf_star}, simulator {sim_star}", flush=True)


def n_star(cfg: SimConfig, pop) -> tuple[int, int]:
    """n* at 16x the pilots' budget from the mean field and from the simulated seed mean."""
    target = 16 * PILOT_C
    mf, sim = {}, {}
    for n in NS:
        c = cfg.replace(allocation={"n": n, "b_problem": B, "budget": float(target), "steps": 0},
                        eval={"ks": (1,), "n_evals": 1})
        mf[n] = mean_field(c, pop).final()["avg@1"]
        sim[n] = float(np.mean([simulate(c, 100 + s, population=pop).final("val")["avg@1"] for s in range(SEEDS)]))
    return max(NS, key=lambda n: (mf[n], -n)), max(NS, key=lambda n: (sim[n], -n))


if __name__ == "__main__":
    main()
