"""What the study reports, as the numbers the package compares with (Cheng, Xie, Qu, Setlur et al.,
"IsoCompute Playbook: Optimally Scaling Sampling Compute for LLM RL", arXiv 2603.12151).

``STUDY_Q1``: its fitted n*(C) law per problem set at B_problem = 32 (the Q1 fits, read off its
figures), ``log2 n* = L / (1 + exp(-k (log10 C - log10 C0))) + b`` with C in rollouts.
"""
from __future__ import annotations

STUDY_Q1 = {
    "easy": {"L": 6.09, "k": 4.75, "log10_C0": 5.84, "b": 2.73},
    "hard": {"L": 4.47, "k": 7.23, "log10_C0": 5.84, "b": 2.79},
}
