"""What makes a problem hard in the generator, and can memorisation take from other problems?

Two structures the package does not offer, probed as hard_probes.py probes (the strategies
generator changed in this process only):

* **intrinsic difficulty** ``tau``: which strategies solve problem i is decided against a threshold
  shifted by ``delta_i ~ N(0, tau^2)``, ``Y[i, s] = 1{sqrt(rho) (z_i W)_s + sqrt(1 - rho) e_is >
  Phi^-1(1 - q_s) + delta_i}``, so some problems have few solvers whatever the base policy does
  (``tau`` = 0 is the package default, where every problem's share of solvers has the same law);
* **memorisation through shared parameters** (``keys``, ``key_scale``): every problem gets a random
  key ``k_i ~ N(0, key_scale^2 I_keys)`` appended to its embedding, so the shared map ``V`` gains
  ``keys`` rows that store problem-specific answers in superposition. Memorising a training problem
  there moves every other problem's logits along its key: a finite memory whose use interferes,
  the mechanism the study names for the small-set train-test gap and for forgetting.

Also the base-skill probe ``c`` of hard_probes.py, and model knobs where a row names them.

Measured per row, calibration world 1, training seed 0, B_problem 32, 2^22 rollouts, validation
avg@4 (best over the run unless said otherwise):

* ``*_base``: before training; ``*_solvers``: the mean share of strategies that solve a validation
  problem; ``*_random``: the value of a uniformly random strategy choice, ``mean_i e_i *
  solvers_i`` (what a policy reaches once its problem-specific preferences are washed out);
* ``easy_n*``, ``hard_n*``: best value per n;
* ``d500_n*``: easy with D = 500 training problems, ``peak@log2(C) -> value at the end``, and the
  training reward at the end (``tr``);
* ``hard_only_easy``: training on hard problems only, validation on easy problems: before
  training -> at the end (n = 32). Below its start is forgetting.

No finding is evaluated here. About 10-20 s per row on 2 cores.

    python paper_figures/hard_structure.py [--out paper_figures/hard_structure.md]
"""
from __future__ import annotations

import argparse
from statistics import NormalDist

import numpy as np
from calibrate_confidence import _table, write_report
from hard_probes import WORLD, Probe, measure_rows

import isosim.sim.models.strategies as strategies
from isosim import SimConfig, build_population, simulate
from isosim.sim.models.base import Problems, execution_rates

BUDGET = 2**22
#: (label, probe settings, model knobs)
ROWS = (
    ("package default", {}, {}),
    ("difficulty 1", {"tau": 1.0}, {}),
    ("difficulty 2", {"tau": 2.0}, {}),
    ("difficulty 1, local 480", {"tau": 1.0}, {"local": 480.0}),
    ("difficulty 1, local 0", {"tau": 1.0}, {"local": 0.0}),
    ("difficulty 3, prior and embed spread 4", {"tau": 3.0}, {"prior_scale": 4.0, "embed_scale": 4.0}),
    ("memory 32 keys, scale 5", {"keys": 32, "key_scale": 5.0}, {}),
    ("memory 32 keys, scale 10", {"keys": 32, "key_scale": 10.0}, {}),
    ("memory 32 keys, scale 30", {"keys": 32, "key_scale": 30.0}, {}),
    ("difficulty 2, memory 32 keys, scale 10", {"tau": 2.0, "keys": 32, "key_scale": 10.0}, {}),
    ("base skill 0.6, difficulty 2, generality Beta(0.5, 12)", {"c": 0.6, "tau": 2.0}, {"generality_b": 12.0}),
    ("base skill 0.6, difficulty 2, generality Beta(0.5, 12), memory 32 keys, scale 10",
     {"c": 0.6, "tau": 2.0, "keys": 32, "key_scale": 10.0}, {"generality_b": 12.0}),
)


class Structure(Probe):
    """hard_probes.py's probe plus intrinsic difficulty and a shared key memory (module docstring).
    Their draws come from generators of their own, so the default's problems are unchanged."""

    def __init__(self, tau: float = 0.0, keys: int = 0, key_scale: float = 0.0, **probe):
        super().__init__(**probe)
        self.tau, self.keys, self.key_scale = tau, keys, key_scale
        self.saved["draw"] = strategies.draw
        self.rng_tau, self.rng_keys = np.random.default_rng(4242), np.random.default_rng(777)

    def changes_solvers(self) -> bool:
        """Whether this probe decides ``Y`` itself (else the probes below it do)."""
        return self.tau != 0

    def score(self, cfg, world, rng, z, skill=None):
        """The solver score ``sqrt(rho) (z_i W)_s + sqrt(1 - rho) e_is`` that ``Y`` thresholds
        (``skill``: another skill term in place of ``z_i W``)."""
        rho = cfg.skill_link
        zw = z @ world["W"] if skill is None else skill
        return np.sqrt(rho) * zw + np.sqrt(1.0 - rho) * rng.normal(size=zw.shape)

    def solves(self, cfg, world, rng, z):
        if not self.changes_solvers() or "W" not in world:
            return super().solves(cfg, world, rng, z)
        score = self.score(cfg, world, rng, z)
        threshold = np.array([NormalDist().inv_cdf(1.0 - x) for x in world["generality"]])[None, :]
        if self.tau:
            threshold = threshold + self.rng_tau.normal(0.0, self.tau, (z.shape[0], 1))
        return (score > threshold).astype(float)

    def draw(self, cfg, world, rng, size):
        p = self.saved["draw"](cfg, world, rng, size)
        if not self.keys:
            return p
        keys = self.key_scale * self.rng_keys.normal(size=(size, self.keys))
        return Problems(p.base_logits, np.hstack([p.features, keys]), p.rewards, p.execution)


def run_cell(model: dict, band: str, n: int, budget: float, population: dict | None = None, train: bool = False):
    """One run in calibration world ``WORLD``, training seed 0, B_problem 32, under whatever probe is
    active: its trace and its population."""
    cfg = SimConfig().replace(population={"preset": band, "seed": WORLD, **(population or {})}, model=model,
                              allocation={"n": n, "b_problem": 32, "budget": budget}, eval={"train_split": train})
    pop = build_population(cfg.population, cfg.model)
    return simulate(cfg, 0, population=pop), pop


def _run(probe: dict, model: dict, band: str, n: int, population: dict | None = None, train: bool = False):
    with Structure(**probe):
        return run_cell(model, band, n, BUDGET, population, train)


def _curve(trace, split: str = "val") -> tuple[np.ndarray, np.ndarray]:
    c = trace.curve("avg@4", split)
    c = c[c["compute_rollouts"] > 0]
    return c["compute_rollouts"].to_numpy(float), c["value"].to_numpy(float)


def row(label: str, probe: dict, model: dict) -> dict:
    out = {"probe": label}
    for band, ns in (("easy", (8, 128, 512)), ("hard", (8, 32, 128))):
        for n in ns:
            trace, pop = _run(probe, model, band, n)
            if n == ns[0]:
                val = pop.val.problems
                solvers = val.rewards.mean(axis=1)
                e = execution_rates(val.execution) if val.execution is not None else 1.0
                out[f"{band}_base"] = round(float(pop.val.base_pass.mean()), 3)
                out[f"{band}_solvers"] = round(float(solvers.mean()), 3)
                out[f"{band}_random"] = round(float(np.mean(e * solvers)), 3)
            out[f"{band}_n{n}"] = round(float(_curve(trace)[1].max()), 3)
    for n in (8, 512):
        trace, _ = _run(probe, model, "easy", n, {"train_size": 500}, train=True)
        c, v = _curve(trace)
        i = int(np.argmax(v))
        out[f"d500_n{n}"] = f"{v[i]:.3f}@{np.log2(c[i]):.1f} -> {v[-1]:.3f}, tr {_curve(trace, 'train')[1][-1]:.2f}"
    trace, _ = _run(probe, model, "hard", 32, {"val_mixture_weights": (("easy", 1.0),)})
    v = trace.curve("avg@4", "val")["value"].to_numpy(float)
    out["hard_only_easy"] = f"{v[0]:.3f} -> {v[-1]:.3f}"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="paper_figures/hard_structure.md", help="the report")
    args = ap.parse_args(argv)
    rows, took = measure_rows(ROWS, row)
    write_report(args.out, [
        "# What makes a problem hard, and memorisation that takes from other problems "
        "(generated by `python paper_figures/hard_structure.py`)", "",
        f"Calibration world {WORLD}, training seed 0, one run per cell, B_problem 32, 2^22 rollouts, validation "
        "avg@4; every knob the package default's unless the row says otherwise. The script's docstring defines "
        "each probe and column.", "",
        _table(rows), "", f"Wall time {took:.0f} s.", ""])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
