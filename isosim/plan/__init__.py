"""Planning a run.

- :mod:`~isosim.plan.meanfield`: the mean-field model of training (expected GRPO dynamics).
- :mod:`~isosim.plan.predict`: its curves over allocations, their n*(C) and its scaling law.
- :mod:`~isosim.plan.agreement`: how well those curves and n*(C) match simulated sweeps.
- :mod:`~isosim.plan.planner`: the planner behind ``isosim plan``.
- :mod:`~isosim.plan.ranking`: the planner's measured ranking error (read by the planner);
  :mod:`~isosim.plan.ranking_measure` measures it (runs the planner and the simulator).
"""
