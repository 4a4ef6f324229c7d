"""Write docs/example_pilots.csv and docs/example_pilot_rates.csv: pilot runs of a "user's model"
for `isosim calibrate` (docs/calibrate.md), made with the simulator so that the answer is known.

The user's model is the shared-path surrogate (docs/shared_path_model.toml, the earlier default:
no memorisation, no execution noise) with hidden knobs lr = 0.01, prior_scale = 3, skill_link = 0.4, in a world (data seed 7) that a calibration does not know. Its 500 training
problems have base pass rates drawn from Beta(0.6, 1.6) and measured with 16 samples each
(example_pilot_rates.csv, columns correct and samples); the pilots evaluate avg@1 on 300 further
problems from 4 samples each (as a real evaluation would, noise sd about 0.01). Four pilot runs:
n = 2 and n = 16 at B_problem = 16, two seeds each, to 2^15 rollouts, 12 log-spaced evaluations
(columns run, n, B_problem, step, avg@1). Fixed seeds.
"""
from pathlib import Path

import numpy as np
import pandas as pd

from isosim.calibrate import knobs as K
from isosim.calibrate.config_file import read_model_config
from isosim.sim.population import population_from_pass_rates
from isosim.sim.run import simulate

HIDDEN = {"lr": 0.01, "prior_scale": 3.0, "skill_link": 0.4}

rng = np.random.default_rng(2027)
correct = rng.binomial(16, rng.beta(0.6, 1.6, 500))
val = rng.binomial(16, rng.beta(0.6, 1.6, 300)) / 16
here = Path(__file__).parent
pd.DataFrame({"problem": np.arange(500), "correct": correct, "samples": 16}).to_csv(
    here / "example_pilot_rates.csv", index=False)
cfg = K.apply(read_model_config(here / "shared_path_model.toml").config, HIDDEN).replace(population={"train_size": 500, "val_size": 300},
                                           eval={"ks": (1,), "n_evals": 12, "sampled": 4})
pop = population_from_pass_rates(correct / 16, val, model=cfg.model, seed=7)
rows = []
for n in (2, 16):
    run_cfg = cfg.replace(allocation={"n": n, "b_problem": 16, "budget": 2.0**15, "steps": 0})
    for seed in (0, 1):
        cur = simulate(run_cfg, seed, population=pop).curve("avg@1:sampled")
        rows += [(f"n{n}-s{seed}", n, 16, int(s), round(float(v), 5)) for s, v in zip(cur["step"], cur["value"])]
df = pd.DataFrame(rows, columns=["run", "n", "B_problem", "step", "avg@1"])
df.to_csv(here / "example_pilots.csv", index=False)
print(f"wrote {len(df)} evaluations of {df['run'].nunique()} pilot runs to example_pilots.csv and 500 problems "
      "to example_pilot_rates.csv")
