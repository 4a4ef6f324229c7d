"""Write the expected quick-scale verdicts that ``tests/test_findings.py`` compares against.

    isosim reproduce --quick --out isosim-out                 # the quick finding sweeps
    python tests/regenerate_expected_verdicts.py --root isosim-out/findings

It reads the stored quick sweeps, decides every finding (:func:`isosim.study.findings.check_findings`)
and writes ``tests/data/expected_verdicts_quick.json``: per finding its title, verdict and the
bootstrap probability that its criterion holds. Regenerate it when a change to the model or to a
check moves a verdict on purpose, and say why in the commit.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from isosim.study.findings import Results, check_findings

OUT = Path(__file__).parent / "data" / "expected_verdicts_quick.json"


def expected(findings: list[dict]) -> dict:
    return {str(f["id"]): {"title": f["title"], "verdict": f["verdict"], "p_holds": f["p_holds"]} for f in findings}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default="isosim-out/findings", help="the folder holding the quick finding sweeps")
    p.add_argument("--out", default=str(OUT))
    a = p.parse_args()
    data = expected(check_findings(Results(a.root, "quick", run=False)))
    Path(a.out).write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
