"""A resumable result store: one Parquet file per finished run, keyed by config hash.

Layout: ``DIR/manifest.json`` (the spec, the isosim version, the root seed) and
``DIR/runs/<key>.parquet``. A run is written to a temporary name, fsynced and renamed,
so a reader never sees half a file and an interrupted sweep resumes where it stopped.
A run file that cannot be read as Parquet (cut short or overwritten outside isosim) is not a
stored run: :meth:`RunStore.has` and :meth:`RunStore.keys` leave it out, :meth:`RunStore.unreadable`
lists it, and a resumed sweep recomputes it (replacing that one file and nothing else).
Only the driver writes. pandas/pyarrow (or DuckDB) read the directory directly.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from .. import __version__
from ..errors import IsosimInputError

MANIFEST = "manifest.json"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _differs(old: dict[str, Any], spec: dict[str, Any], root_seed: int) -> str:
    """What the sweep stored in a folder is, said against the one asked for."""
    old_id, new_id = old["spec"].get("id"), spec.get("id")
    if old_id != new_id:
        return f"a different sweep ({old_id}, root seed {old['root_seed']})"
    keys = sorted(k for k in set(old["spec"]) | set(spec) if old["spec"].get(k) != spec.get(k))
    if keys:
        return f"sweep {old_id} with other settings (a different {', '.join(keys)})"
    return f"a different sweep ({old_id} with root seed {old['root_seed']}, not {root_seed})"


def readable(path: Path) -> bool:
    """Whether ``path`` is a Parquet file whose footer and schema can be read.

    A Parquet file starts and ends with the magic bytes ``PAR1`` and ends with its metadata
    (row groups, columns, byte ranges), so a file cut short or overwritten fails here
    without its data being read. The answer is cached per (size, modification time)."""
    try:
        st = path.stat()
    except OSError:
        return False
    return _readable(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=65536)
def _readable(path: str, size: int, mtime_ns: int) -> bool:
    import pyarrow.parquet as pq

    if size < 12:
        return False
    try:
        with open(path, "rb") as fh:
            if fh.read(4) != b"PAR1":
                return False
            fh.seek(-4, os.SEEK_END)
            if fh.read(4) != b"PAR1":
                return False
        meta = pq.read_metadata(path)
        # every column chunk must lie inside the file
        for i in range(meta.num_row_groups):
            rg = meta.row_group(i)
            for j in range(rg.num_columns):
                c = rg.column(j)
                start = c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset
                if start is None or start < 4 or start + c.total_compressed_size > size:
                    return False
    except Exception:  # pyarrow raises several types for a malformed footer
        return False
    return True


class RunStore:
    def __init__(self, root: Path, manifest: dict[str, Any]):
        self.root = root
        self.runs_dir = root / "runs"
        self.manifest = manifest

    @classmethod
    def open(cls, root: str | Path, spec: dict[str, Any], root_seed: int) -> "RunStore":
        """Create the store, or reopen it if it holds the same spec and root seed."""
        root = Path(root)
        if root.exists() and not root.is_dir():
            raise IsosimInputError(f"{root} exists and is not a directory")
        path = root / MANIFEST
        if path.exists():
            store = cls.load(root)
            old = store.manifest
            new = json.loads(json.dumps(spec))
            if old["spec"] != new or old["root_seed"] != root_seed:
                raise IsosimInputError(f"{root} holds {_differs(old, new, root_seed)}; use another --out directory")
            store.clean()
            return store
        if root.exists() and any(p for p in root.iterdir() if not p.name.startswith(".")):
            raise IsosimInputError(f"{root} is not empty and holds no sweep manifest; use another --out directory")
        (root / "runs").mkdir(parents=True, exist_ok=True)
        manifest = {"spec": spec, "root_seed": int(root_seed), "isosim_version": __version__}
        atomic_write_bytes(path, json.dumps(manifest, indent=2, sort_keys=True).encode())
        return cls(root, manifest)

    @classmethod
    def load(cls, root: str | Path) -> "RunStore":
        root = Path(root)
        path = root / MANIFEST
        if not path.is_file():
            raise IsosimInputError(f"{root} is not a sweep directory (no {MANIFEST})")
        try:
            manifest = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise IsosimInputError(f"{path} is not valid JSON: {exc}") from None
        return cls(root, manifest)

    def clean(self) -> None:
        """Remove temporary files an interrupted writer left behind (never a finished run)."""
        for tmp in self.runs_dir.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)

    def path(self, key: str) -> Path:
        return self.runs_dir / f"{key}.parquet"

    def has(self, key: str) -> bool:
        """Whether run ``key`` is stored: its file exists and can be read (:func:`readable`)."""
        return readable(self.path(key))

    def keys(self) -> list[str]:
        """The stored runs: every run file that can be read, in key order."""
        return sorted(p.stem for p in self.runs_dir.glob("*.parquet") if readable(p))

    def unreadable(self) -> list[str]:
        """Run files that exist but cannot be read (not stored runs: a resumed sweep recomputes them)."""
        return sorted(p.stem for p in self.runs_dir.glob("*.parquet") if not readable(p))

    def write(self, key: str, table: pd.DataFrame) -> None:
        import io

        buf = io.BytesIO()
        table.to_parquet(buf, index=False)
        self.write_bytes(key, buf.getvalue())

    def write_bytes(self, key: str, data: bytes) -> None:
        """Store a run's parquet file as it is (a run copied from another store)."""
        atomic_write_bytes(self.path(key), data)

    def read(self) -> pd.DataFrame:
        """All stored runs as one table (in key order)."""
        keys = self.keys()
        if not keys:
            return pd.DataFrame()
        return pd.concat([pd.read_parquet(self.path(k)) for k in keys], ignore_index=True)
