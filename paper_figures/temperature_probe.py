"""A probe of a learned confidence of the base policy: does it give forgetting, a small-set decline or
the split between sharpening and coverage?

The measured tension behind findings 8 and 12 (structure_search.md, FINDINGS.md) is that
interference in the strategies model is a perturbation of the shared logits: it lowers reward where
the policy beats a random choice of strategy (easy problems) and raises it where it does worse
(hard ones). A learned *confidence* turns that tension into a mechanism. The policy of problem i
becomes

    logits_i = exp(ts * theta) * L0_i + bs * beta + vs * z_i V + us * u_i

with one shared scalar ``theta`` (0 at the start) and its path scale ``ts``. Its gradient is
``ts exp(ts theta) sum_i sum_s g_is L0_is`` over the batch's logit gradients ``g``: positive where
the rollouts that beat their group are the ones the base policy already favours (easy problems:
the base sharpens), negative where they are the ones it does not (hard problems: the base
flattens, more coverage). Training on hard problems alone should then flatten easy problems'
base preferences too, and a memorised small training set keep sharpening held-out ones.

The probe runs the package's NumPy twin of the training step (:mod:`isosim.sim.twin`) with
``theta`` added: the twin's source, rewritten in this process (each rewrite asserted, so a change
of the twin stops the probe instead of changing it silently), with ``theta`` stepped by the same
optimiser as ``beta`` and ``V``. With ``ts`` 0 it is the package's twin, which matches the Numba
kernel to the last bits (the twin test), and the first row reproduces structure_search.md's
``package default`` row. Nothing in the package changes. Candidates: ``ts`` 0, 0.01, 0.05 and 0.2,
and 0.05 and 0.2 with one shared path (``beta`` or ``V``) switched off in learning
(structure_search.py's ``off``), since each of them alone carries a gain from hard problems to
easy ones that the flattening would have to outweigh.

Per candidate (calibration world 1, training seed 0, one run per cell: a reading, not a verdict):
the columns of structure_search.py (levels on both bands at 2^22 rollouts; easy at D = 500,
n = 2048; hard-only training validated on easy and very-easy, n = 32 and 512, 2^23), the
``theta`` each run ends with, and finding 3's readings at B_problem 128, 2^21 rollouts,
n = 8, 64, 512 on easy and hard: which n has the best final worst@4 (sharpening) and which the
best best@4 (coverage); the study's split is a larger n for best@4 than for worst@4 on hard.

    python paper_figures/temperature_probe.py [--journal paper_figures/temperature_probe.jsonl]
        [--out paper_figures/temperature_probe.md] [--workers 2]
"""
from __future__ import annotations

import inspect
import types

import numpy as np
from calibrate_confidence import _table
from hard_probes import STUDY, WORLD
from structure_search import LEVELS, MARGIN, Style, _curve, _declines, _forgets, _label, _row, finish_search, run_search

import isosim.sim.twin as twin
from isosim import SimConfig, build_population, simulate

#: the candidates, ``[probe, model knobs]``: theta's path scale ``temperature`` (0: the package's
#: model), alone and with one shared path switched off in learning (structure_search.py's ``off``:
#: which path carries what hard-only training gives easy problems, against which the flattening
#: would have to win); then the paths off without theta, and the skill map off with a larger
#: shared scale or temperature
CANDIDATES = (tuple([{"temperature": ts}, {}] for ts in (0.0, 0.01, 0.05, 0.2))
              + tuple([{"temperature": ts, "off": off}, {}] for ts in (0.05, 0.2) for off in ("beta", "v"))
              + tuple([{"temperature": 0.0, "off": off}, {}] for off in ("beta", "v"))
              + tuple([{"temperature": 0.2, "off": "v"}, {"shared": sh}] for sh in (0.1, 0.15))
              + ([{"temperature": 0.5, "off": "v"}, {}],))
#: finding 3's readings: B_problem, budget, n
F3_B_PROBLEM, F3_BUDGET, F3_N = 128, 2.0**21, (8, 64, 512)

_REWRITES = (
    ("from .kernels import", "from isosim.sim.kernels import"),
    ("        logits = L0[idx] + bs * beta[None, :]", "        sc = _scale()\n        logits = sc * L0[idx] + bs * beta[None, :]"),
    ("        tglob = counters[C_ADAM_T]\n",
     "        tglob = counters[C_ADAM_T]\n"
     "        if TEMP['ts'] > 0:\n"
     "            th = np.array([TEMP['theta']]); mt = np.array([TEMP['m']]); vt = np.array([TEMP['v']])\n"
     "            _adam(th, mt, vt, np.array([TEMP['ts'] * sc * float((G * L0[idx]).sum())]),\n"
     "                  lr, b1, b2, aeps, wd, tglob, opt)\n"
     "            TEMP['theta'], TEMP['m'], TEMP['v'] = float(th[0]), float(mt[0]), float(vt[0])\n"),
    ("    logits = L0 + bs * beta[None, :] + vs * (Z @ V)", "    logits = _scale() * L0 + bs * beta[None, :] + vs * (Z @ V)"),
)


def _temperature_twin() -> types.ModuleType:
    """The package's twin with ``theta`` (module docstring), built from its source in this process."""
    src = inspect.getsource(twin)
    for old, new in _REWRITES:
        assert src.count(old) == 1, f"the twin changed: {old!r} is not found once"
        src = src.replace(old, new)
    mod = types.ModuleType("temperature_twin")
    mod.TEMP = {"ts": 0.0, "theta": 0.0, "m": 0.0, "v": 0.0}
    exec(compile(src, "<temperature twin>", "exec"), mod.__dict__)
    mod._scale = lambda: float(np.exp(mod.TEMP["ts"] * mod.TEMP["theta"]))
    return mod


_TWIN = _temperature_twin()


def run(ts: float, model: dict, band: str, n: int, budget: float, b_problem: int = 32,
        population: dict | None = None, train: bool = False):
    """One run with ``theta``'s path scale ``ts`` in calibration world ``WORLD``, training seed 0: its
    trace, its population and the ``theta`` it ends with."""
    _TWIN.TEMP.update(ts=ts, theta=0.0, m=0.0, v=0.0)
    saved = twin.train_steps, twin.evaluate
    twin.train_steps, twin.evaluate = _TWIN.train_steps, _TWIN.evaluate
    try:
        cfg = SimConfig().replace(population={"preset": band, "seed": WORLD, **(population or {})}, model=model,
                                  allocation={"n": n, "b_problem": b_problem, "budget": budget},
                                  eval={"train_split": train})
        pop = build_population(cfg.population, cfg.model)
        trace = simulate(cfg, 0, population=pop, backend="numpy")
    finally:
        twin.train_steps, twin.evaluate = saved
    return trace, pop, round(_TWIN.TEMP["theta"], 2)


def measure(spec: list[dict]) -> dict:
    probe, model = spec
    with Style(**{k: v for k, v in probe.items() if k != "temperature"}):
        return _measure(probe, model)


def _measure(probe: dict, model: dict) -> dict:
    ts = probe["temperature"]
    out = {"probe": probe, "model": model, "theta": {}}
    for band, ns in (("easy", (8, 128, 512)), ("hard", (8, 32, 128, 512))):
        for n in ns:
            trace, pop, th = run(ts, model, band, n, 2**22)
            if n == ns[0]:
                out[f"{band}_base"] = round(float(pop.val.base_pass.mean()), 3)
            out[f"{band}_n{n}"] = round(float(_curve(trace)[1].max()), 3)
            out["theta"][f"{band}_n{n}"] = th
    trace, _, th = run(ts, model, "easy", 2048, 2**23, population={"train_size": 500}, train=True)
    c, v = _curve(trace)
    t = _curve(trace, "train")[1]
    i = int(np.argmax(v))
    out["d500_n2048"] = [round(float(v[i]), 3), round(float(np.log2(max(c[i], 1.0))), 1), round(float(v[-1]), 3),
                         round(float(t[-1] - t[i]), 3)]
    out["theta"]["d500_n2048"] = th
    for band in ("easy", "very-easy"):
        for n in (32, 512):
            trace, _, th = run(ts, model, "hard", n, 2**23, population={"val_mixture_weights": ((band, 1.0),)})
            v = _curve(trace)[1]
            out[f"hard_only_{band}_n{n}"] = [round(float(v[0]), 3), round(float(v[-1]), 3)]
            out["theta"][f"hard_only_{band}_n{n}"] = th
    for band in ("easy", "hard"):
        for n in F3_N:
            trace, _, th = run(ts, model, band, n, F3_BUDGET, b_problem=F3_B_PROBLEM)
            f = trace.final("val")
            out[f"f3_{band}_n{n}"] = {m: round(float(f[m]), 4) for m in ("avg@4", "best@4", "worst@4")}
            out["theta"][f"f3_{band}_n{n}"] = th
    out["score"] = round(float(np.sqrt(np.mean([(out[k] - STUDY[k]) ** 2 for k in LEVELS]))), 4)
    return out


def _f3_row(r: dict) -> dict:
    row = {"candidate": _label(r["probe"], r["model"])}
    for band in ("easy", "hard"):
        cells = {n: r[f"f3_{band}_n{n}"] for n in F3_N}
        for m in ("worst@4", "best@4"):
            row[f"{band} {m}: n = " + ", ".join(map(str, F3_N))] = ", ".join(f"{cells[n][m]:.4f}" for n in F3_N)
        best = {m: max(F3_N, key=lambda n: cells[n][m]) for m in ("worst@4", "best@4")}
        row[f"{band}: n* worst@4 / best@4"] = f"{best['worst@4']} / {best['best@4']}"
    return row


def _theta_row(r: dict) -> dict:
    th = r["theta"]
    return {"candidate": _label(r["probe"], r["model"]),
            "easy n8, 128, 512": ", ".join(f"{th[f'easy_n{n}']:g}" for n in (8, 128, 512)),
            "hard n8, 32, 128, 512": ", ".join(f"{th[f'hard_n{n}']:g}" for n in (8, 32, 128, 512)),
            "easy D = 500, n2048": f"{th['d500_n2048']:g}",
            "hard-only n32, n512": ", ".join(f"{th[f'hard_only_easy_n{n}']:g}" for n in (32, 512))}


def main(argv=None) -> int:
    started = run_search("temperature_probe", __doc__, measure, CANDIDATES, argv)
    if started is None:
        return 2
    args, rows, todo, t0 = started
    forgets = [_label(r["probe"], r["model"]) for r in rows if _forgets(r, "easy") or _forgets(r, "very-easy")]
    declines = [_label(r["probe"], r["model"]) for r in rows if _declines(r)]
    lines = ["# A learned confidence of the base policy (generated by `python paper_figures/temperature_probe.py`)", "",
             f"Calibration world {WORLD}, training seed 0, one run per cell (a reading, not a verdict); `temperature` is "
             "the path scale `ts` of the shared scalar theta (the script's docstring), 0 the package's model. Every "
             "other knob is the package default's. Columns as in structure_search.md.", "",
             f"Forgetting (every n of the hard-only runs ends more than {MARGIN} below the start) on easy or very-easy: "
             f"{'; '.join(forgets) or 'none'}; a decline of the largest n at D = 500: {'; '.join(declines) or 'none'}.",
             "",
             "## Levels, the small set and hard-only training", "", _table([_row(r) for r in rows]), "",
             "## Finding 3's readings (B_problem 128, 2^21 rollouts, final validation)", "",
             _table([_f3_row(r) for r in rows]), "",
             "## theta at the end of each run (the base logits are scaled by exp(temperature * theta))", "",
             _table([_theta_row(r) for r in rows]), ""]
    finish_search(args.out, lines, len(CANDIDATES), todo, t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
