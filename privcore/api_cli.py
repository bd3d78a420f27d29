"""``privcore release IMAGE …`` and ``privcore certify IMAGE …``: :mod:`privcore.api` on the
command line (same checks; errors reported by :func:`privcore.cli.main`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from privcore.cli_errors import dataset_option

_IMAGE = typer.Argument(help="a PNG or JPEG image", show_default=False)
_DATASET = typer.Option(help="dataset of the model (digits, fashion-mnist, …)", callback=dataset_option)
_MODEL = typer.Option(help="obfuscator variant (Table 1 name, e.g. ARL-C-N)")
_RADIUS = typer.Option(help="R, ℓ∞ on the embedding (default: the model card's)")
_CERTIFIER = typer.Option(help="exact (LipMIP), lp or interval")
_TIME_LIMIT = typer.Option(help="seconds per MIP; reaching it fails the certification (nothing released)")
_MODELS_DIR = typer.Option(help="models directory (default: $PRIVCORE_MODELS_DIR or the shipped models)")


_DELTA_HELP = "δ, in [1e-12, 0.5] (the dashboard's range)"
_MIN_SECONDS_HELP = (
    "return (and write the release) no earlier than this many seconds after the release began, so that "
    "when a script sends it straight away the send time does not depend on the private φ; if the work "
    "takes longer, nothing is released (exit 1). Without it, send the written file at a time of your choosing"
)


_MECHANISM_HELP = (
    "global: f(clip z) + Lap(G·R/ε) with G certified over the model's public box, (ε, 0, R), never ⊥; "
    "ptr: posthoc Propose-Test-Release, (2ε, δ/2, R), or ⊥"
)


def release(
    image: Annotated[Path, _IMAGE],
    epsilon: Annotated[float, typer.Option(help="ε of the mechanism: global (ε, 0, R); ptr (2ε, δ/2, R)")],
    delta: Annotated[float, typer.Option(help=_DELTA_HELP)] = 1e-5,
    dataset: Annotated[str, _DATASET] = "digits",
    model: Annotated[str, _MODEL] = "ARL-C-N",
    mechanism: Annotated[str, typer.Option(help=_MECHANISM_HELP)] = "global",
    radius: Annotated[float | None, _RADIUS] = None,
    certifier: Annotated[str, _CERTIFIER] = "exact",
    time_limit: Annotated[float, _TIME_LIMIT] = 60.0,
    models_dir: Annotated[Path | None, _MODELS_DIR] = None,
    out: Annotated[Path | None, typer.Option(help="write the release JSON here (default: stdout)")] = None,
    min_seconds: Annotated[float | None, typer.Option(help=_MIN_SECONDS_HELP)] = None,
) -> None:
    """Release one image: the noisy obfuscated embedding (or ⊥ under PTR) as UTF-8 JSON.

    Under ptr, certifying takes longer for some (private) φ than others: send the output when you
    choose, or use --min-seconds."""
    from privcore.api import release as run

    res = run(image, epsilon=epsilon, delta=delta, dataset=dataset, model=model, mechanism=mechanism,
              radius=radius, certifier=certifier, time_limit=time_limit, models_dir=models_dir,
              min_seconds=min_seconds)
    text = json.dumps(res.document(), indent=2, ensure_ascii=False)
    if out is None:
        typer.echo(text)
    else:
        from privcore._atomic import atomic_write_text

        atomic_write_text(out, text + "\n")
        typer.echo(f"{'released' if res.released else '⊥ (nothing released)'}; wrote {out}", err=True)


def certify(
    image: Annotated[Path, _IMAGE],
    dataset: Annotated[str, _DATASET] = "digits",
    model: Annotated[str, _MODEL] = "ARL-C-N",
    radius: Annotated[float | None, _RADIUS] = None,
    certifier: Annotated[str, _CERTIFIER] = "exact",
    time_limit: Annotated[float, _TIME_LIMIT] = 60.0,
    models_dir: Annotated[Path | None, _MODELS_DIR] = None,
) -> None:
    """Print φ, R* and L(f, B(z, R)) for one image (private values: for your own view only)."""
    from privcore.api import certify as run

    c = run(image, dataset=dataset, model=model, radius=radius, certifier=certifier, time_limit=time_limit,
            models_dir=models_dir)
    r_star = "none (the test at R failed)" if c.r_star is None else f"{c.r_star:.6g}"
    typer.echo(f"phi     {c.phi:.6g}")
    typer.echo(f"R*      {r_star}")
    bound = "" if c.lipschitz_exact else " (upper bound)"
    typer.echo(f"L       {c.lipschitz:.6g}{bound}  (Δp = {c.delta_p:.6g})")
    grid = f"search to R_max {c.r_max:.6g}, tol {c.tol:.6g}, {c.n_decisions} decisions"
    typer.echo(f"R       {c.radius:.6g}  ({grid})")
