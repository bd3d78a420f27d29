"""The ``--dataset`` option of every command: known names, checked when a command runs."""

from __future__ import annotations

from typing import Any

__all__ = ["dataset_option", "known_datasets"]


def known_datasets() -> tuple[str, ...]:
    """The registered dataset names (imports the registry, hence torch: call it only when a
    command runs, never at import)."""
    from privcore.data import dataset_names

    return tuple(dataset_names())


def dataset_option(value: Any) -> Any:
    """Typer callback of ``--dataset`` options: an unknown name is a usage error listing the known."""
    import typer

    if value is None or value in known_datasets():
        return value
    raise typer.BadParameter(f"unknown dataset {value!r} (known: {', '.join(known_datasets())})")
