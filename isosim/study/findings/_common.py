"""What the findings share: the scales, the :class:`Finding` record, the sweeps several findings
read, :class:`Results` (stored sweep results by name) and small analysis helpers."""
from __future__ import annotations

import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

from ...errors import IsosimInputError
from ...experiments.sweep import SweepSpec, evaluations, run_sweep
from ...sim.config import SimConfig

METRIC = "avg@4"

#: the seeds every finding is evaluated on: data seed 0 (the world and its problems) and training
#: seeds derived from root seed 0 and the replicate (:func:`isosim.experiments.sweep.derive_seed`)
EVALUATION_SEEDS = {"data_seed": 0, "root_seed": 0}
#: the seeds the default model's knobs were chosen on (``paper_figures/calibrate.py``): other
#: worlds and other training seeds, so no finding is evaluated on a run the calibration saw
CALIBRATION_SEEDS = {"data_seeds": (1, 2, 3), "root_seed": 1}


# --- scales and the finding record ------------------------------------------------------------

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
    #: more seeds for the cheap sweeps (one to three n) whose effects are of the size of the noise
    seeds_many: tuple[int, ...] = ()
    #: the budget of finding 3's sweeps across B_problem (None: ``budget``); the quick scale halves
    #: it to keep CI's reproduction cheap
    split_budget: float | None = None
    #: the n below the study's grid that finding 6's tabular sweep adds (its claim: n* stays at the
    #: smallest n)
    n_below: tuple[int, ...] = ()


#: the study's B_problem grid (finding 5 reads the spread of the reward over it at n = 16)
STUDY_B_PROBLEMS = (32, 64, 128, 256, 512, 1024)
#: the B_problem of the study's Q1 sweeps
Q1_B_PROBLEM = STUDY_B_PROBLEMS[0]
#: the study's cap on the rollout batch n * B_problem, per set: its hard sweeps stop at 16,384
#: (n <= 512 at B_problem = 32)
STUDY_B_MAX = {"easy": 65536, "hard": 16384}
#: the study's grid of n (its Q1 and Q3 sweeps): the powers of two from 8 to 2048. The n below it
#: are the dearest runs of a sweep (a step costs about the same per group, and n = 2 takes four
#: times the steps of n = 8 at a budget), and the study does not read them
STUDY_N = tuple(2**k for k in range(3, 12))
#: the study's fixed total batch of its Q2 sweeps (B = n * B_problem, easy)
Q2_BATCH = 8192
#: the n of the study's grid whose B_problem at that batch lies on the study's B_problem grid
#: (8 ... 256: B_problem 1024 ... 32)
Q2_N = tuple(n for n in STUDY_N if STUDY_B_PROBLEMS[0] <= Q2_BATCH // n <= STUDY_B_PROBLEMS[-1])

SCALES = {
    "full": Scale("full", STUDY_N, 2.0**23, (0, 1, 2, 3), Q2_N,
                  (16, 32, 64, 128, 256, 512, 1024), STUDY_B_PROBLEMS, 128, tuple(range(12)), n_below=(2, 4)),
    "quick": Scale("quick", (8, 32, 128, 512, 2048), 2.0**22, (0, 1), (8, 32, 128, 256),
                   (16, 64, 256, 1024), STUDY_B_PROBLEMS, 32, (0, 1, 2, 3), 2.0**21, n_below=(2,)),
}


@dataclass(frozen=True)
class Finding:
    """One finding: its text, the sweeps it reads (by name, at a :class:`Scale`), its check
    (``Results -> (holds, evidence)``) and its figure (``make(results, out) -> [paths]``)."""

    id: int
    title: str
    study: str
    mechanism: str
    ablation: str
    sweeps_at: Callable[[Scale], dict[str, SweepSpec]]
    check: Callable[["Results"], tuple[bool, dict]]
    figure: Callable[["Results", Path], list[Path]]

    @property
    def sweeps(self) -> tuple[str, ...]:
        """The names of the sweeps this finding reads (the same at every scale)."""
        return tuple(self.sweeps_at(SCALES["quick"]))


# --- sweeps (plain data) -----------------------------------------------------------------------

#: the model and algorithm every finding sweep starts from (``isosim reproduce --model-config``);
#: None: the package defaults
_BASE: ContextVar[SimConfig | None] = ContextVar("isosim_findings_base", default=None)


@contextmanager
def based_on(config: SimConfig | None) -> Iterator[None]:
    """Build the finding sweeps from ``config``'s ``[model]`` and ``[algo]`` (its population and
    allocation are not used) while the block runs; ``None``: from the defaults."""
    token = _BASE.set(None if config is None else SimConfig(model=config.model, algo=config.algo))
    try:
        yield
    finally:
        _BASE.reset(token)


def _base_config() -> SimConfig:
    """The config the finding sweeps start from: :func:`based_on`'s, or the defaults."""
    return _BASE.get() or SimConfig()


def base(preset: str = "easy", **sections: dict) -> SimConfig:
    cfg = _base_config().replace(population={"preset": preset})
    return cfg.replace(**sections) if sections else cfg


def own_offsets() -> float:
    """The scale of the per-problem offsets in the ablations that switch the shared path off or
    down: the base model's own (``local``), or 1 when it has none."""
    return _base_config().model.local or 1.0


def q1(sid: str, cfg: SimConfig, sc: Scale, n=None, b_problem=(Q1_B_PROBLEM,), budget=None, seeds=None,
       train: bool = False, b_max: int = STUDY_B_MAX["easy"]) -> SweepSpec:
    """A Q1 sweep of the finding set, id ``f-<sid>-<scale>`` (the folder it is stored in), on the
    allocations of ``n`` (default: the scale's) x ``b_problem`` with ``n * B_problem <= b_max``.
    ``train``: evaluate the training problems too (only for a sweep whose training split a
    finding reads; :meth:`Results.evals` refuses the split of a sweep that did not)."""
    return SweepSpec(f"f-{sid}-{sc.name}", "Q1", evaluated(cfg, train), n=tuple(n or sc.n), b_problem=tuple(b_problem),
                     budget=float(budget or sc.budget), b_max=int(b_max), seeds=tuple(seeds or sc.seeds))


def evaluated(cfg: SimConfig, train: bool) -> SimConfig:
    """``cfg`` with its training problems evaluated (``train``) or not (validation only)."""
    return cfg.replace(eval={"train_split": bool(train)})


# the sweeps several findings read, defined once here
def easy(sc: Scale) -> SweepSpec:
    """Q1 on easy, B_problem = 32 (findings 1, 2, 3, 5, 8; ``isosim reproduce``)."""
    return q1("easy", base("easy"), sc)


def hard(sc: Scale) -> SweepSpec:
    """Q1 on hard, B_problem = 32, n up to the study's cap on hard (512; findings 2, 3;
    ``isosim reproduce``)."""
    cap = STUDY_B_MAX["hard"]
    return q1("hard", base("hard"), sc, n=tuple(n for n in sc.n if n * Q1_B_PROBLEM <= cap), b_max=cap)


def dose(sc: Scale, share: float) -> SweepSpec:
    """Q1 on easy with the shared path at ``share`` times the base model's scale, beside
    per-problem offsets (:func:`own_offsets`: local = 1 for the default model)."""
    shared = share * _base_config().model.shared
    return q1(f"dose-{share:g}", base("easy", model={"shared": shared, "local": own_offsets()}), sc,
              train=share == 0)  # the no-transfer dose's training split: finding 1's ablation


# --- reading results ---------------------------------------------------------------------------

class Results:
    """Sweep results by name, run (resumably) into ``root/<spec id>`` on first use.

    ``run=False`` only reads stored sweeps; ``replicates`` keeps only those seeds' runs."""

    def __init__(self, root: str | Path, scale: str = "full", run: bool = True, progress: bool | None = None,
                 workers: int | None = None, backend: str = "local", address: str | None = None,
                 replicates: tuple[int, ...] | None = None):
        from . import sweep_specs

        self.root, self.run = Path(root), run
        self.replicates = replicates  # read only these replicates (seed-stability checks)
        self.specs = sweep_specs(scale)
        self.kw = dict(progress=progress, workers=workers, backend=backend, address=address)
        self._cache: dict[tuple[str, str], pd.DataFrame] = {}
        self._laws: dict[tuple[str, str], dict[str, Any]] = {}

    def ensure(self, names=None) -> None:
        """Run (one pool, longest runs first) and read the sweeps ``names`` (default all)."""
        names = list(names or self.specs)
        if self.run:
            from ...experiments.sweep import run_sweeps

            run_sweeps([(self.specs[n], self.root / self.specs[n].id) for n in names], **self.kw)
        for name in names:
            self.raw(name)

    def all_seeds(self) -> "Results":
        """These results (a bootstrap resample's are the results it draws from,
        :meth:`isosim.study.findings._verdict.SeedResample.all_seeds`)."""
        return self

    def raw(self, name: str) -> pd.DataFrame:
        if (name, "") not in self._cache:
            spec = self.specs[name]
            folder = self.root / spec.id
            if self.run:
                store = run_sweep(spec, folder, **self.kw)
            else:
                from ...experiments.store import RunStore

                if not folder.is_dir():
                    raise IsosimInputError(f"no stored sweep {spec.id} under {self.root}: run `isosim figures` first")
                store = RunStore.load(folder)
            table = store.read()
            if self.replicates is not None:
                table = table[table["replicate"].isin(self.replicates)].reset_index(drop=True)
            self._cache[(name, "")] = table
        return self._cache[(name, "")]

    def evals(self, name: str, split: str = "val") -> pd.DataFrame:
        if split == "train" and not self.specs[name].base.eval.train_split:
            raise ValueError(f"sweep {name!r} does not evaluate its training problems: build it with train=True")
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
    """The n with the largest value (:func:`isosim.analysis.n_star.best_key`: ties to the smaller n)."""
    from ...analysis.n_star import best_key

    return int(best_key(s.to_dict()))


def n_star_table(ev: pd.DataFrame, metric: str = METRIC, starts=None) -> pd.DataFrame:
    """n*(C) from the envelope of per-n reward curves, without a scaling law: the fitted arg-max
    of :mod:`isosim.analysis.n_star` (:func:`isosim.analysis.frontier.compute_optimal`: each
    n's curve starts from its value at compute 0; ``starts``: per-n curves that start the fits).

    When no per-n curve can be fitted (curves too flat for more than a few record-breaking
    points), n*(C) is read off the empirical frontier instead: the n of the run that attains
    it at each of its steps (``attrs["fits"]`` is then empty and ``attrs["unfitted"]`` says why).
    """
    from ...analysis.frontier import compute_optimal, frontier

    d = ev.assign(value=ev[metric])[["run", "n", "B_problem", "compute", "value"]]
    try:
        return compute_optimal(d, group=("n",), starts=starts)
    except IsosimInputError as exc:
        table = frontier(d[d["compute"] > 0])[["compute", "value", "n"]].reset_index(drop=True)
        table.attrs.update(fits={}, unfitted=str(exc))
        return table


def fit_n_star(ev: pd.DataFrame, metric: str = METRIC, n_boot: int = 0, seed: int = 0, curve_starts=None,
               law_starts=None):
    """``(analysis, n_star, error)``: :func:`isosim.analysis.fit.analyse_runs`, or, when no law can be
    fitted, ``(None, n_star_table(ev), reason)``; the starts go to the fits (a warm refit)."""
    from ...analysis.fit import analyse_runs

    try:
        an = analyse_runs(ev, metric=metric, n_boot=n_boot, seed=seed, curve_starts=curve_starts,
                          law_starts=law_starts)
    except IsosimInputError as exc:
        return None, n_star_table(ev, metric, curve_starts), str(exc)
    return an, an.n_star, None


def n_star_law(ev: pd.DataFrame, metric: str = METRIC, warm: dict | None = None) -> dict[str, Any]:
    """n*(C) and its sigmoid fit, or the reason there is none. ``warm``: the law of similar data
    (the same sweep on all seeds) whose fit starts this one (a bootstrap resample's)."""
    starts = {} if warm is None else {"curve_starts": warm["curves"],
                                      "law_starts": [tuple(warm["fit"].params().values())] if warm["fitted"] else None}
    an, ns, error = fit_n_star(ev, metric, **starts)
    if an is None:
        return {"fitted": False, "fit": None, "curves": ns.attrs["fits"], "error": error, "n_star_top": int(ns["n"].iloc[-1]),
                "n_star_min": int(ns["n"].min()), "n_star_max": int(ns["n"].max()), "n_star": ns}
    law = an.law
    return {"fitted": True, "fit": law, "curves": an.curves, "L": law.L, "k": law.k, "log10_C0": law.log10_C0, "b": law.b, "r2": law.r2,
            "saturation_log2": law.saturation, "n_star_top": int(ns["n"].iloc[-1]),
            "n_star_min": int(ns["n"].min()), "n_star_max": int(ns["n"].max()), "n_star": ns}


def law_compared(law: dict, prefix: str = "") -> dict:
    """The numbers :func:`rise` compares, for the bootstrap: k, L, R^2 (NaN without a fit) and
    log2 of the largest and the last n*."""
    fitted = law["fitted"]
    return {f"{prefix}{p}": (float(law[p]) if fitted else math.nan) for p in ("k", "L", "r2")} | {
        f"{prefix}log2_n_star_max": math.log2(law["n_star_max"]), f"{prefix}log2_n_star_top": math.log2(law["n_star_top"])}


def rise(law: dict, ns_tested) -> dict:
    """Does a fitted n*(C) law rise (k > 0, L >= 2, R^2 >= 0.7), and saturate below the largest n?"""
    ok = law["fitted"] and law["k"] > 0 and law["L"] >= 2 and law["r2"] >= 0.7
    return {"rises": bool(ok), "saturates_below_max_n": bool(law["n_star_max"] < max(ns_tested))}


def finding_one_check(law: dict, ns_tested) -> dict:
    """Finding 1's calibration criterion for one fitted n*(C) law, as the calibration scripts
    tabulate it: the law rises (:func:`rise`), its fitted saturation lies below log2 of the largest n
    tested, and the largest n is never on the frontier. Returns the law's parameters (rounded)
    and ``passes``."""
    row = {"n_star_top": law["n_star_top"], "largest_n_on_frontier": bool(law["n_star_max"] == max(ns_tested))}
    if not law["fitted"]:
        return {**row, "passes": False}
    row.update({p: round(law[p], 2) for p in ("L", "k", "log10_C0", "b", "r2")})
    row["saturation"] = round(law["saturation_log2"], 2)
    row["passes"] = bool(rise(law, ns_tested)["rises"] and law["saturation_log2"] < math.log2(max(ns_tested))
                         and not row["largest_n_on_frontier"])
    return row


def _public(d: dict) -> dict:
    """Evidence as JSON-ready numbers (tables dropped, floats rounded)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, pd.DataFrame) or k in ("fit", "curves"):
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
