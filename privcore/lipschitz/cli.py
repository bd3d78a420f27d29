"""``python -m privcore cache ...``: the engine's stored state.

``cache`` commands: ``info`` (where it is, its limits and how much it holds), ``purge`` (drop expired
rows and the oldest beyond the size limit now), ``rotate-secret`` (a new installation secret: every
entry becomes a miss and is removed), ``clear`` (remove every entry). See
:mod:`privcore.lipschitz.cache` for what is stored and how it is protected.

Pattern tables are never stored: each process builds its own from the weights
(:mod:`privcore.lipschitz.pattern_store`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

cache_app = typer.Typer(name="cache", help="The persistent Lipschitz/φ cache: info, purge, rotate-secret, "
                        "clear.", no_args_is_help=True, add_completion=False)

DirOption = Annotated[
    Path | None,
    typer.Option("--dir", help="cache directory (default: $PRIVLENS_CACHE_DIR or .cache/lipschitz)"),
]


def _cache(directory: Path | None):
    from privcore.lipschitz.cache import LipschitzCache

    return LipschitzCache(directory)


@cache_app.command()
def info(directory: DirOption = None) -> None:
    """Directory, limits, rows and stored size."""
    cache = _cache(directory)
    typer.echo(f"directory   {cache.directory}")
    typer.echo(f"rows        {len(cache)} (not expired)")
    typer.echo(f"stored      {cache.stored_bytes() / 2**20:.2f} MiB of {cache.max_bytes / 2**20:.0f} MiB")
    typer.echo(f"expiry      {cache.ttl_seconds / 86400:g} days")


@cache_app.command()
def purge(directory: DirOption = None) -> None:
    """Remove expired rows (and the oldest beyond the size limit) now."""
    typer.echo(f"removed {_cache(directory).purge()} rows")


@cache_app.command("rotate-secret")
def rotate_secret(directory: DirOption = None) -> None:
    """Replace the installation secret: every existing entry becomes a miss and is removed."""
    cache = _cache(directory)
    cache.rotate_secret()
    typer.echo(f"new secret in {cache.secret_path}; the cache is empty")


@cache_app.command()
def clear(directory: DirOption = None) -> None:
    """Remove every entry (the secret is kept)."""
    cache = _cache(directory)
    cache.clear()
    typer.echo(f"cleared {cache.path}")
