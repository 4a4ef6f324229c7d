"""``simulate(config, seed) -> Trace``: one GRPO run of a surrogate policy.

The run alternates Numba training chunks (:func:`isosim.sim.kernels.train_steps`) with
exact evaluations of every train and validation problem, at log-spaced steps, so a
trace grows with the number of evaluations, not with steps or rollouts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import kernels
from .advantages import ADVANTAGES
from .config import SimConfig
from .metrics import estimated_metric, exact_metric
from .models import learn_mask, model_module
from .population import Population, ProblemSet, build_population

TRACE_COLUMNS = ["config_id", "seed", "step", "compute_rollouts", "compute_tokens", "split", "metric", "value"]
_OPT = {"sgd": kernels.OPT_SGD, "adam": kernels.OPT_ADAM, "adamw": kernels.OPT_ADAMW}


@dataclass
class Trace:
    """A tidy table of one run, plus per-problem pass-rate snapshots.

    ``table`` columns: config_id, seed, step, compute_rollouts, compute_tokens, split
    (``train``, ``val`` and, for mixtures, ``val/<band>``), metric (``avg@k``,
    ``best@k``, ``worst@k``, ``entropy``, ``kl``, ``zero_var_frac``, and
    ``<metric>:sampled`` estimates and ``hist:<i>/<bins>`` pass@1 histogram shares when
    asked), value. ``snapshots`` columns: step,
    split, problem, pass_rate.
    """

    config: SimConfig
    seed: int
    table: pd.DataFrame
    snapshots: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["step", "split", "problem", "pass_rate"]))

    @property
    def steps(self) -> int:
        return int(self.table["step"].max())

    def final(self, split: str = "val") -> dict[str, float]:
        """Metrics at the last evaluated step of ``split``."""
        t = self.table
        last = t[(t["split"] == split) & (t["step"] == t["step"].max())]
        return {m: float(v) for m, v in zip(last["metric"], last["value"])}

    def curve(self, metric: str, split: str = "val") -> pd.DataFrame:
        """One metric of one split over the run: columns ``step, compute_rollouts, compute_tokens, value``."""
        t = self.table
        rows = t[(t["split"] == split) & (t["metric"] == metric)]
        return rows[["step", "compute_rollouts", "compute_tokens", "value"]].reset_index(drop=True)

    def wide(self) -> pd.DataFrame:
        """One row per (step, split), one column per metric."""
        return self.table.pivot_table(index=["step", "compute_rollouts", "compute_tokens", "split"],
                                      columns="metric", values="value").reset_index()


def eval_steps(total: int, cfg_eval, extra: tuple[int, ...] = ()) -> np.ndarray:
    """Steps at which to evaluate: 0, ``n_evals`` log-spaced steps up to ``total``, and the last."""
    if cfg_eval.every:
        steps = set(range(0, total + 1, cfg_eval.every))
    else:
        steps = set(np.unique(np.round(np.geomspace(1, total, cfg_eval.n_evals)).astype(int)).tolist())
    steps |= {0, total}
    steps |= {s for s in extra if s <= total}
    return np.array(sorted(steps), dtype=np.int64)


def initial_state(D: int, S: int, r: int) -> kernels.TrainState:
    """The kernel state at the reference policy: every parameter and moment zero, a new epoch due."""
    return kernels.TrainState(
        beta=np.zeros(S), V=np.zeros((r, S)), U=np.zeros((D, S)),
        m_beta=np.zeros(S), v_beta=np.zeros(S), m_V=np.zeros((r, S)), v_V=np.zeros((r, S)),
        m_U=np.zeros((D, S)), v_U=np.zeros((D, S)), t_U=np.zeros(D, dtype=np.int64),
        alpha=np.zeros(D), m_alpha=np.zeros(D), v_alpha=np.zeros(D),
        perm=np.arange(D, dtype=np.int64), cursor=np.array([D], dtype=np.int64), counters=np.zeros(4),
        u_cols=np.zeros((D, S), dtype=np.int32), u_ncols=np.zeros(D, dtype=np.int64), u_on=np.zeros((D, S), dtype=bool))


def train_data(train: ProblemSet, config: SimConfig) -> kernels.TrainData:
    """The training problems as the kernel reads them."""
    tp = train.problems
    return kernels.TrainData(tp.base_logits, tp.features, tp.rewards, train.sampling_order, train.lengths,
                             learn_mask(config.model), np.ascontiguousarray(tp.execution, dtype=float))


def kernel_params(config: SimConfig) -> tuple[np.ndarray, np.ndarray]:
    """The float and integer hyper-parameter vectors the kernels take."""
    a, al, m = config.algo, config.allocation, config.model
    sc = model_module(m).path_scales(m)
    n_est = max(al.n, a.baseline_n)
    wd = a.weight_decay
    fpar = np.array([a.lr_at(al.n * al.b_problem), sc.beta, sc.v, sc.u, a.std_eps, a.kl_coef, a.entropy_coef,
                     a.beta1, a.beta2, a.adam_eps, wd, float(sc.u_share), a.drift])
    ipar = np.array([al.n, n_est, al.b_problem, ADVANTAGES[a.advantage].code, _OPT[a.optimizer], int(a.zero_var_filter),
                     a.warmup], dtype=np.int64)
    return fpar, ipar


def simulate(config: SimConfig, seed: int = 0, *, population: Population | None = None,
             backend: str = "numba") -> Trace:
    """Train the surrogate with GRPO under ``config`` and return its :class:`Trace`.

    ``backend="numpy"`` runs the plain NumPy twin of the kernels (same numbers,
    slower); it exists for tests and benchmarks.
    """
    config.validate()
    if backend == "numba":
        k = kernels
    elif backend == "numpy":
        from . import twin as k
    else:
        raise ValueError(f"unknown backend {backend!r}")
    pop = population if population is not None else build_population(config.population, config.model)
    train, val = pop.train, pop.val
    S = train.problems.base_logits.shape[1]
    r = train.problems.features.shape[1]
    st = initial_state(len(train), S, r)
    fpar, ipar = kernel_params(config)
    total = config.allocation.resolved_steps(config.algo)
    per_step = config.allocation.rollouts_per_step(config.algo)
    ev = config.eval
    snaps = set(s for s in ev.snapshot_steps if s <= total)
    schedule = eval_steps(total, ev, tuple(snaps) + tuple(ev.at_steps))
    train_rng, eval_rng = (np.random.default_rng(s) for s in np.random.SeedSequence([seed, 0x1505]).spawn(2))
    cid = config.config_id()
    splits = _splits(train, val)
    wanted = {"train", "val"} if ev.train_split else {"val"}
    splits = {name: sp for name, sp in splits.items() if sp[0] in wanted}
    rows: list[tuple] = []
    snap_rows: list[pd.DataFrame] = []
    done = 0
    last_groups = last_zero = 0.0
    data = train_data(train, config)
    for step in schedule:
        if step > done:
            k.train_steps(train_rng, data, st, fpar, ipar, int(done), int(step - done))
            done = int(step)
        compute = (int(step) * per_step, float(st.counters[kernels.C_TOKENS]))
        evals = {}
        for name, ps, use_u in (("train", train, True), ("val", val, False)):
            if name in wanted:
                evals[name] = _evaluate(k, ps, st, fpar, use_u)
        for split, (src, sel) in splits.items():
            p, h, kl = (x[sel] for x in evals[src])
            for metric, value in _metrics(p, h, kl, ev, eval_rng):
                rows.append((cid, seed, int(step), *compute, split, metric, value))
        groups = st.counters[kernels.C_GROUPS] - last_groups
        if groups > 0:
            zero = st.counters[kernels.C_ZERO_VAR] - last_zero
            rows.append((cid, seed, int(step), *compute, "train", "zero_var_frac", zero / groups))
        last_groups, last_zero = st.counters[kernels.C_GROUPS], st.counters[kernels.C_ZERO_VAR]
        if int(step) in snaps:
            for name, (p, _, _) in evals.items():  # the evaluated splits, training first
                snap_rows.append(pd.DataFrame({"step": int(step), "split": name, "problem": np.arange(len(p)),
                                               "pass_rate": p}))
    table = pd.DataFrame(rows, columns=TRACE_COLUMNS)
    table["compute_rollouts"] = table["compute_rollouts"].astype(np.int64)
    trace = Trace(config=config, seed=seed, table=table)
    if snap_rows:
        trace.snapshots = pd.concat(snap_rows, ignore_index=True)
    return trace


def compile_kernels() -> None:
    """Compile the training and evaluation kernels in this process: a few steps on a few
    problems with each sampler (one rollout at a time, and conditional binomials), about 30
    CPU-seconds the first time and a fraction of a second once Numba's on-disk cache holds them.
    Worker processes forked afterwards inherit the compiled kernels, and spawned ones read the
    cache this writes, so a pool of K workers costs one compilation instead of K."""
    cfg = SimConfig().replace(population={"preset": "easy", "train_size": 32, "val_size": 8},
                              model={"n_strategies": 8}, eval={"n_evals": 2})
    for n in (2, 16):  # 2 <= S / 2: one rollout at a time; 16 > S / 2: conditional binomials
        simulate(cfg.replace(allocation={"n": n, "b_problem": 4, "budget": float(2 * n * 4), "steps": 0}), 0)


def kernels_cached() -> bool:
    """Whether Numba's on-disk cache holds the current training and evaluation kernels (so the
    first :func:`simulate` of a process loads them instead of compiling, about 30 CPU-seconds)."""
    for dispatcher in (kernels.train_steps, kernels.evaluate):
        if dispatcher.signatures:  # compiled or loaded in this process already
            continue
        try:
            if not dispatcher._cache._cache_file._load_index():  # empty when missing or stale
                return False
        except Exception:  # a Numba without this layout, or an unreadable cache: assume cold
            return False
    return True


def _splits(train: ProblemSet, val: ProblemSet) -> dict[str, tuple[str, np.ndarray]]:
    out = {"train": ("train", np.arange(len(train))), "val": ("val", np.arange(len(val)))}
    bands = list(dict.fromkeys(val.band.tolist()))
    if len(bands) > 1:
        for band in bands:
            out[f"val/{band}"] = ("val", np.flatnonzero(val.band == band))
    return out


def _evaluate(k, ps: ProblemSet, st: kernels.TrainState, fpar: np.ndarray, use_u: bool):
    pr = ps.problems
    N = len(pr)
    p, h, kl = np.empty(N), np.empty(N), np.empty(N)
    U = st.U if use_u else np.zeros((1, pr.base_logits.shape[1]))
    alpha = st.alpha if use_u else np.zeros(1)
    logref = ps.log_reference
    k.evaluate(pr.base_logits, logref, pr.features, pr.rewards, np.ascontiguousarray(pr.execution, dtype=float),
               st.beta, st.V, U, alpha, use_u,
               fpar[kernels.F_BS], fpar[kernels.F_VS], fpar[kernels.F_US], p, h, kl)
    return p, h, kl


def _metrics(p, h, kl, ev, rng):
    for k in ev.ks:
        for kind in ("avg", "best", "worst"):
            yield f"{kind}@{k}", float(np.mean(exact_metric(p, kind, k)))
    if ev.hist_bins:
        counts, _ = np.histogram(p, bins=ev.hist_bins, range=(0.0, 1.0))
        for i, c in enumerate(counts):
            yield f"hist:{i}/{ev.hist_bins}", c / p.size
    yield "entropy", float(np.mean(h))
    yield "kl", float(np.mean(kl))
    if ev.sampled:
        c = rng.binomial(ev.sampled, p)
        for k in ev.ks:
            for kind in ("avg", "best", "worst"):
                yield f"{kind}@{k}:sampled", float(np.mean(estimated_metric(c, ev.sampled, kind, k)))
