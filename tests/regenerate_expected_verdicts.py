"""Write the expected quick-scale verdicts that ``tests/test_findings.py`` compares against.

    isosim reproduce --quick --out isosim-out                 # the quick finding sweeps
    python tests/regenerate_expected_verdicts.py --root isosim-out/findings

It reads the stored quick sweeps, decides every finding (:func:`isosim.study.findings.check_findings`)
and writes ``tests/data/expected_verdicts_quick.json``: each finding whose verdict is ``holds``,
with its title and the bootstrap probability that its criterion holds. Only holds are pinned: the
test names a pinned finding that no longer holds, and a finding that moves from fails (or
inconclusive) to holds never fails it. Regenerate the file when a change to the model or to a
check moves a verdict on purpose (to pin a new holds, or to unpin a lost one), and say why in the
commit.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from isosim.study.findings import Results, check_findings

OUT = Path(__file__).parent / "data" / "expected_verdicts_quick.json"


def expected(findings) -> dict:
    """The findings that hold, by id: the verdicts the test pins."""
    return {str(f["id"]): {"title": f["title"], "verdict": f["verdict"], "p_holds": f["p_holds"]}
            for f in findings if f["verdict"] == "holds"}


def lost_holds(pinned: dict, findings) -> list[str]:
    """A line for each pinned finding (``expected``'s output) that does not hold in ``findings``
    (``check_findings``'s output); a finding that holds without being pinned is not named."""
    got = {str(f["id"]): f for f in findings}
    lost = []
    for fid, want in sorted(pinned.items(), key=lambda kv: int(kv[0])):
        f = got.get(fid)
        if f is None:
            lost.append(f"finding {fid} ({want['title']}): expected holds (P = {want['p_holds']}), not reported")
        elif f["verdict"] != "holds":
            lost.append(f"finding {fid} ({f['title']}): expected holds (P = {want['p_holds']}), "
                        f"got {f['verdict']} (P = {f['p_holds']})")
    return lost


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
