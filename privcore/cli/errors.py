"""How the command line reports failures: expected errors as one message naming the problem and
the fix (exit 1; 2 for a bad parameter or usage), tracebacks only with ``--debug``.

Kept apart from :mod:`privcore.cli` (and free of heavy imports) so that every command module can
use :func:`dataset_option` without an import cycle or a slower ``--help``.
"""

from __future__ import annotations

import errno
from typing import Any

__all__ = ["click_exceptions", "describe"]

#: Exit codes: 1 = the command failed, 2 = it was called wrongly (click's own code for usage).
FAILED, USAGE = 1, 2

_DISK_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def click_exceptions() -> Any:
    """The module of click's exceptions that typer raises (typer ≥ 0.24 vendors click)."""
    try:
        from typer._click import exceptions
    except ImportError:  # older typer: click itself
        from click import exceptions
    return exceptions


def _where(exc: OSError) -> str:
    name = exc.filename if exc.filename is not None else ""
    return f" {name}" if name else ""


def describe(exc: BaseException) -> tuple[str, int]:
    """``(message, exit code)`` for an exception a command let escape."""
    from privcore.errors import (
        CertificationError,
        CheckpointError,
        DatasetUnavailableError,
        ParameterError,
        PrivcoreError,
    )

    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, ParameterError | ValueError):  # privcore's bad input is a ValueError naming it
        return f"bad parameter: {text}", USAGE
    if isinstance(exc, CertificationError):
        fix = "raise the solver time limit, use fewer points, or choose --certifier lp / interval"
        return f"certification failed: {text}. Fix: {fix}", FAILED
    if isinstance(exc, DatasetUnavailableError):
        return f"dataset not available: {text}", FAILED
    if isinstance(exc, CheckpointError):
        return f"model checkpoint problem: {text}", FAILED
    if isinstance(exc, PrivcoreError):
        return text, FAILED
    if isinstance(exc, OSError) and exc.errno in _DISK_FULL:
        return (
            f"disk full while writing{_where(exc)}. Fix: free space there, or write elsewhere "
            "(--out / --models-dir / $PRIVLENS_CACHE_DIR)",
            FAILED,
        )
    if isinstance(exc, FileNotFoundError):
        if exc.filename is not None:
            return f"file not found: {exc.filename}. Fix: check the path or the option naming it", FAILED
        return text, FAILED
    if isinstance(exc, PermissionError | IsADirectoryError | NotADirectoryError):
        return f"cannot use{_where(exc)}: {exc.strerror or text}. Fix: choose a path you can write", FAILED
    if isinstance(exc, OSError):
        return f"{exc.strerror or text}{_where(exc)}", FAILED
    if isinstance(exc, MemoryError):
        return "out of memory. Fix: fewer points or workers (--n-test, --workers)", FAILED
    return (
        f"internal error: {type(exc).__name__}: {text}. This is a bug: rerun with --debug for the "
        "traceback and report it",
        FAILED,
    )
