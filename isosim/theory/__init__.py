"""Closed forms of the GRPO surrogate: sympy expressions, numeric functions, LaTeX.

Every closed form is registered as a :class:`ClosedForm` (``closed_form(name)``) with
``expr()`` (sympy), ``latex()``, ``lambdified()`` and ``numeric`` (direct numpy); the
numeric functions are also exported here by name. ``document(fmt)`` renders all of them
with their derivations. Sections:

* metrics and estimators: pass@k = 1 - (1-p)^k, worst@k = p^k, avg@k = p, the unbiased
  estimators 1 - C(m-c, k)/C(m, k) and C(c, k)/C(m, k);
* Beta populations: 1 - pass@k = B(a, b+k)/B(a, b) ~ Gamma(a+b)/Gamma(b) k^(-a);
* zero-signal groups: P(0 < c < n) = 1 - p^n - (1-p)^n and its batch/Beta expectations;
* the GRPO update (2 outcomes, K-arm softmax, decoupled baseline): means and variances;
* the tabular single-problem bound E[1 - p_t] ~ A/(n t) + B/t and the compute-optimal n;
* KL-regularised iterated GRPO: the success-amplification map and its fixed point.

The figures that draw these closed forms beside Monte Carlo and simulator checks are
:mod:`isosim.theory.figures` (``isosim theory --figures DIR``), not imported here.
"""
from ._core import ClosedForm, closed_form, closed_forms
from .amplification import (
    grpo_advantages,
    grpo_amplification_fixed_point,
    grpo_amplification_fixed_points,
    grpo_amplification_iterate,
    grpo_amplification_lower_bound,
    grpo_amplification_map,
    grpo_amplification_map_derivative,
    kl_regularised_optimum,
)
from .document import document
from .grpo import (
    advantage_value,
    decoupled_signal_expectation,
    decoupled_signal_variance,
    group_advantages,
    grpo_signal,
    grpo_signal_expectation,
    grpo_signal_moments,
    grpo_signal_variance,
    softmax_update_cov,
    softmax_update_mean,
    softmax_update_moments,
)
from .passk import (
    avg_at_k,
    beta_fail_at_k,
    beta_fail_at_k_tail,
    beta_pass_at_k,
    beta_worst_at_k,
    pass_at_k,
    pass_at_k_unbiased,
    worst_at_k,
    worst_at_k_unbiased,
)
from .signal import beta_expected_informative, beta_nonzero_signal_prob, expected_informative, nonzero_signal_prob
from .tabular import (
    tabular_bound_constants,
    tabular_compute_optimal_n,
    tabular_drift,
    tabular_ode_potential,
    tabular_ode_suboptimality,
    tabular_optimal_n,
    tabular_step_variance,
    tabular_suboptimality_bound,
)

__all__ = [
    "ClosedForm", "closed_form", "closed_forms", "document",
    # metrics
    "pass_at_k", "worst_at_k", "avg_at_k", "pass_at_k_unbiased", "worst_at_k_unbiased",
    "beta_pass_at_k", "beta_fail_at_k", "beta_fail_at_k_tail", "beta_worst_at_k",
    # signal
    "nonzero_signal_prob", "expected_informative", "beta_nonzero_signal_prob",
    "beta_expected_informative",
    # grpo
    "advantage_value", "group_advantages", "grpo_signal", "grpo_signal_moments",
    "grpo_signal_expectation", "grpo_signal_variance", "softmax_update_moments",
    "softmax_update_mean", "softmax_update_cov", "decoupled_signal_expectation",
    "decoupled_signal_variance",
    # tabular
    "tabular_drift", "tabular_step_variance", "tabular_ode_potential",
    "tabular_ode_suboptimality", "tabular_bound_constants", "tabular_suboptimality_bound",
    "tabular_optimal_n", "tabular_compute_optimal_n",
    # amplification
    "kl_regularised_optimum", "grpo_advantages", "grpo_amplification_map",
    "grpo_amplification_map_derivative", "grpo_amplification_lower_bound",
    "grpo_amplification_fixed_points", "grpo_amplification_fixed_point",
    "grpo_amplification_iterate",
]
