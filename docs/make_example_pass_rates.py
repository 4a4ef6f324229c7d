"""Write docs/example_pass_rates.csv: 1000 synthetic problems whose base pass rates follow
Beta(0.6, 1.6) (mean 0.27, a fifth never solved), measured as in the study with 16 samples
each (columns correct, samples). Fixed seed."""
from pathlib import Path

import numpy as np
import pandas as pd

rng = np.random.default_rng(2026)
p = rng.beta(0.6, 1.6, 1000)
df = pd.DataFrame({"problem": np.arange(1000), "correct": rng.binomial(16, p), "samples": 16})
out = Path(__file__).with_name("example_pass_rates.csv")
df.to_csv(out, index=False)
print(f"wrote {len(df)} problems to {out.name}: mean avg@16 {df.correct.mean() / 16:.3f}, "
      f"{(df.correct == 0).mean():.0%} at 0, {(df.correct == 16).mean():.0%} at 16/16")
