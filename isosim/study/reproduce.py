"""The main job: the study's Q1 (B_problem fixed, n over powers of two) in simulation on the
easy and hard presets, the compute-optimal frontier, n*(C) and its sigmoid fit beside the
study's fitted values, and the twelve findings of :mod:`isosim.study.findings`, each computed
from the stored sweeps."""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..experiments.executors import fork_map
from ..experiments.sweep import SweepSpec
from ..sim.config import SimConfig
from .findings import FINDINGS, Results, based_on, check_findings, fit_n_star, get_finding, sweep_specs
from .paper import STUDY_Q1

METRIC = "avg@4"
#: wall seconds of the analyses that take longest, each alone in one process on the full scale's
#: complete store (measured on 2026-12-07; every other analysis took under 8 s). The analyses are
#: handed out longest first, so that the longest does not start last and run alone at the end
ANALYSIS_SECONDS = {("finding", 12): 66.2, ("preset", "hard"): 19.2, ("finding", 1): 17.1,
                    ("preset", "easy"): 16.7, ("finding", 2): 9.5}


def reproduce_specs(quick: bool) -> dict[str, SweepSpec]:
    """The Q1 sweeps of the finding set, on the study's grid of n: ``full`` = n 8..2048 (every
    power of two), budget 2^23, four seeds; ``--quick``: n in {8, 32, ..., 2048}, budget 2^22,
    two seeds."""
    specs = sweep_specs("quick" if quick else "full")
    return {"easy": specs["easy"], "hard": specs["hard"]}


@dataclass
class PresetResult:
    preset: str
    spec: SweepSpec
    analysis: Any  # isosim.analysis.fit.RunsAnalysis or None
    n_star: Any  # DataFrame compute, n
    error: str | None
    evals: Any

    def to_json(self) -> dict:
        levels = {"base_value": base_value(self.evals), "per_n": per_n_best(self.evals)}
        if self.analysis is not None:
            return {**self.analysis.to_json(), **levels}
        return {"metric": METRIC, "sigmoid": None, "ci": None, "r2": None,
                "n_star": [{"compute": float(c), "n": int(n)} for c, n in zip(self.n_star["compute"], self.n_star["n"])],
                "frontier": [], "error": self.error, **levels}


def base_value(ev) -> float:
    """The validation metric before training (step 0), averaged over the runs."""
    return float(ev.loc[ev["step"] == 0, METRIC].mean())


def per_n_best(ev) -> list[dict]:
    """Per n: the best validation value a run reaches over its whole run, the mean over its
    replicates and that mean's standard error (replicate sd / sqrt(replicates); None for one)."""
    best = ev.groupby(["n", "replicate"])[METRIC].max().groupby("n")
    out = []
    for n, vals in best:
        k = len(vals)
        se = float(vals.std(ddof=1) / np.sqrt(k)) if k > 1 else None
        out.append({"n": int(n), "best_value": float(vals.mean()), "se": se})
    return out


def analyse(preset: str, spec: SweepSpec, ev, n_boot: int, seed: int = 0) -> PresetResult:
    """The Q1 analysis of one preset's validation evaluations, with bootstrap CIs."""
    an, n_star, error = fit_n_star(ev, METRIC, n_boot, seed)
    return PresetResult(preset, spec, an, n_star, error, ev)


@dataclass
class Reproduction:
    presets: dict[str, PresetResult]
    findings: list[dict]
    #: the ``[model]`` and ``[algo]`` every sweep started from, when not the defaults
    base: dict | None = None

    def to_json(self) -> dict:
        out = {**{p: r.to_json() for p, r in self.presets.items()}, "findings": self.findings}
        return out if self.base is None else {**out, "model_config": self.base}


def run_reproduce(out: str | Path, quick: bool = False, workers: int | None = None, backend: str = "local",
                  address: str | None = None, progress: bool | None = None, n_boot: int | None = None,
                  model_config: SimConfig | None = None) -> Reproduction:
    """Every finding sweep (resumable, under ``out/findings``), the Q1 analysis of easy and
    hard with bootstrap CIs, the twelve finding checks, and the Q1 figures. ``model_config``:
    every sweep starts from its ``[model]`` and ``[algo]`` instead of the defaults
    (:func:`isosim.study.findings.based_on`)."""
    out = Path(out)
    n_boot = (50 if quick else 200) if n_boot is None else n_boot
    with based_on(model_config):
        results = Results(out / "findings", "quick" if quick else "full", progress=progress, workers=workers,
                          backend=backend, address=address)
        results.ensure()
        # the analyses read the stored sweeps only, so they run side by side on the same cores
        jobs = [("preset", "easy"), ("preset", "hard"), *(("finding", f.id) for f in FINDINGS)]
        done = _longest_first(functools.partial(_analysis, results, n_boot, out / "figures"), jobs, workers)
        presets = {key: done["preset", key] for key in ("easy", "hard")}
        findings = [done["finding", f.id][0] for f in FINDINGS]
        plain = None if model_config is None else model_config.to_dict()
        base = None if plain is None else {"model": plain["model"], "algo": plain["algo"]}
        return Reproduction(presets, findings, base)


def analysis_order(jobs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``jobs`` longest first by :data:`ANALYSIS_SECONDS` (the others after them, in their order)."""
    return sorted(jobs, key=lambda job: -ANALYSIS_SECONDS.get(job, 0.0))


def _longest_first(fn, jobs: list[tuple[str, Any]], workers: int | None) -> dict:
    """``{job: fn(job)}``, the jobs handed to forked workers in :func:`analysis_order`."""
    jobs = analysis_order(jobs)
    return dict(zip(jobs, fork_map(fn, jobs, workers or os.cpu_count() or 1)))


def _analysis(results: Results, n_boot: int, figures: Path, job: tuple[str, Any]):
    """One preset's Q1 analysis and figures, or one finding's check (a list of one)."""
    kind, key = job
    if kind == "preset":
        res = analyse(key, results.specs[key], results.evals(key), n_boot)
        write_figures({key: res}, figures)
        return res
    return check_findings(results, ids=[key])


def draw_and_check(results: Results, ids, folder: Path, workers: int | None = None) -> tuple[list[Path], list[dict]]:
    """The figures and checks of the findings ``ids`` from stored sweeps: each finding's figure and
    check together, side by side in forked worker processes (longest first, as the
    reproduction's analyses), the checks returned in the findings' order."""
    ordered = [("finding", f.id) for f in FINDINGS if f.id in ids]
    done = _longest_first(functools.partial(_figure_and_check, results, folder), ordered, workers)
    return [p for job in ordered for p in done[job][0]], [done[job][1] for job in ordered]


def _figure_and_check(results: Results, folder: Path, job: tuple[str, int]) -> tuple[list[Path], dict]:
    finding = get_finding(job[1])
    return list(finding.figure(results, folder)), check_findings(results, ids=[finding.id])[0]


def write_figures(results: dict[str, PresetResult], folder: Path) -> list[Path]:
    from ..analysis.frontier import frontier
    from ..analysis.plotting import new_figure, plot_frontier, plot_n_star, save_figure, set_style

    set_style()
    written = []
    for preset, res in results.items():
        data = res.evals.assign(value=res.evals[METRIC])
        data = data[data["compute"] > 0]
        fig, (ax,) = new_figure()
        plot_frontier(data, frontier(data), ax=ax)
        ax.set_title(f"{preset}: validation {METRIC}")
        written += save_figure(fig, folder / f"frontier-{preset}")
        fig, (ax,) = new_figure()
        plot_n_star(res.n_star, res.analysis.law if res.analysis is not None else None, ax=ax)
        ax.set_title(f"{preset}: compute-optimal n*(C)")
        written += save_figure(fig, folder / f"n-star-{preset}")
    return written


def report(rep: Reproduction) -> str:
    from ..analysis.fit import law_warnings

    lines = []
    if rep.base is not None:
        changed = {f"{section}.{k}": v for section in ("model", "algo")
                   for k, v in rep.base[section].items() if getattr(getattr(SimConfig(), section), k) != v}
        lines.append("== every sweep from the given model config: "
                     + (", ".join(f"{k} = {v}" for k, v in changed.items()) or "the defaults") + " ==")
    for preset, res in rep.presets.items():
        s = res.spec
        lines.append(f"== {preset} (spec {s.id}: B_problem = {s.b_problem[0]}, n = {s.n[0]}..{s.n[-1]}, "
                     f"budget {s.budget:.3g} rollouts, {len(s.seeds)} seed(s); validation {METRIC}) ==")
        lines.append(f"{'compute':>12} {'n*':>6}")
        ns = res.n_star
        step = max(1, len(ns) // 12)
        for c, n in list(zip(ns["compute"], ns["n"]))[::step]:
            lines.append(f"{c:>12.3g} {int(n):>6}")
        levels = per_n_best(res.evals)
        lines.append(f"base {METRIC} {base_value(res.evals):.3f}; best {METRIC} per n (mean +- se over seeds):")
        lines.append("  " + ", ".join(f"{d['n']}: {d['best_value']:.3f}" + (f" +- {d['se']:.3f}" if d["se"] is not None else "")
                                      for d in levels))
        study = STUDY_Q1[preset]
        if res.analysis is not None:
            law = res.analysis.law
            lines.append(f"{'':<12}{'isosim':>10}{'95% CI':>22}{'study':>10}")
            for p in ("L", "k", "log10_C0", "b"):
                lo, hi = law.ci.get(p, (np.nan, np.nan))
                lines.append(f"{p:<12}{law.params()[p]:>10.2f}{f'[{lo:.2f}, {hi:.2f}]':>22}{study[p]:>10.2f}")
            warnings = law_warnings(res.analysis)
            sat = f"n* -> 2^{law.saturation:.1f} = {2 ** law.saturation:.0f}"
            lines.append(f"{'L + b':<12}{law.saturation:>10.2f}{'':>22}{study['L'] + study['b']:>10.2f}"
                         + (f"   (saturation: {sat})" if not warnings else
                            f"   (saturation {sat} by this fit, which the warnings below put in doubt)"))
            lines.append(f"R^2 = {law.r2:.3f}")
            lines += [f"warning: {w}" for w in warnings]
        else:
            lines.append(f"scaling law not fitted: {res.error}")
        lines.append("")
    lines.append("== the study's twelve findings (paper_figures/FINDINGS.md explains each) ==")
    lines.append("verdict: holds / fails when the criterion holds / fails in at least 95% of bootstrap resamples of "
                 "the seeds, inconclusive otherwise; P = the share of resamples where it holds")
    for f in rep.findings:
        lines.append(f"{f['id']:>3}  {f['verdict']:<13} P = {f['p_holds']:<5.2f} {f['title']}")
    return "\n".join(lines)
