"""`isosim calibrate` on simulated pilots from worlds with hidden knobs, with and without the
training reward: the numbers in docs/calibrate.md ("The training reward").

    python docs/calibrate_worlds.py --out docs/calibrate_worlds.json     # the eight worlds, about 30 minutes on 2 cores

Each world is the current default model with some knobs changed (hidden from the calibration,
which starts from the defaults and builds its own problems with another data seed):

- easy-fast: 500 problems (Beta(0.6, 1.6) pass rates measured with 16 samples), lr 0.09, local 240, skill link 0.5;
- easy-memorising: the same problems, lr 0.01, local 2000, prior scale 6;
- easy-slow-memory: the same problems, lr 0.01, local 400, prior scale 6 (the world of
  tests/test_calibrate.py::test_the_training_reward_pins_the_memorisation_speed_of_the_default_model);
- hard: 2,000 hard-band problems (avg@16 <= 1/16 of pass rates uniform on [0, 0.15]), skill link 0.6,
  prior scale 4, lr 0.05;
- held out from the choice of the 'auto' training mode (added after it was chosen on the four
  above): hard-memorising (the hard problems, lr 0.02, local 2000, skill link 0.8) and
  easy-transfer (the easy problems, lr 0.03, local 600, skill link 0.9, prior scale 12);
- easy-stalling and easy-unstalled (added after those two, so also held out): the easy problems
  with Adam's eps at 0.03 and 1e-5 (the default 1e-3): how far the few informative groups left
  at small n still move the policy.

Four fits per world: the validation curves alone, with the training reward always, with the
training reward in the 'auto' mode (kept only when the best fit reproduces it within 1.5 times
its noise, else the validation-only fit), and the auto mode with Adam's eps fitted too.

Pilots: n = 2 and 16 at B_problem 16, 2 seeds each (100, 101), to 2^15 rollouts; validation avg@1
estimated from 4 samples per problem at 40 log-spaced evaluations; the training reward logged
every 4th step as the exact training-set pass rate plus the noise of one batch's mean (sd
sqrt(0.06 / 16 + p (1 - p) / (16 n))). Truth: the simulator's validation avg@1 at 4, 8 and 16
times the pilot budget for n = 2..128, seeds 200-202 (held out from the pilots); its n* is every n
within 2 standard errors of the best. A prediction counts when it is within one doubling of a
simulated n*. Beside the fits: the training reward of the mean field (on the calibration's own
problems) and of the simulator (seed 100 in the pilots' world) at the hidden knobs, at n = 2 and 16.
"""
import argparse
import json
import math
import time

import numpy as np
import pandas as pd

from isosim import SimConfig
from isosim.calibrate import calibrate
from isosim.calibrate import knobs as K
from isosim.sim.population import population_from_pass_rates
from isosim.sim.run import simulate

B, PILOT_NS, PILOT_BUDGET, NS, SAMPLES = 16, (2, 16), 2**15, (2, 4, 8, 16, 32, 64, 128), 4
WORLDS = {
    "easy-fast": ("easy", {"lr": 0.09, "local": 240.0, "skill_link": 0.5}),
    "easy-memorising": ("easy", {"lr": 0.01, "local": 2000.0, "prior_scale": 6.0}),
    "easy-slow-memory": ("easy", {"lr": 0.01, "local": 400.0, "prior_scale": 6.0}),
    "hard": ("hard", {"lr": 0.05, "skill_link": 0.6, "prior_scale": 4.0}),
    # held out: added with the 'auto' training mode, after its rule was chosen on the four above
    "hard-memorising": ("hard", {"lr": 0.02, "local": 2000.0, "skill_link": 0.8}),
    "easy-transfer": ("easy", {"lr": 0.03, "local": 600.0, "skill_link": 0.9, "prior_scale": 12.0}),
    # Adam's eps away from the default 1e-3: small n stalls sooner (larger eps) or later (smaller)
    "easy-stalling": ("easy", {"adam_eps": 0.03}),
    "easy-unstalled": ("easy", {"adam_eps": 1e-5}),
}
#: the worlds added after the 'auto' rule was chosen on the first four
HELD_OUT = ("hard-memorising", "easy-transfer", "easy-stalling", "easy-unstalled")
#: the fourth fit: the auto mode with Adam's eps fitted too
WITH_EPS = (*K.WITH_TRAINING, "adam_eps")


def pass_rates(band: str):
    rng = np.random.default_rng(0)
    if band == "hard":
        def draw(k):
            v = rng.binomial(16, rng.uniform(0, 0.15, 4 * k)) / 16
            return v[v <= 1 / 16][:k]
        return draw(2000), draw(200)
    return rng.binomial(16, rng.beta(0.6, 1.6, 500)) / 16, rng.binomial(16, rng.beta(0.6, 1.6, 200)) / 16


def world(name: str) -> dict:
    band, hidden_knobs = WORLDS[name]
    train, val = pass_rates(band)
    hidden = K.apply(SimConfig(), hidden_knobs).replace(population={"train_size": len(train), "val_size": len(val)},
                                                        eval={"ks": (1,), "n_evals": 40, "sampled": SAMPLES})
    pop = population_from_pass_rates(train, val, model=hidden.model, seed=7)
    noise = np.random.default_rng(5)
    rows, trows = [], []
    for n in PILOT_NS:
        cfg = hidden.replace(allocation={"n": n, "b_problem": B, "budget": float(PILOT_BUDGET), "steps": 0})
        for s in (100, 101):
            tr = simulate(cfg, s, population=pop)
            cur = tr.curve("avg@1:sampled")
            rows += [(f"n{n}-s{s}", n, B, c, v) for c, v in zip(cur["compute_rollouts"], cur["value"])]
            t = tr.curve("avg@1", split="train")
            steps = np.arange(1, cfg.allocation.resolved_steps(cfg.algo) + 1, 4)
            mean = np.interp(np.log(steps), np.log(np.maximum(t["step"].to_numpy(float), 0.5)), t["value"].to_numpy(float))
            sd = np.sqrt(0.06 / B + mean * (1 - mean) / (n * B))
            y = np.clip(mean + noise.normal(0, 1, steps.size) * sd, 0, 1)
            trows += [(f"n{n}-s{s}", n, B, int(st) * n * B, float(v)) for st, v in zip(steps, y)]
    pilots = pd.DataFrame(rows, columns=["run", "n", "B_problem", "compute", "avg@1"])
    training = pd.DataFrame(trows, columns=["run", "n", "B_problem", "compute", "train_reward"])
    budgets = [4 * PILOT_BUDGET, 8 * PILOT_BUDGET, 16 * PILOT_BUDGET]
    truth = []
    for C in budgets:
        vals = {}
        for n in NS:
            cfg = hidden.replace(allocation={"n": n, "b_problem": B, "budget": float(C), "steps": 0},
                                 eval={"ks": (1,), "n_evals": 1, "sampled": 0})
            vals[n] = np.array([simulate(cfg, s, population=pop).final("val")["avg@1"] for s in (200, 201, 202)])
        mean = {n: float(v.mean()) for n, v in vals.items()}
        se2 = {n: float(v.var(ddof=1)) / 3 for n, v in vals.items()}
        best = max(NS, key=lambda n: (mean[n], -n))
        truth.append({"compute": C, "n_star": [n for n in NS if mean[best] - mean[n] <= 2 * math.sqrt(se2[n] + se2[best])],
                      "mean": mean})
    from isosim.calibrate.surrogate import MAX_TRAIN, population_for
    from isosim.plan.meanfield import mean_field

    lead = []
    own = population_for(hidden, train, val, 0)
    for n in PILOT_NS:
        cfg = hidden.replace(allocation={"n": n, "b_problem": B, "budget": float(PILOT_BUDGET), "steps": 0},
                             eval={"ks": (1,), "n_evals": 12, "sampled": 0})
        sim = simulate(cfg, 100, population=pop).curve("avg@1", split="train")
        mf = mean_field(cfg, own, max_train=MAX_TRAIN).curve("avg@1", split="train")
        for c in (2**11, 2**13, 2**15):
            at = [float(np.interp(np.log(c), np.log(np.maximum(d["compute_rollouts"].to_numpy(float), 1.0)),
                                  d["value"].to_numpy(float))) for d in (sim, mf)]
            lead.append({"n": n, "compute": c, "simulated": at[0], "mean_field": at[1]})
    out = {"world": name, "held_out": name in HELD_OUT, "hidden": hidden_knobs, "problems": len(train), "truth": truth, "fits": {},
           "training_reward_at_hidden_knobs": lead}
    for label, tr, mode, knobs in (("validation", None, "always", None),
                                   ("validation+training", training, "always", None),
                                   ("auto", training, "auto", None), ("auto+adam_eps", training, "auto", WITH_EPS)):
        t0 = time.perf_counter()
        cal = calibrate(pilots, train, "avg@1", val_pass_rates=val, training=tr, budget=budgets[-1],
                        training_mode=mode, knobs=knobs)
        pred = cal.predict_n_star(budgets, NS)
        res = []
        for (_, r), t in zip(pred.iterrows(), truth):
            d = min(abs(math.log2(r["n"]) - math.log2(x)) for x in t["n_star"])
            res.append({"compute": t["compute"], "n": int(r["n"]), "n_low": int(r["n_low"]), "n_high": int(r["n_high"]),
                        "doublings_off": d, "regret": max(t["mean"].values()) - t["mean"][int(r["n"])]})
        out["fits"][label] = {"knobs": cal.knobs, "fit_rmse": cal.fit_rmse, "noise_sd": cal.pilot_noise_sd,
                              "training": cal.details.get("training"), "warnings": cal.warnings(pred),
                              "knob_ranges": cal.to_json(pred)["knob_ranges"], "n_star": res,
                              "seconds": round(time.perf_counter() - t0, 1)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the JSON file to write")
    ap.add_argument("--worlds", default=",".join(WORLDS), help="comma-separated world names")
    args = ap.parse_args()
    results = []
    for name in args.worlds.split(","):
        r = world(name)
        results.append(r)
        print(f"## {name} (hidden {r['hidden']}, {r['problems']} problems)")
        for t in r["truth"]:
            print(f"  truth at {t['compute']:.3g}: n* {t['n_star']}")
        print("  training reward at the hidden knobs, simulated / mean field: " + "; ".join(
            f"n {x['n']} C {x['compute']:.3g}: {x['simulated']:.3f} / {x['mean_field']:.3f}"
            for x in r["training_reward_at_hidden_knobs"]))
        for label, f in r["fits"].items():
            knobs = ", ".join(f"{k} {v:.4g}" for k, v in f["knobs"].items())
            tr = f["training"]
            print(f"  {label}: {knobs}; rmse {f['fit_rmse']:.4f} (noise {f['noise_sd']:.4f})"
                  + (f", training misfit {tr['fit_ratio']:.2f}x its noise" + ("" if tr["used"] else ", set aside")
                     if tr else "") + f"; {f['seconds']} s")
            for p in f["n_star"]:
                print(f"    C {p['compute']:.3g}: n* {p['n']} [{p['n_low']}, {p['n_high']}], {p['doublings_off']:.0f} "
                      f"doublings off, regret {p['regret']:.4f}")
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
