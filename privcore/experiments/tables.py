"""Resumable tidy CSV tables of the experiments, with their provenance (:class:`ResultTable`).

A :class:`ResultTable` records each row as soon as it is computed; rerunning the same command
(same configuration hash) skips the settings already done, while a different configuration starts
afresh; with :class:`Parts`, one part of a table (e.g. one obfuscator) is added or redone alone.

Every file here is written atomically (:mod:`privcore._atomic`: temporary file, fsync, rename,
fsync of the directory), so a run that dies, even on a full disk, leaves the previous complete
file or none, never a truncated or empty one. A new row rewrites the table that way, under an
exclusive lock on its directory, merged with what is on disk, so that two processes resuming the
same table neither lose nor tear each other's rows.
"""

from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import json
import math
import os
import platform
import subprocess
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privcore._atomic import atomic_open, atomic_write_text

try:  # POSIX advisory locks; elsewhere a table has one writer at a time
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["Parts", "ResultTable", "format_value"]


def format_value(value: Any) -> str:
    """One CSV cell: floats in round-trip ``repr`` (``inf``; NaN/None → empty), bools True/False."""
    if value is None:
        return ""
    if isinstance(value, bool | np.bool_):
        return "True" if value else "False"
    if isinstance(value, float | np.floating):
        v = float(value)
        if math.isnan(v):
            return ""
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(value, int | np.integer):
        return str(int(value))
    return str(value)


def _config_hash(config: Mapping[str, Any]) -> str:
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


@contextmanager
def _directory_lock(directory: Path) -> Iterator[None]:
    """Exclusive advisory lock on a directory (flock on its descriptor: no lock file left behind)."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _versions() -> dict[str, str]:
    import plotly
    import torch

    from privcore import __version__

    return {
        "privcore": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "plotly": plotly.__version__,
    }


@dataclass(frozen=True)
class Parts:
    """How a table's config splits into independent parts (e.g. one per obfuscator), so that a run
    adds or redoes one part's rows and keeps the others'.

    ``column``: the CSV column naming a row's part; ``names``: the config field listing this run's
    parts; ``fields``: the config fields that map a part's name to its own settings (weights, Δp…).
    Everything else in the config is shared by all parts."""

    column: str
    names: str
    fields: tuple[str, ...]

    def shared(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The config without the per-part fields."""
        return {k: v for k, v in config.items() if k != self.names and k not in self.fields}

    def of(self, config: Mapping[str, Any], name: str) -> dict[str, Any] | None:
        """Part ``name``'s settings in ``config`` (None when the config does not list it)."""
        if name not in (config.get(self.names) or ()):
            return None
        return {f: (config.get(f) or {}).get(name) for f in self.fields}

    def merge(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
        """``new`` with the parts only ``old`` lists kept (their rows stay in the table)."""
        names = list(dict.fromkeys([*(old.get(self.names) or ()), *(new.get(self.names) or ())]))
        merged = {**dict(new), self.names: names}
        for f in self.fields:
            merged[f] = {**(old.get(f) or {}), **(new.get(f) or {})}
        return merged


class ResultTable:
    """An append-only CSV of one experiment with resume, written atomically (module docstring).

    ``columns`` fixes the CSV header; ``key`` names the columns that identify a setting. ``config``
    (JSON-able) is everything that changes the numbers; its hash decides whether an existing file
    is resumed (same hash) or replaced (different hash, or ``fresh=True``).

    With ``parts`` (:class:`Parts`) only the shared config must match to resume: a part whose own
    settings changed has its rows dropped and recomputed, a new part is added, and the rows of
    parts this run does not list are kept with their recorded settings (``meta["added"]`` names
    the commands that added or redid parts of an existing table).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        columns: Sequence[str],
        key: Sequence[str],
        config: Mapping[str, Any],
        command: str = "",
        fresh: bool = False,
        parts: Parts | None = None,
    ) -> None:
        self.path = Path(path)
        self.meta_path = self.path.with_suffix(".json")
        self.columns = tuple(columns)
        self.key = tuple(key)
        missing = [k for k in self.key if k not in self.columns]
        if missing or len(set(self.columns)) != len(self.columns):
            raise ValueError(f"key columns {missing} are not among the columns, or a column repeats")
        if parts is not None and parts.column not in self.columns:
            raise ValueError(f"parts column {parts.column!r} is not among the columns")
        self.parts = parts
        self.config = dict(config)
        self.config_hash = _config_hash(self.config)
        self._done: set[tuple[str, ...]] = set()
        self._idx = [self.columns.index(k) for k in self.key]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        resumed = False
        redo: set[str] = set()  # parts whose rows are (re)computed by this run
        meta: dict[str, Any] = {}
        if not fresh and self.path.is_file() and self.meta_path.is_file():
            try:
                meta = json.loads(self.meta_path.read_text())
            except (OSError, json.JSONDecodeError):
                meta = {}
            same_columns = tuple(meta.get("columns", ())) == self.columns
            if parts is None:
                if meta.get("config_hash") == self.config_hash and same_columns:
                    resumed = self._load_existing()
            elif same_columns and isinstance(meta.get("config"), dict):
                old = meta["config"]
                if _config_hash(parts.shared(old)) == _config_hash(parts.shared(self.config)):
                    redo = {
                        n for n in self.config.get(parts.names) or ()
                        if parts.of(old, n) != parts.of(self.config, n)
                    }
                    resumed = self._load_existing(drop=redo)
                    if resumed:
                        self.config = parts.merge(old, self.config)
                        self.config_hash = _config_hash(self.config)
        if not resumed:
            self._write_rows([])
            self.meta = {
                "experiment": self.path.stem,
                "command": command,
                "config": self.config,
                "config_hash": self.config_hash,
                "columns": list(self.columns),
                "key": list(self.key),
                "git_revision": _git_revision(),
                "versions": _versions(),
                "started": _utc_now(),
                "finished": None,
                "rows": 0,
                "complete": False,
                "figures": [],
            }
        else:
            self.meta = meta
            self.meta["resumed"] = _utc_now()
            self.meta["complete"] = False
            self.meta["rows"] = len(self._done)
            if parts is not None:
                self.meta["config"], self.meta["config_hash"] = self.config, self.config_hash
                if redo:
                    self.meta.setdefault("added", []).append(
                        {
                            "command": command,
                            "git_revision": _git_revision(),
                            "parts": [n for n in self.config[parts.names] if n in redo],
                            "started": _utc_now(),
                        }
                    )
        self.resumed = resumed
        self._write_meta()

    def _read_rows(self) -> list[list[str]] | None:
        """The complete rows of the CSV on disk; None when it is missing or has another header.

        Rows with the wrong number of cells, and a last line with no line end, are dropped: a file
        written before writes were atomic can end in a row torn mid-write."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        lines = text.splitlines(keepends=True)
        if lines and not lines[-1].endswith(("\n", "\r")):
            lines.pop()
        rows = list(csv.reader(lines))
        if not rows or tuple(rows[0]) != self.columns:
            return None
        return [r for r in rows[1:] if len(r) == len(self.columns)]

    def _write_rows(self, rows: list[list[str]]) -> None:
        with atomic_open(self.path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(self.columns)
            w.writerows(rows)

    def _load_existing(self, drop: Collection[str] = ()) -> bool:
        """Resume from the CSV on disk, without any torn trailing line and without the rows of
        the parts in ``drop``; False when there is no usable CSV."""
        with _directory_lock(self.path.parent):
            rows = self._read_rows()
            if rows is None:
                return False
            if drop and self.parts is not None:
                col = self.columns.index(self.parts.column)
                rows = [r for r in rows if r[col] not in drop]
            self._write_rows(rows)
        self._done = {tuple(r[i] for i in self._idx) for r in rows}
        return True

    def _write_meta(self) -> None:
        atomic_write_text(self.meta_path, json.dumps(self.meta, indent=2, sort_keys=True, default=str) + "\n")

    def _key_of(self, values: Mapping[str, Any]) -> tuple[str, ...]:
        try:
            return tuple(format_value(values[k]) for k in self.key)
        except KeyError as exc:
            raise KeyError(f"setting lacks key column {exc.args[0]!r} (key = {self.key})") from None

    def done(self, **setting: Any) -> bool:
        """True when a row with these key values is already in the table."""
        return self._key_of(setting) in self._done

    @property
    def n_rows(self) -> int:
        """Rows in the table so far."""
        return len(self._done)

    def add(self, row: Mapping[str, Any]) -> None:
        """Append one row (every column present, no extra ones) and flush it to disk."""
        extra = set(row) - set(self.columns)
        missing = [c for c in self.columns if c not in row]
        if extra or missing:
            raise ValueError(f"row has extra columns {sorted(extra)} / lacks {missing}")
        key = self._key_of(row)
        if key in self._done:
            raise ValueError(
                f"a row with key {dict(zip(self.key, key, strict=True))} is already in {self.path}"
            )
        line = [format_value(row[c]) for c in self.columns]
        with _directory_lock(self.path.parent):
            rows = self._read_rows() or []  # with the rows other processes added meanwhile
            on_disk = {tuple(r[i] for i in self._idx) for r in rows}
            if key not in on_disk:  # else another process resuming this table recorded it first
                rows.append(line)
                self._write_rows(rows)
        self._done |= on_disk | {key}
        self.meta["rows"] = len(self._done)
        self._write_meta()

    def frame(self):  # -> pandas.DataFrame
        """The table as a pandas DataFrame (as a reader of the CSV sees it)."""
        import pandas as pd

        return pd.read_csv(self.path)

    def _deduplicate(self) -> int:
        """Rewrite the CSV keeping the first row of each key (another process resuming the same
        table at the same time could append a setting twice); return how many rows were dropped."""
        with _directory_lock(self.path.parent):
            seen: set[tuple[str, ...]] = set()
            rows, dropped = [], 0
            for r in self._read_rows() or []:
                k = tuple(r[i] for i in self._idx)
                if k in seen:
                    dropped += 1
                    continue
                seen.add(k)
                rows.append(r)
            if dropped:
                self._write_rows(rows)
        return dropped

    def finish(self, *, figures: Iterable[str] = (), notes: Mapping[str, Any] | None = None):
        """Mark the run complete, record its figures and notes; return :meth:`frame`."""
        dropped = self._deduplicate()
        if dropped:
            self.meta["duplicates_removed"] = self.meta.get("duplicates_removed", 0) + dropped
        self.meta["finished"] = _utc_now()
        self.meta["complete"] = True
        self.meta["figures"] = sorted(set(self.meta.get("figures", [])) | set(figures))
        if notes:
            self.meta.setdefault("notes", {}).update(dict(notes))
        self._write_meta()
        return self.frame()
