"""Finding 7: n*(C) on the training set as the shared (interfering) path is turned up."""
from __future__ import annotations

from ._common import Finding, Results, Scale, dose

#: the dose of interference: the scale of the shared path beside per-problem offsets (local = 1)
DOSES = (0.0, 0.5, 1.0)


def sweeps(sc: Scale) -> dict:
    return {f"dose-{d:g}": dose(sc, d) for d in DOSES}


def check(r: Results) -> tuple[bool, dict]:
    sat = {}
    for d in DOSES:
        law = r.law(f"dose-{d:g}", "train")
        sat[f"{d:g}"] = law["n_star_top"]
    vals = [sat[f"{d:g}"] for d in DOSES]
    ok = all(b >= a for a, b in zip(vals, vals[1:])) and vals[-1] > vals[0]
    import math

    compared = {f"log2_n_star_top_dose_{d}": math.log2(v) for d, v in sat.items()}
    return ok, {"compared": compared, "metric_split": "train", "dose_is_shared_scale_beside_local_1": list(DOSES),
                "n_star_top_by_dose": sat}


def make(results, out):
    from .style import figure, n_star_steps, save

    fig, (a,) = figure(1)
    tables = {f"shared = {d:g}": results.law(f"dose-{d:g}", "train")["n_star"] for d in DOSES}
    n_star_steps(a, tables, results.specs["dose-0"].n, "n*(C), training avg@4")
    return save(fig, out, "fig07_dose")


FINDING = Finding(
    7, "Dose-response: more interference, larger saturation n*",
    study="the study attributes the preference for large n to interference across problems",
    mechanism="the shared path carries the interference; per-problem offsets (local = 1) do not",
    ablation="dose 0 (no shared path) is the ablation",
    sweeps_at=sweeps, check=check, figure=make)
