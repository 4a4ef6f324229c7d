"""The study's twelve findings (numbered as in issue 4), each checked from stored sweeps.

Every finding names the sweeps it reads (plain :class:`~isosim.experiments.sweep.SweepSpec` data, at a
``full`` and a ``quick`` scale), a check that turns their results into ``holds`` and the
evidence behind it, its mechanism and the ablation that switches the mechanism off.
Nothing is hard-coded: :func:`check_findings` recomputes every number from the store.

The checks read the validation split unless a model cannot transfer (no shared path:
``tabular``, or ``shared = 0``); those read the training split, where learning happens.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ...sim.config import SimConfig
from ...errors import IsosimInputError
from ..sweep import POWERS_OF_TWO, SweepSpec, evaluations, run_sweep

METRIC = "avg@4"


# --- the sweeps (plain data) --------------------------------------------------------------

@dataclass(frozen=True)
class Scale:
    """How big the finding sweeps are: ``full`` (the report) or ``quick`` (CI, ``--quick``)."""

    name: str
    n: tuple[int, ...]
    budget: float
    seeds: tuple[int, ...]
    q2_n: tuple[int, ...]
    q2_steps: tuple[int, ...]
    b_problems: tuple[int, ...]
    baseline_b_problem: int


SCALES = {
    "full": Scale("full", POWERS_OF_TWO, 2.0**23, (0, 1, 2, 3), (2, 4, 8, 16, 32, 64, 128, 256),
                  (16, 32, 64, 128, 256, 512, 1024), (16, 32, 64, 128, 256), 128),
    "quick": Scale("quick", (2, 8, 32, 128, 512, 2048), 2.0**22, (0, 1), (2, 8, 32, 128),
                   (16, 64, 256, 1024), (16, 32, 64, 128), 32),
}

#: the dose of interference: the scale of the shared path beside per-problem offsets (local = 1)
DOSES = (0.0, 0.5, 1.0)
HIST_BINS = 10


def _base(preset: str = "easy", **sections: dict) -> SimConfig:
    cfg = SimConfig().replace(population={"preset": preset})
    return cfg.replace(**sections) if sections else cfg


def _q1(sid: str, base: SimConfig, sc: Scale, n=None, b_problem=(32,), budget=None, seeds=None) -> SweepSpec:
    return SweepSpec(f"f-{sid}-{sc.name}", "Q1", base, n=tuple(n or sc.n), b_problem=tuple(b_problem),
                     budget=float(budget or sc.budget), seeds=tuple(seeds or sc.seeds))


def sweep_specs(scale: str = "full") -> dict[str, SweepSpec]:
    """Every sweep the findings read, by name."""
    sc = SCALES[scale]
    mix2 = (("hard", 0.5), ("easy", 0.5))
    mix3 = (("hard", 0.5), ("easy", 0.25), ("very-easy", 0.25))
    val3 = (("hard", 1 / 3), ("easy", 1 / 3), ("very-easy", 1 / 3))
    bb = sc.baseline_b_problem
    m_base = int(sc.budget // (256 * 32))  # steps of the n = 256 baseline run at B_problem = 32
    specs = {
        "easy": _q1("easy", _base("easy"), sc),
        "hard": _q1("hard", _base("hard"), sc),
        "extremely-hard": _q1("xhard", _base("extremely-hard"), sc),
        "easy-drgrpo": _q1("easy-drgrpo", _base("easy", algo={"advantage": "drgrpo"}), sc),
        "hard-drgrpo": _q1("hard-drgrpo", _base("hard", algo={"advantage": "drgrpo"}), sc),
        "easy-tabular": _q1("easy-tabular", _base("easy", model={"kind": "tabular"}), sc),
        "q2-easy": SweepSpec(f"f-q2-easy-{sc.name}", "Q2", _base("easy"), n=sc.q2_n, total_batch=4096,
                             steps=sc.q2_steps, seeds=sc.seeds),
        "q2-easy-no-interference": SweepSpec(
            f"f-q2-easy-local-{sc.name}", "Q2", _base("easy", model={"shared": 0.0, "local": 1.0}), n=sc.q2_n,
            total_batch=4096, steps=sc.q2_steps, seeds=sc.seeds),
        "easy-b-problem": _q1("easy-bp", _base("easy"), sc, n=(16,), b_problem=sc.b_problems),
        "easy-d500": _q1("easy-d500", _base("easy", population={"train_size": 500}), sc),
        "baseline-n64": _q1("baseline-n64", _base("easy"), sc, n=(64,), b_problem=(bb,), budget=m_base * 64 * bb),
        "baseline-n256": _q1("baseline-n256", _base("easy"), sc, n=(256,), b_problem=(bb,), budget=m_base * 256 * bb),
        "baseline-decoupled": _q1("baseline-dec", _base("easy", algo={"baseline_n": 256}), sc, n=(64,),
                                  b_problem=(bb,), budget=m_base * 256 * bb),
        "hist-hard": _q1("hist-hard", _base("hard", eval={"hist_bins": HIST_BINS}), sc, n=(4, 32, 256)),
        "hist-hard-no-interference": _q1(
            "hist-hard-local", _base("hard", model={"shared": 0.0, "local": 1.0}, eval={"hist_bins": HIST_BINS}),
            sc, n=(4, 32, 256)),
        "mix-hard-easy": _q1("mix2", _base("mixture", population={"mixture_weights": mix2}), sc),
        "mix-hard-easy-very-easy": _q1("mix3", _base("mixture", population={"mixture_weights": mix3}), sc),
        "hard-only-val-mix": _q1("hard-valmix", _base("hard", population={"val_mixture_weights": val3}), sc),
        "mix3-val-mix": _q1("mix3-valmix", _base("mixture", population={"mixture_weights": mix3,
                                                                        "val_mixture_weights": val3}), sc),
    }
    for rule in ("sqrt", "constant", "linear"):
        specs[f"lr-{rule}"] = _q1(f"lr-{rule}", _base("easy", algo={"lr_rule": rule}), sc, n=(256,))
    for dose in DOSES:
        specs[f"dose-{dose:g}"] = _q1(f"dose-{dose:g}", _base("easy", model={"shared": dose, "local": 1.0}), sc)
    return specs


# --- reading results ----------------------------------------------------------------------

class Results:
    """Sweep results by name, run (resumably) into ``root/<spec id>`` on first use.

    ``run=False`` only reads stored sweeps; ``replicates`` keeps only those seeds' runs."""

    def __init__(self, root: str | Path, scale: str = "full", run: bool = True, progress: bool = False,
                 workers: int | None = None, backend: str = "local", address: str | None = None,
                 replicates: tuple[int, ...] | None = None):
        self.root, self.run = Path(root), run
        self.replicates = replicates  # read only these replicates (seed-stability checks)
        self.specs = sweep_specs(scale)
        self.kw = dict(progress=progress, workers=workers, backend=backend, address=address)
        self._cache: dict[tuple[str, str], pd.DataFrame] = {}
        self._laws: dict[tuple[str, str], dict[str, Any]] = {}

    def ensure(self, names=None) -> None:
        for name in names or self.specs:
            self.raw(name)

    def raw(self, name: str) -> pd.DataFrame:
        if (name, "") not in self._cache:
            spec = self.specs[name]
            folder = self.root / spec.id
            if self.run:
                store = run_sweep(spec, folder, **self.kw)
            else:
                from ..store import RunStore

                if not folder.is_dir():
                    raise IsosimInputError(f"no stored sweep {spec.id} under {self.root}: run `isosim figures` first")
                store = RunStore.load(folder)
            table = store.read()
            if self.replicates is not None:
                table = table[table["replicate"].isin(self.replicates)].reset_index(drop=True)
            self._cache[(name, "")] = table
        return self._cache[(name, "")]

    def evals(self, name: str, split: str = "val") -> pd.DataFrame:
        if (name, split) not in self._cache:
            self._cache[(name, split)] = evaluations(self.raw(name), split=split)
        return self._cache[(name, split)]

    def law(self, name: str, split: str = "val") -> dict[str, Any]:
        """:func:`n_star_law` of a sweep's split, fitted once and shared by checks and figures."""
        if (name, split) not in self._laws:
            self._laws[(name, split)] = n_star_law(self.evals(name, split))
        return self._laws[(name, split)]


# --- small analysis helpers ----------------------------------------------------------------

def last_evaluations(ev: pd.DataFrame, compute: float = math.inf) -> pd.DataFrame:
    """Each run's last evaluation at or below ``compute`` rollouts (default: its last)."""
    d = ev[ev["compute"] <= compute]
    return d[d["compute"] == d.groupby("run")["compute"].transform("max")]


def final_by(ev: pd.DataFrame, metric: str = METRIC, by=("n",)) -> pd.Series:
    """Mean (over replicates) of ``metric`` at each run's last evaluation, per ``by``."""
    return last_evaluations(ev).groupby(list(by))[metric].mean()


def _final_se(ev: pd.DataFrame, metric: str = METRIC) -> float:
    """Typical standard error of a per-n final mean: pooled replicate sd / sqrt(replicates)."""
    g = last_evaluations(ev).groupby("n")[metric]
    if g.count().min() < 2:
        return float("nan")
    return float(np.sqrt(g.var().mean() / g.count().mean()))


def _argmax(s: pd.Series) -> int:
    return int(s.idxmax())


def n_star_table(ev: pd.DataFrame, metric: str = METRIC) -> pd.DataFrame:
    """n*(C) from the envelope of per-n reward curves, without a scaling law
    (:func:`isosim.analysis.frontier.compute_optimal` on the evaluations with compute > 0)."""
    from ...analysis.frontier import compute_optimal

    d = ev.assign(value=ev[metric])[["run", "n", "B_problem", "compute", "value"]]
    return compute_optimal(d[d["compute"] > 0], group=("n",))


def fit_n_star(ev: pd.DataFrame, metric: str = METRIC, n_boot: int = 0, seed: int = 0):
    """``(analysis, n_star, error)``: :func:`isosim.analysis.fit.analyse_runs`, or, when no law can be
    fitted, ``(None, n_star_table(ev), reason)``."""
    from ...analysis.fit import analyse_runs

    try:
        an = analyse_runs(ev, metric=metric, n_boot=n_boot, seed=seed)
    except IsosimInputError as exc:
        return None, n_star_table(ev, metric), str(exc)
    return an, an.n_star, None


def n_star_law(ev: pd.DataFrame, metric: str = METRIC) -> dict[str, Any]:
    """n*(C) and its sigmoid fit, or the reason there is none."""
    an, ns, error = fit_n_star(ev, metric)
    if an is None:
        return {"fitted": False, "fit": None, "error": error, "n_star_top": int(ns["n"].iloc[-1]),
                "n_star_min": int(ns["n"].min()), "n_star_max": int(ns["n"].max()), "n_star": ns}
    law = an.law
    return {"fitted": True, "fit": law, "L": law.L, "k": law.k, "log10_C0": law.log10_C0, "b": law.b, "r2": law.r2,
            "saturation_log2": law.saturation, "n_star_top": int(ns["n"].iloc[-1]),
            "n_star_min": int(ns["n"].min()), "n_star_max": int(ns["n"].max()), "n_star": ns}


def _public(d: dict) -> dict:
    """Evidence as JSON-ready numbers (tables dropped, floats rounded)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, pd.DataFrame) or k == "fit":
            continue
        if isinstance(v, dict):
            out[k] = _public(v)
        elif isinstance(v, (float, np.floating)):
            out[k] = None if not math.isfinite(v) else round(float(v), 4)
        elif isinstance(v, (np.integer,)):
            out[k] = int(v)
        elif isinstance(v, (np.bool_,)):
            out[k] = bool(v)
        else:
            out[k] = v
    return out


def _series(s: pd.Series) -> dict:
    return {str(k if not isinstance(k, tuple) else "/".join(map(str, k))): round(float(v), 4) for k, v in s.items()}


# --- the checks ------------------------------------------------------------------------------

def _rise(law: dict, ns_tested) -> dict:
    ok = law["fitted"] and law["k"] > 0 and law["L"] >= 2 and law["r2"] >= 0.7
    return {"rises": bool(ok), "saturates_below_max_n": bool(law["n_star_max"] < max(ns_tested))}


def check_1(r: Results) -> tuple[bool, dict]:
    ev = r.evals("easy")
    law = r.law("easy")
    rise = _rise(law, r.specs["easy"].n)
    abl = r.law("dose-0", "train")
    ev_abl = {"n_star_top": abl["n_star_top"], "n_star_max": abl["n_star_max"], "fitted": abl["fitted"]}
    return rise["rises"] and rise["saturates_below_max_n"], {**law, **rise, "final_by_n": _series(final_by(ev)),
                                                           "ablation_no_interference_train": ev_abl}


def check_2(r: Results) -> tuple[bool, dict]:
    easy, hard = r.law("easy"), r.law("hard")
    rise = _rise(hard, r.specs["hard"].n)
    sat = {p: math.log2(x["n_star_top"]) for p, x in (("easy", easy), ("hard", hard))}
    lower = sat["hard"] <= sat["easy"] - 1
    zero = {}
    for name in ("easy", "hard"):
        t = r.raw(name)
        t = t[(t["metric"] == "zero_var_frac") & (t["step"] > 0)]
        zero[name] = _series(t.groupby("n")["value"].mean())
    return rise["rises"] and lower, {"hard": hard, **{f"hard_{k}": v for k, v in rise.items()},
                                     "log2_n_star_top": sat, "hard_saturates_lower": lower,
                                     "zero_signal_share_by_n": zero}


def _mechanism(ev: pd.DataFrame) -> dict:
    worst, best = final_by(ev, "worst@4"), final_by(ev, "best@4")
    return {"n_best_worst@4": _argmax(worst), "n_best_best@4": _argmax(best),
            "worst@4": _series(worst), "best@4": _series(best), "se_worst@4": _final_se(ev, "worst@4"),
            "se_best@4": _final_se(ev, "best@4")}


def check_3(r: Results) -> tuple[bool, dict]:
    easy, hard, xh = (_mechanism(r.evals(p)) for p in ("easy", "hard", "extremely-hard"))
    sharpening = easy["n_best_worst@4"] > easy["n_best_best@4"]
    coverage = hard["n_best_best@4"] > hard["n_best_worst@4"]
    ns = sorted(r.specs["extremely-hard"].n)
    xw = pd.Series(xh["worst@4"]).rename(index=int)
    x_ok = (xh["n_best_best@4"] >= ns[-3] and ns[0] < xh["n_best_worst@4"] < ns[-1]
            and xw[ns[-1]] < xw.max())
    abl = {p: _mechanism(r.evals(f"{p}-drgrpo")) for p in ("easy", "hard")}
    abl_summary = {p: {"n_best_worst@4": a["n_best_worst@4"], "n_best_best@4": a["n_best_best@4"]}
                   for p, a in abl.items()}
    return sharpening and coverage and x_ok, {
        "easy": easy, "hard": hard, "extremely_hard": xh, "easy_sharpening": sharpening,
        "hard_coverage": coverage, "extremely_hard_pattern": x_ok, "ablation_no_std_scaling": abl_summary}


def fixed_batch_trend(ev: pd.DataFrame) -> dict:
    from scipy.stats import spearmanr

    from ...analysis.fixed_batch import best_split

    t = best_split(ev, METRIC)
    rho_n = spearmanr(t["M"], t["n"]).statistic if t["n"].nunique() > 1 else 0.0
    rho_b = spearmanr(t["M"], t["B_problem"]).statistic if t["B_problem"].nunique() > 1 else 0.0
    return {"M": t["M"].astype(int).tolist(), "n_star": t["n"].astype(int).tolist(),
            "B_problem_star": t["B_problem"].astype(int).tolist(), "spearman_n": float(rho_n),
            "spearman_B_problem": float(rho_b),
            "rises": bool(rho_n > 0 and t["n"].iloc[-1] > t["n"].iloc[0])}


def check_4(r: Results) -> tuple[bool, dict]:
    main = fixed_batch_trend(r.evals("q2-easy"))
    abl = fixed_batch_trend(r.evals("q2-easy-no-interference", "train"))
    return main["rises"], {**main, "ablation_no_interference_train": abl}


def check_5(r: Results) -> tuple[bool, dict]:
    from ...analysis.frontier import sensitivity

    top = float(r.specs["easy"].budget)
    rows = []
    for name in ("easy", "easy-b-problem"):
        last = last_evaluations(r.evals(name), top)
        rows.append(last.assign(value=last[METRIC])[["n", "B_problem", "value"]])
    cells = pd.concat(rows)
    s = sensitivity(cells, at_B_problem=32, at_n=16)
    ratio = s.over_n / s.over_B_problem if s.over_B_problem > 0 else math.inf
    return ratio >= 2, {"over_n_percent": s.over_n, "over_B_problem_percent": s.over_B_problem,
                        "ratio": ratio, "at_B_problem": s.at_B_problem, "at_n": s.at_n}


def check_6(r: Results) -> tuple[bool, dict]:
    law = r.law("easy-tabular", "train")
    small = sorted(r.specs["easy-tabular"].n)[:2]
    ok = law["n_star_max"] <= small[-1]
    return ok, {"n_star_max": law["n_star_max"], "n_star_top": law["n_star_top"], "smallest_n": small,
                "law_fitted": law["fitted"]}


def check_7(r: Results) -> tuple[bool, dict]:
    sat = {}
    for dose in DOSES:
        law = r.law(f"dose-{dose:g}", "train")
        sat[f"{dose:g}"] = law["n_star_top"]
    vals = [sat[f"{d:g}"] for d in DOSES]
    ok = all(b >= a for a, b in zip(vals, vals[1:])) and vals[-1] > vals[0]
    return ok, {"metric_split": "train", "dose_is_shared_scale_beside_local_1": list(DOSES),
                "n_star_top_by_dose": sat}


def check_8(r: Results) -> tuple[bool, dict]:
    big, small = r.law("easy"), r.law("easy-d500")
    lower = small["n_star_top"] < big["n_star_top"]
    tr, va = r.evals("easy-d500", "train"), r.evals("easy-d500", "val")
    n0 = min(r.specs["easy-d500"].n)

    def gain(ev):
        e = ev[ev["n"] == n0].groupby("compute")[METRIC].mean()
        e = e[e.index > 0]
        mid = e[e.index <= e.index.max() / 8]
        return float(e.iloc[-1] - mid.iloc[-1]) if len(mid) else float("nan")

    g_train, g_val = gain(tr), gain(va)
    gap = final_by(tr) - final_by(va)
    ok = lower and g_train > g_val
    return ok, {"n_star_top_D500": small["n_star_top"], "n_star_top_D6000": big["n_star_top"],
                "saturates_lower": lower, f"n{n0}_last_3_doublings_gain_train": g_train,
                f"n{n0}_last_3_doublings_gain_val": g_val, "final_train_minus_val_by_n": _series(gap)}


def check_9(r: Results) -> tuple[bool, dict]:
    v = {name: float(final_by(r.evals(f"baseline-{name}")).iloc[0]) for name in ("n256", "decoupled", "n64")}
    se = {name: _final_se(r.evals(f"baseline-{name}")) for name in v}
    ok = v["n256"] > v["decoupled"] > v["n64"]
    return ok, {"final_avg@4": v, "se": se, "B_problem": r.specs["baseline-n64"].b_problem[0],
                "steps": int(r.evals("baseline-n64")["step"].max())}


def check_10(r: Results) -> tuple[bool, dict]:
    v = {}
    for rule in ("sqrt", "constant", "linear"):
        v[rule] = float(final_by(r.evals(f"lr-{rule}")).iloc[0])
    ok = v["sqrt"] > v["constant"] and v["sqrt"] > v["linear"]
    return ok, {"batch": 256 * 32, "final_avg@4": v, "se": _final_se(r.evals("lr-constant"))}


def histogram_at(ev: pd.DataFrame, compute: float) -> pd.DataFrame:
    """Mean pass@1 histogram per n at the evaluation closest below ``compute``."""
    cols = [c for c in ev.columns if str(c).startswith("hist:")]
    return last_evaluations(ev, compute).groupby("n")[cols].mean()


def _hist_summary(h: pd.DataFrame) -> dict:
    return {"zero_mass": _series(h.iloc[:, 0]), "top_mass": _series(h.iloc[:, -1])}


def check_11(r: Results) -> tuple[bool, dict]:
    top = float(r.specs["hist-hard"].budget)
    h = histogram_at(r.evals("hist-hard", "train"), top)
    ns = sorted(h.index)
    zero, one = h.iloc[:, 0], h.iloc[:, -1]
    ok = zero[ns[0]] > zero[ns[-1]] and one[ns[0]] >= one[ns[-1]] - 0.02
    abl = histogram_at(r.evals("hist-hard-no-interference", "train"), top)
    mid = histogram_at(r.evals("hist-hard", "train"), top / 64)  # descriptive: earlier in training
    return ok, {"compute": top, **_hist_summary(h), "ablation_no_interference": _hist_summary(abl),
                "at_compute_over_64": _hist_summary(mid)}


def check_12(r: Results) -> tuple[bool, dict]:
    subsets, wins = {}, 0
    for name in ("mix-hard-easy", "mix-hard-easy-very-easy"):
        for split in sorted(s for s in r.raw(name)["split"].unique() if s.startswith("val/")):
            ns = n_star_table(r.evals(name, split))
            first, last = int(ns["n"].iloc[0]), int(ns["n"].iloc[-1])
            subsets[f"{name}:{split}"] = {"n_star_low_C": first, "n_star_top_C": last}
            wins += last > min(r.specs[name].n)
    most = wins > len(subsets) / 2
    forget = {}
    for band in ("easy", "very-easy"):
        hard_only = final_by(r.evals("hard-only-val-mix", f"val/{band}"))
        mixed = final_by(r.evals("mix3-val-mix", f"val/{band}"))
        forget[band] = {"hard_only": float(hard_only.max()), "mixed": float(mixed.max())}
    loses = all(v["hard_only"] < v["mixed"] for v in forget.values())
    return most and loses, {"subsets": subsets, "larger_n_wins_on": f"{wins}/{len(subsets)}",
                            "best_final_avg@4_on_val_band": forget, "hard_only_loses_ground": loses}


# --- the registry --------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    id: int
    title: str
    study: str
    mechanism: str
    ablation: str
    sweeps: tuple[str, ...]
    check: Callable[[Results], tuple[bool, dict]]


FINDINGS: tuple[Finding, ...] = (
    Finding(1, "Easy, Q1: n*(C) rises with C and saturates",
            "easy, B_problem = 32: L=6.09, k=4.75, log10 C0=5.84, b=2.73; saturates near n=512, n=2048 never on "
            "the frontier",
            "small n takes many noisy steps that move shared parameters for all problems at once; it learns the "
            "transferable skills fast, then its noise keeps it below the plateau larger n reaches",
            "interference off (shared = 0, per-problem offsets only, read on the training set): n* stays small",
            ("easy", "dose-0"), check_1),
    Finding(2, "Hard, Q1: the same rise, saturating lower than easy",
            "hard, B_problem = 32: L=4.47, k=7.23, log10 C0=5.84, b=2.79; saturates near n=128 (easy: 512)",
            "on hard problems most groups have no reward variance; large n spends rollouts on them, small n "
            "gives more updates to the problems that have signal",
            "the zero-signal share of groups by n is reported beside the fits",
            ("easy", "hard"), check_2),
    Finding(3, "Sharpening on easy, coverage on hard",
            "easy: n best for worst@4 > n best for best@4; hard: the reverse; extremely hard: best@4 favours "
            "larger n, worst@4 peaks at n=64",
            "std-scaled GRPO weights a group by 1/sqrt(p(1-p)): large n sees the rare successes (coverage) and the "
            "rare failures (sharpening) that small n misses",
            "std scaling off (Dr. GRPO advantages): the split is recomputed",
            ("easy", "hard", "extremely-hard", "easy-drgrpo", "hard-drgrpo"), check_3),
    Finding(4, "Q2 (fixed total batch): n*(M) rises, B_problem*(M) falls",
            "easy, B = 8192: n*(M) L=7.10, k=0.01, M0=91.7, b=2.00; B_problem*(M) L=10.73, k=-0.01, M0=23.9",
            "early on, more problems per step give broad progress; later, larger groups give cleaner signal on "
            "each problem",
            "interference off (training set): the trend is recomputed",
            ("q2-easy", "q2-easy-no-interference"), check_4),
    Finding(5, "n matters more than B_problem",
            "easy: 9.2% variation over n (B_problem = 32) vs 1.9% over B_problem (n = 16)",
            "B_problem only changes how many problems share a step's update; n changes which problems give "
            "signal and how clean it is",
            "none separate: the contrast of the two axes is the comparison",
            ("easy", "easy-b-problem"), check_5),
    Finding(6, "Null: the tabular model keeps n* smallest",
            "single-problem tabular softmax: O(A/(n t) + B/t), sequential steps at least as good as samples",
            "independent problems: no interference, so more steps always beat larger groups",
            "this is the ablation of finding 1 (the strategies model with shared parameters)",
            ("easy-tabular",), check_6),
    Finding(7, "Dose-response: more interference, larger saturation n*",
            "the study attributes the preference for large n to interference across problems",
            "the shared path carries the interference; per-problem offsets (local = 1) do not",
            "dose 0 (no shared path) is the ablation",
            tuple(f"dose-{d:g}" for d in DOSES), check_7),
    Finding(8, "Train-test gap with a small training set",
            "D = 500: validation saturates early, n* caps lower (n=256), training reward keeps rising",
            "a small set is memorised through the shared parameters; validation stops gaining",
            "D = 6000 (the main easy sweep): the gap closes",
            ("easy", "easy-d500"), check_8),
    Finding(9, "Baseline ablation: n=256 > (update 64, baseline 256) > n=64",
            "B_problem = 128: a better baseline helps, most of the gain from n is exploration",
            "a larger group both lowers the baseline's noise and samples more of the policy",
            "the decoupled run is the ablation (baseline kept, exploration removed)",
            ("baseline-n64", "baseline-n256", "baseline-decoupled"), check_9),
    Finding(10, "LR rule: sqrt(B) beats constant and linear at a larger batch",
            "B = 8192: sqrt(B) beat constant (slower) and linear (unstable)",
            "Adam's step is LR-sized: constant LR under-uses a cleaner large batch, linear over-steps",
            "at B = 1024 the three rules are the same run",
            ("lr-sqrt", "lr-constant", "lr-linear"), check_10),
    Finding(11, "Pass@1 histograms on hard at matched compute",
            "small n piles mass at 0 and near 1; larger n leaves less mass at 0 (the study's Figure 12)",
            "rich get richer: small n reinforces the problems it already solves and rarely sees a success on the "
            "others",
            "interference off (shared = 0): histograms recomputed",
            ("hist-hard", "hist-hard-no-interference"), check_11),
    Finding(12, "Mixtures: larger n wins on most subsets; hard-only training loses ground on easy",
            "50/50 hard/easy and 50/25/25 hard/easy/very easy keep the crossover; hard-only training forgets "
            "(very) easy problems",
            "shared parameters pulled towards hard problems' strategies move away from what easy ones need",
            "the mixed-data run is the comparison for the hard-only run",
            ("mix-hard-easy", "mix-hard-easy-very-easy", "hard-only-val-mix", "mix3-val-mix"), check_12),
)


def get_finding(fid: int) -> Finding:
    for f in FINDINGS:
        if f.id == fid:
            return f
    raise IsosimInputError(f"no finding {fid}: choose 1 to {len(FINDINGS)}")


def check_findings(results: Results, ids=None) -> list[dict]:
    """``[{"id", "title", "holds", "evidence"}]`` for the findings ``ids`` (default all)."""
    out = []
    for f in FINDINGS:
        if ids is not None and f.id not in ids:
            continue
        holds, evidence = f.check(results)
        out.append({"id": f.id, "title": f.title, "holds": bool(holds), "evidence": _public(evidence)})
    return out
