"""Measure the mean field's ranking error against the simulator and write the file `isosim plan`
reads for its confidence (isosim/plan/ranking_error.json; docs/planner.md, section 5).

    python docs/planner_ranking_error.py --out isosim/plan/ranking_error.json   # the shipped grid
    python docs/planner_ranking_error.py --small --out /tmp/ranking_error.json  # seconds: a format check

The grid, the statistic and the summary are those of `isosim.plan.ranking` (FULL, or SMALL with
--small), measured by `isosim.plan.ranking_measure`. The full grid takes about 45 s on 2 cores (about a minute of CPU).
"""
import argparse
import json
from pathlib import Path

from isosim.plan.ranking import FULL, SMALL
from isosim.plan.ranking_measure import measure


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="the JSON file to write")
    ap.add_argument("--small", action="store_true", help="the small grid (seconds), not the shipped one")
    ap.add_argument("--quiet", action="store_true", help="no line per case")
    args = ap.parse_args(argv)
    data = measure(SMALL if args.small else FULL, progress=None if args.quiet else print)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    for family, s in data["summary"].items():
        print(f"{family:>5}: {s['cases']} cases, hit rate {s['hit_rate']:.0%}, regret mean {s['regret_mean']:.4f}, "
              f"p90 {s['regret_p90']:.4f}, max {s['regret_max']:.4f} (noise {s['noise_median']:.4f})")
    print(f"wrote {args.out} ({data['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
