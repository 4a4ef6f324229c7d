"""From evaluations to answers.

- :mod:`~isosim.analysis.runs`: reading and checking run logs (CSV, Parquet, sweep directories).
- :mod:`~isosim.analysis.frontier`: record-breaking points, the frontier f(C), per-group ScaleRL
  curves, the compute-optimal pipeline and the sensitivity to n and B_problem.
- :mod:`~isosim.analysis.n_star`: n*(C), the arg-max over groups (raw values or fitted curves),
  with its one tie rule and one edge rule.
- :mod:`~isosim.analysis.fit`: the n*(C) scaling law, bootstrap CIs, the ``isosim fit`` pipeline.
- :mod:`~isosim.analysis.fixed_batch`: the fixed-batch (Q2) analysis.
- :mod:`~isosim.analysis.plotting`: the shared plotting helpers.
"""
