"""Small statistics helpers for tests whose tolerances come from the variance."""
import numpy as np


def se_of_mean(x) -> float:
    """Standard error of the mean of ``x``."""
    x = np.asarray(x, float)
    return float(x.std(ddof=1) / np.sqrt(len(x)))
