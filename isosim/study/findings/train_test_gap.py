"""Finding 8: with D = 500, every n peaks lower and earlier on validation; the largest n declines
after its peak while its training reward keeps rising."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ._common import METRIC, Finding, Results, Scale, _series, base, easy, final_by, q1


def sweeps(sc: Scale) -> dict:
    return {"easy": easy(sc), "easy-d500": q1("easy-d500", base("easy", population={"train_size": 500}), sc, train=True)}


def mean_curves(ev: pd.DataFrame) -> dict[int, pd.Series]:
    """Per n, ``METRIC`` against compute (> 0), mean over the seeds."""
    d = ev[ev["compute"] > 0]
    return {int(n): g.groupby("compute")[METRIC].mean().sort_index() for n, g in d.groupby("n")}


def peak(curve: pd.Series) -> tuple[float, float]:
    """``(value, compute)`` of a curve's highest point (the first, on ties)."""
    i = int(np.argmax(curve.to_numpy()))
    return float(curve.iloc[i]), float(curve.index[i])


def wiggle(curve: pd.Series) -> float:
    """The curve's evaluation-to-evaluation noise: the standard deviation of its successive
    differences (a steady rise or decline has a constant difference and no spread); 0 with
    fewer than three points."""
    diffs = np.diff(curve.to_numpy())
    return float(np.std(diffs, ddof=1)) if len(diffs) >= 2 else 0.0


def check(r: Results) -> tuple[bool, dict]:
    big, small = mean_curves(r.evals("easy")), mean_curves(r.evals("easy-d500"))
    ns = sorted(set(big) & set(small))
    lower, earlier, peaks = {}, {}, {}
    for n in ns:
        (v6, c6), (v5, c5) = peak(big[n]), peak(small[n])
        lower[n], earlier[n] = v6 - v5, math.log2(c6) - math.log2(c5)
        peaks[str(n)] = {"D6000": {"value": v6, "compute": c6}, "D500": {"value": v5, "compute": c5}}
    # the largest n at D = 500: does validation fall after its peak by more than the curve's own
    # noise, and does training reward rise over the same stretch by more than its noise?
    n_max = ns[-1]
    val = small[n_max]
    v_peak, c_peak = peak(val)
    after = val[val.index >= c_peak]
    decline = v_peak - float(val.iloc[-1])
    train = mean_curves(r.evals("easy-d500", "train"))[n_max]
    train_after = train[train.index >= c_peak]
    train_rise = float(train.iloc[-1]) - float(train_after.iloc[0])
    decline_margin = decline - 2 * wiggle(after)
    rise_margin = train_rise - 2 * wiggle(train_after)
    every_lower, every_earlier = min(lower.values()) > 0, min(earlier.values()) > 0
    ok = every_lower and every_earlier and decline_margin > 0 and rise_margin > 0
    compared = {"min_over_n_peak_D6000_minus_D500": min(lower.values()),
                "min_over_n_log2_peak_compute_D6000_over_D500": min(earlier.values()),
                "largest_n_val_decline_after_peak": decline,
                "largest_n_val_decline_minus_twice_noise": decline_margin,
                "largest_n_train_rise_after_val_peak": train_rise,
                "largest_n_train_rise_minus_twice_noise": rise_margin}
    big_law, small_law = r.law("easy"), r.law("easy-d500")
    gap = final_by(r.evals("easy-d500", "train")) - final_by(r.evals("easy-d500"))
    return ok, {"compared": compared, "every_n_peaks_lower": every_lower, "every_n_peaks_earlier": every_earlier,
                "largest_n": n_max, "largest_n_declines": decline_margin > 0,
                "largest_n_training_keeps_rising": rise_margin > 0, "validation_peaks": peaks,
                "largest_n_val_peak_compute": c_peak,
                "n_star_top_D500": small_law["n_star_top"], "n_star_top_D6000": big_law["n_star_top"],
                "final_train_minus_val_by_n": _series(gap)}


def make(results, out):
    from .style import curves_by_n, figure, save

    fig, (a, b) = figure(2)
    for ax, split in ((a, "train"), (b, "val")):
        curves_by_n(ax, results.evals("easy-d500", split), METRIC, f"D = 500: {split} {METRIC}")
    for n, curve in mean_curves(results.evals("easy-d500")).items():  # each n's validation peak
        v, c = peak(curve)
        b.plot([c], [v], "k.", ms=4)
    a.legend(title="n", fontsize=6, ncols=2)
    return save(fig, out, "fig08_train_test")


FINDING = Finding(
    8, "Train-test gap with a small training set",
    study="D = 500: every n peaks lower and earlier than with D = 6000 (n=8 near 0.52 by 0.2M rollouts, n=256 near "
          "0.55 at 0.6M); the largest n (512) peaks near 0.535 and then declines while training reward keeps rising",
    mechanism="a small set is memorised through the shared parameters; validation stops gaining",
    ablation="D = 6000 (the main easy sweep): the gap closes",
    sweeps_at=sweeps, check=check, figure=make)
