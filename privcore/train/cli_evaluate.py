"""``python -m privcore evaluate``: test-set accuracy of the shipped pipelines and IP classifiers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from privcore.train.cli_common import DATASET, DEVICE, MODELS, SEED


def _fmt_eval(res: dict[str, Any]) -> str:
    lines = [f"== {res['dataset']} (test set) =="]
    for o in res["obfuscators"]:
        via = "release classifier" if o.get("classifier") == "release-classifier" else "obfuscator's head"
        line = f"{o['obfuscator']:>14}: accuracy ε=∞ {o['accuracy_eps_inf']:.4f} ({via})"
        if "noise_only_accuracy" in o:
            noisy = ", ".join(f"ε={k}: {v:.3f}" for k, v in o["noise_only_accuracy"].items())
            line += f" | Δp={o['delta_p']:.4g}, R={o['radius']:g}, release noise only (no ⊥): {noisy}"
        lines.append(line)
    for m in res["ip"]:
        lip = (
            f" (certified μ₁={m['lipschitz']['l1']:.4g}, μ₂={m['lipschitz']['l2']:.4g})"
            if m["lipschitz"]
            else ""
        )
        lines.append(f"{m['name']:>20}: accuracy {m['accuracy']:.4f}{lip}")
    return "\n".join(lines)


def evaluate(
    dataset: str = DATASET,
    obfuscator: list[str] = typer.Option(
        None, "--obfuscator", "-o", help="variant(s); default: every shipped one"
    ),
    epsilons: str = typer.Option("1,2,5,10", help="ε values for the release-noise accuracy"),
    ip: bool = typer.Option(True, "--ip/--no-ip", help="also evaluate the IP classifiers"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    device: str = DEVICE,
    seed: int = SEED,
    models_dir: Path = MODELS,
) -> None:
    """Test-set accuracy of the shipped pipelines (ε = ∞ and under release noise) and IP classifiers."""
    from privcore.errors import CheckpointError, DatasetUnavailableError
    from privcore.train.evaluate import evaluate_dataset

    try:
        res = evaluate_dataset(
            dataset,
            obfuscators=obfuscator or None,
            models_dir=models_dir,
            device=device,
            epsilons=tuple(float(e) for e in epsilons.split(",")),
            include_ip=ip,
            seed=seed,
        )
    except (CheckpointError, DatasetUnavailableError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(json.dumps(res, indent=2) if as_json else _fmt_eval(res))
