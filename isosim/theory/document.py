"""Render every closed form and its derivation as one Markdown or LaTeX document.

Prose is written with inline math in ``$...$`` and code in backticks; the renderer escapes
the prose for LaTeX and prints each expression with ``sympy.latex``.
"""
from __future__ import annotations

import re

import sympy as sp

from .. import __version__
from ..errors import IsosimInputError
from . import amplification, grpo, passk, signal, tabular
from ._core import REGISTRY, eta, n, p, t, z, z0

FORMATS = ("markdown", "latex")

#: section -> introduction (the derivation in brief), in document order
SECTIONS: dict[str, str] = {
    "Metrics and estimators": (
        "A problem with pass rate $p$ is solved by each of $k$ independent samples with "
        "probability $p$. pass@k (best@k) asks for at least one success, worst@k for $k$ of "
        "$k$, avg@k for the mean. From $c$ correct of $m \\ge k$ samples, choosing $k$ of the "
        "$m$ without replacement gives the unbiased estimators; they are evaluated as products "
        "of $k$ ratios, never as large binomial coefficients."
    ),
    "Beta pass-rate populations": (
        "If the pass rates of a problem set follow $\\mathrm{Beta}(a, b)$, the population "
        "metrics are Beta-function ratios. Stirling's formula gives "
        "$\\Gamma(b+k)/\\Gamma(a+b+k) \\sim k^{-a}$, so 1 - pass@k decays as a power law "
        "$k^{-a}$: the smaller $a$ (more mass near $p = 0$), the slower repeated sampling "
        "covers the set."
    ),
    "Zero-signal groups": (
        "A group of $n$ rollouts has $c \\sim \\mathrm{Bin}(n, p)$ successes. With a group "
        "baseline the update vanishes when $c = 0$ or $c = n$, so a problem teaches nothing "
        "with probability $p^n + (1-p)^n$. Small $n$ wastes hard ($p \\approx 0$) and easy "
        "($p \\approx 1$) problems; large $n$ recovers them at a cost of $n$ rollouts each."
    ),
    "The GRPO update on one problem": (
        "Two outcomes, logit $z$, $p = \\sigma(z)$: $\\partial\\log\\pi(y)/\\partial z = r - p$. "
        "Every advantage below depends only on $(r_j, c)$ and sums to zero over the group, so "
        "the summed signal $S = \\sum_j A_j (r_j - p) = \\sum_j A_j r_j$ is a function of $c$ "
        "alone. Expectations over $c \\sim \\mathrm{Bin}(n, p)$ follow from the factorial "
        "moments $E[c^{\\underline{j}}] = n^{\\underline{j}} p^j$; the code derives them "
        "mechanically (`grpo_signal_moments_derived`) and the tests check the compact forms "
        "below against that derivation, the exact pmf sums and Monte Carlo."
    ),
    "K-arm softmax": (
        "Logits over $K$ arms, $\\pi = \\mathrm{softmax}(\\theta)$, rewards $r_a \\in \\{0, 1\\}$, "
        "$p = \\sum_a \\pi_a r_a$, update $g = \\frac1n \\sum_j A_j (e_{y_j} - \\pi)$. With "
        "zero-sum advantages $g_a = (N_a/n)\\, h(c, r_a)$, $N_a$ the count of arm $a$. Given $c$, "
        "the counts of the rewarded arms are multinomial with probabilities $\\pi_a/p$ and the "
        "others with $\\pi_a/(1-p)$, which gives $E[N_a N_b \\mid c]$ and reduces every moment "
        "to a sum over $c$ (exact for std scaling, closed form for the mean baseline and RLOO)."
    ),
    "Decoupled baseline": (
        "The baseline $b = c_{est}/n_{est}$ comes from $n_{est}$ rollouts; the update uses a "
        "uniformly random subset of $n_{train} \\le n_{est}$ of them. The train rollouts are "
        "still i.i.d. Bernoulli($p$), and the rest contribute an independent "
        "$c_{rest} \\sim \\mathrm{Bin}(n_{est} - n_{train}, p)$ to the baseline. A better "
        "baseline (larger $n_{est}$) raises the mean signal towards $n_{train}\\, p(1-p)$ and "
        "lowers its variance, at the price of $n_{est} - n_{train}$ rollouts that are not "
        "trained on."
    ),
    "Tabular single-problem bound": (
        "One problem, tabular logit $z$, step $z_{t+1} = z_t + \\eta\\, c_t(n - c_t)/n^2$ "
        "(group-averaged mean-baseline signal). The mean-field ODE "
        "$dz/dt = \\eta' p (1-p)$, $\\eta' = \\eta(n-1)/n$, integrates exactly to "
        "$F(z_t) = F(z_0) + \\eta' t$, hence $1 - p_t \\sim 1/(\\eta' t) = A/(nt) + B/t$. "
        "Near $p = 1$ the noisy recursion is a stream of jumps of size $h = \\eta(n-1)/n^2$ "
        "in $z$ at rate $n(1-p)$; the odds $e^z$ are a self-similar Markov process whose "
        "Lamperti Levy process has mean $nh = \\eta'$, and $E[e^{-z_t}] \\sim 1/(\\eta' t)$ "
        "(Bertoin and Yor's entrance-law identity; a squared-Bessel diffusion approximation "
        "gives the same constant to first order in $h$). This heuristic says that noise adds "
        "no $1/t$ term, only $O(\\log t / t^2)$ corrections; Monte Carlo runs of the recursion "
        "agree with the ODE within 2%. At fixed compute $C = nt$ the suboptimality "
        "$n^2/((n-1)\\eta C)$ grows with $n$: sequential steps beat parallel samples and the "
        "compute-optimal group is the smallest allowed, $n^* = 2$ (3 with square-root "
        "step-size scaling). Assumptions: one problem, exact tabular gradients, small steps."
    ),
    "KL-regularised iterated GRPO (success amplification)": (
        "Solving $\\max_\\pi E_\\pi[A_t] - \\beta\\,\\mathrm{KL}(\\pi \\| \\pi_{ref})$ "
        "exactly each "
        "iteration, with $A_t$ the std-normalised GRPO advantage under the current policy, "
        "gives $\\pi_{t+1}(y) \\propto \\pi_{ref}(y) e^{A_t(y)/\\beta}$ and the scalar map "
        "$p_{t+1} = h(p_t)$. The reward gap $A_+ - A_- = 1/\\sqrt{p(1-p)+\\epsilon}$ is at least "
        "2 (for $\\epsilon = 0$), against 1 for the raw reward, so the fixed point exceeds both "
        "$p_0$ and the reward-regularised optimum $p^*_{\\mathrm{KL}}$."
    ),
}

def _extras() -> dict[str, list[tuple[str, str]]]:
    F = tabular.tabular_ode_potential_expr()
    """Displayed equations that are not registered closed forms, per section."""
    return {
        "K-arm softmax": [(
            "General expected update (any zero-sum advantage)",
            r"E[g_a] = \frac{\pi_a (r_a - p)\, E[S]}{n\, p (1-p)}",
        ), (
            "RLOO", r"g^{\mathrm{rloo}} = \frac{n}{n-1}\, g^{\mathrm{mean}}",
        )],
        "Tabular single-problem bound": [(
            "Exact solution of the mean-field ODE",
            sp.latex(sp.Eq(F, F.subs(z, z0) + eta * (n - 1) / n * t)),
        ), (
            "Identity used", sp.latex(sp.Eq(1 / (p * (1 - p)), 2 + sp.exp(z) + sp.exp(-z)))
            + r"\quad (p = \sigma(z))",
        )],
        "KL-regularised iterated GRPO (success amplification)": [(
            "Stability of a fixed point",
            r"|h'(p^*)| < 1,\quad h'(p) = \frac{h(1-h)(2p-1)}{2\beta\,(p(1-p)+\epsilon)^{3/2}}",
        )],
    }


def _numbers() -> tuple[list[str], list[list[str]]]:
    rows = []
    for pr in (0.01, 0.05):
        for nn in (8, 64):
            rows.append([f"P(non-zero signal), p={pr}, n={nn}",
                         f"{float(signal.nonzero_signal_prob(pr, nn)):.3f}"])
    rows.append(["E[S] mean / std / rloo, n=8, p=0.3",
                 " / ".join(f"{float(grpo.grpo_signal_expectation(8, 0.3, adv)):.4f}"
                            for adv in grpo.ADVANTAGES)])
    rows.append(["1 - pass@k, Beta(0.5, 2), k=1024 (exact / tail)",
                 f"{float(passk.beta_fail_at_k(0.5, 2, 1024)):.5f} / "
                 f"{float(passk.beta_fail_at_k_tail(0.5, 2, 1024)):.5f}"])
    A, B = tabular.tabular_bound_constants(8, 1.0)
    rows.append(["Tabular A, B at n=8, eta=1", f"{A:.4f}, {B:.4f}"])
    rows.append(["Tabular compute-optimal n, C=1e6, eta=1 (gamma = 0 / 0.5)",
                 f"{tabular.tabular_compute_optimal_n(1e6, 1.0)} / "
                 f"{tabular.tabular_compute_optimal_n(1e6, 1.0, lr_exponent=0.5)}"])
    for pr0, bt in ((0.1, 1.0), (0.3, 2.0)):
        rows.append([f"p0={pr0}, beta={bt:g}: p*_KL, GRPO fixed point",
                     f"{float(amplification.kl_regularised_optimum(pr0, bt)):.4f}, "
                     f"{amplification.grpo_amplification_fixed_point(pr0, bt):.4f}"])
    return ["quantity", "value"], rows


# --------------------------------------------------------------------------- rendering
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}"}


def _latex_text(text: str) -> str:
    """Escape prose for LaTeX, keeping $...$ math and turning `code` into \\texttt."""
    out = []
    for j, part in enumerate(re.split(r"(\$[^$]*\$)", text)):
        if j % 2:
            out.append(part)
            continue
        pieces = re.split(r"(`[^`]*`)", part)
        for q, piece in enumerate(pieces):
            body = piece[1:-1] if q % 2 else piece
            esc = "".join(_LATEX_SPECIAL.get(ch, ch) for ch in body)
            out.append(r"\texttt{" + esc + "}" if q % 2 else esc)
    return "".join(out)


def _md_text(text: str) -> str:
    return text


def document(fmt: str = "markdown") -> str:
    """All closed forms and their derivations as a Markdown or LaTeX document (a string)."""
    if fmt not in FORMATS:
        raise IsosimInputError(f"unknown format {fmt!r}; expected markdown or latex")
    latex = fmt == "latex"
    txt = _latex_text if latex else _md_text
    extras = _extras()
    title = "isosim theory: closed forms of the GRPO surrogate"
    lines: list[str] = []

    def heading(level: int, text: str):
        if latex:
            cmd = {1: "section", 2: "subsection"}[level]
            lines.append(f"\\{cmd}*{{{txt(text)}}}")
        else:
            lines.append("#" * (level + 1) + " " + text)
        lines.append("")

    def display(eq: str):
        if latex:
            lines.extend([r"\begin{equation*}", eq, r"\end{equation*}"])
        else:
            lines.extend(["$$", eq, "$$"])
        lines.append("")

    def para(text: str):
        lines.append(txt(text))
        lines.append("")

    if latex:
        lines += [r"\documentclass{article}", r"\usepackage{amsmath,amssymb}",
                  r"\usepackage[margin=2.5cm]{geometry}", f"\\title{{{txt(title)}}}",
                  f"\\date{{isosim {__version__}}}", r"\begin{document}", r"\maketitle", ""]
    else:
        lines += [f"# {title}", "", f"Generated by `isosim theory` (isosim {__version__}).", ""]
    para("Each closed form below is implemented in `isosim.theory` as a sympy expression, "
         "its lambdified numeric function and a direct numpy implementation; the tests check "
         "the three against each other, against exact sums and against Monte Carlo.")

    for section, intro in SECTIONS.items():
        heading(1, section)
        para(intro)
        for form in (f for f in REGISTRY.values() if f.section == section):
            heading(2, f"{form.title} (`{form.name}`)")
            display(form.display_latex())
            if form.note:
                para(form.note)
        for label, eq in extras.get(section, []):
            heading(2, label)
            display(eq)

    heading(1, "Reference values")
    head, rows = _numbers()
    if latex:
        lines += [r"\begin{tabular}{ll}", " & ".join(head) + r" \\ \hline"]
        lines += [" & ".join(_latex_text(x) for x in r) + r" \\" for r in rows]
        lines += [r"\end{tabular}", ""]
        lines += [r"\end{document}"]
    else:
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines).rstrip() + "\n"

