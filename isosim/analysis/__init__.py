"""From evaluations to answers: the frontier, per-n reward curves, n*(C), the scaling-law
fits, the fixed-batch (Q2) analysis and the shared plotting helpers."""
