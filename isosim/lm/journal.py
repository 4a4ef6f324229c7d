"""The results file of ``isosim lm validate``: append-only JSON lines (``DIR/results.jsonl``),
every record tagged with the configuration id, so an interrupted validation resumes."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np


class Journal:
    """Append-only JSON lines; every record carries the configuration id."""

    def __init__(self, path: Path, config_id: str):
        self.path, self.cid = path, config_id
        self.records = []
        if path.exists():
            text = path.read_text()
            if text and not text.endswith("\n"):  # a record cut short: start the next one on a new line
                with open(path, "a") as fh:
                    fh.write("\n")
            for line in text.splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:  # a line cut by an interruption
                    continue
                if rec.get("config_id") == config_id:
                    self.records.append(rec)

    def write(self, kind: str, **fields) -> dict:
        rec = {"kind": kind, "config_id": self.cid, "time": time.time(), **fields}
        with open(self.path, "a") as fh:
            fh.write(json.dumps(rec, default=_jsonable) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.records.append(rec)
        return rec

    def last(self, kind: str, **match) -> dict | None:
        for rec in reversed(self.records):
            if rec["kind"] == kind and all(rec.get(k) == v for k, v in match.items()):
                return rec
        return None


def _jsonable(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)
