"""``isosim sweep SPEC --out DIR`` and ``isosim sweep status DIR``."""
from __future__ import annotations

import argparse

from ..errors import IsosimInputError
from ._options import add_executor_options, nonnegative_int, output_dir, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run a sweep spec into a resumable store, or show a store's status",
                       description="isosim sweep SPEC --out DIR [--backend local|dask|ray] [--address ADDR] "
                                   "[--workers K]  |  isosim sweep status DIR  |  isosim sweep --list")
    p.add_argument("target", nargs="*", metavar="SPEC | status DIR",
                   help="a TOML spec file or a registered sweep id (q1-easy, q1-easy-testing, f-easy-quick, ...)")
    p.add_argument("--out", metavar="DIR", type=output_dir, help="result store directory (created, or resumed)")
    add_executor_options(p)
    p.add_argument("--root-seed", type=nonnegative_int, default=0,
                   help="root seed from which each replicate's seed is derived (an integer >= 0)")
    p.add_argument("--list", action="store_true",
                   help="list the registered sweeps: the built-in specs, then the finding sweeps at both scales")
    p.add_argument("--json", action="store_true", help="print JSON (status, list)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (by default a bar shows on stderr when it is a terminal)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..experiments.progress import quiet_flag
    from ..experiments.sweep import run_sweep, sweep_status
    from ..study.registry import entries, get_spec

    if args.list:
        rows = []
        for e in entries().values():
            s = e.spec
            row = {"id": s.id, "group": e.group, "question": s.question, "runs": len(list(s.runs(0))),
                   "testing_runs": len(list(s.testing().runs(0)))}
            if e.group == "finding":
                row.update({"name": e.name, "scale": e.scale, "findings": list(e.findings)})
            rows.append(row)
        if args.json:
            print_json(rows)
            return 0
        for r in rows:
            if r["group"] == "built-in":
                print(f"{r['id']:<10} {r['question']}  {r['runs']:>4} runs  ({r['id']}-testing: {r['testing_runs']} runs)")
        print("finding sweeps, full and quick scale (isosim reproduce / isosim figures store each in <root>/<id>):")
        quick = {r["name"]: r for r in rows if r.get("scale") == "quick"}
        for r in rows:
            if r.get("scale") == "full":
                q = quick[r["name"]]
                print(f"{r['id']:<26} {r['question']}  {r['runs']:>4} runs  {q['id']:<27} {q['runs']:>4} runs  "
                      f"finding{'s' if len(r['findings']) > 1 else ''} {', '.join(map(str, r['findings']))}")
        return 0
    if not args.target:
        raise IsosimInputError("give a spec (file or built-in id) or 'status DIR'")
    if args.target[0] == "status":
        if len(args.target) != 2:
            raise IsosimInputError("usage: isosim sweep status DIR")
        st = sweep_status(args.target[1])
        if args.json:
            print_json(st)
        else:
            print(f"sweep {st['id']} ({st['question']}): {st['done']}/{st['total']} runs stored, "
                  f"root seed {st['root_seed']}, written by isosim {st['isosim_version']}")
            if st["unreadable"]:
                print(f"{len(st['unreadable'])} run file(s) cannot be read and count as missing (a resumed sweep "
                      f"recomputes them): {', '.join(st['unreadable'])}")
        return 0
    if len(args.target) != 1:
        raise IsosimInputError("give exactly one spec")
    if not args.out:
        raise IsosimInputError("--out DIR is required")
    spec = get_spec(args.target[0])
    store = run_sweep(spec, args.out, backend=args.backend, address=args.address, workers=args.workers,
                      root_seed=args.root_seed, progress=quiet_flag(args.quiet))
    st = sweep_status(store.root)
    print(f"sweep {st['id']}: {st['done']}/{st['total']} runs in {store.root}")
    return 0
