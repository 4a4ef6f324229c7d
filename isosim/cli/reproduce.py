"""``isosim reproduce``: easy vs hard in simulation at two group sizes, at equal compute."""
from __future__ import annotations

import argparse

from ._options import print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="the main job: easy vs hard at two group sizes, at equal compute")
    p.add_argument("--quick", action="store_true", help="a smaller budget (seconds)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..config import Allocation, SimConfig
    from ..simulate import simulate

    budget = 2**19 if args.quick else 2**22
    rows = []
    for preset in ("easy", "hard"):
        for n in (8, 64):
            cfg = SimConfig().replace(population={"preset": preset},
                                      allocation=Allocation(n=n, b_problem=32, budget=float(budget)))
            final = simulate(cfg, 0).final("val")
            rows.append({"preset": preset, "n": n, "B_problem": 32, "budget": budget,
                         **{m: final[m] for m in ("avg@4", "best@4", "worst@4")}})
    if args.json:
        print_json(rows)
        return 0
    print(f"validation metrics after {budget:,} rollouts (strategies model, B_problem = 32, seed 0)")
    print(f"{'preset':<8}{'n':>6}{'avg@4':>10}{'best@4':>10}{'worst@4':>10}")
    for r in rows:
        print(f"{r['preset']:<8}{r['n']:>6}{r['avg@4']:>10.4f}{r['best@4']:>10.4f}{r['worst@4']:>10.4f}")
    return 0
