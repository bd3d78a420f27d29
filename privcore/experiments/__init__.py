"""Runners that regenerate every table and figure of the papers as tidy CSVs and plotly figures.

``python -m privcore experiment NAME --dataset D [--quick]`` (see :mod:`privcore.experiments.cli`);
one module per experiment, each with ``run(ctx: RunContext) -> pandas.DataFrame``. Columns of
every CSV: ``data/results/README.md``. Our numbers beside the papers': ``docs/RESULTS.md``.

============  ==================================================================================
``table1``    posthoc paper Table 1: eight obfuscators under PTR, accuracy and release rate
``table1-global``  Table 1's obfuscators under the certified global mechanism, all test images
``table1-weights``  Table 1's ARL, ARL-C and N at the authors' loss weights (α = 0.9, σ = 0.1), PTR
``mechanisms``  the never-⊥ posthoc mechanisms at equal total (ε, δ): chosen on validation, test once
``table2``    posthoc paper Table 2: LDP-Image, LDP-Embedding and the adversarial pipeline
``attack``    posthoc paper Tables 3–6: reconstruction attack, SSIM / ℓ1 / ℓ2 / PSNR over (R, ε)
``attack-frontier``  the attack on global releases of every shipped global model and ARL-C-N, equal total ε
``attack-global``  Tables 3–6 for the default model under the global mechanism, the scale-told attacker
``fig2``      posthoc paper Fig. 2: local Lipschitz constant against the ARL weight α
``fig3``      posthoc paper Fig. 3: decoded points on the boundary of the R-ball
``fig4``      posthoc paper Fig. 4: certification runtime against radius, dimension, depth
``ip``        inference-privacy paper Figs 3–5 and its CIFAR table
``audit``     empirical privacy audit of every mechanism (lower bounds on ε)
``calibration``  Table 1's release noise under the paper's and the authors' code's calibrations
``ceiling``   the accuracy any obfuscator could reach under the global mechanism, shipped models beside
``neighbours``  what R protects: shares of test images with another (the same) class within R
``select``    the ARL-C-N release margin and classifier schedule chosen on validation
``select-global``  obfuscator and classifier for the global mechanism chosen on validation
``select-frontier``  low-ε obfuscators for the global mechanism (training ε, output dimension, ARL)
``frontier-groupsort``  GroupSort (MaxMin) obfuscators beside ``select-frontier``'s selection, ε = 2
============  ==================================================================================
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privcore.experiments.runner import RunContext

#: names served lazily (PEP 562): ``privcore --help`` imports the experiment CLI, not numpy and pandas
_LAZY = {
    "AUDIT_MODELS": "audit_pairs",
    "hoeffding_halfwidth": "report",
    "PAPER_DELTA": "ptr_common",
    "DEFAULT_RESULTS_DIR": "runner",
    "RunContext": "runner",
    "ResultTable": "tables",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"privcore.experiments.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'privcore.experiments' has no attribute {name!r}")

__all__ = [
    "AUDIT_MODELS",
    "DEFAULT_RESULTS_DIR",
    "EXPERIMENTS",
    "MEASURES",
    "NOT_IN_ALL",
    "PAPER_DELTA",
    "ResultTable",
    "RunContext",
    "get_experiment",
    "hoeffding_halfwidth",
    "run_experiment",
]

#: Experiment name → module (under privcore.experiments) holding ``run(ctx)``, in ``all`` order.
EXPERIMENTS: dict[str, str] = {
    "audit": "audit",
    "fig4": "fig4",
    "ip": "ip",
    "fig3": "fig3",
    "fig2": "fig2",
    "table2": "table2",
    "table1": "table1",
    "table1-global": "table1_global",
    "table1-weights": "table1_weights",
    "mechanisms": "mechanisms",
    "attack": "attack",
    "attack-frontier": "attack_frontier",
    "attack-global": "attack_global",
    "calibration": "calibration",
    "ceiling": "ceiling",
    "neighbours": "neighbours",
    "select": "select",
    "select-global": "select_global",
    "select-frontier": "select_frontier",
    "frontier-groupsort": "frontier_groupsort",
}
#: The registry mechanism whose releases an experiment's table measures, where it is one mechanism (its
#: ε column is that mechanism's own ε: PTR's half of the total in ``table1`` and ``attack``); ``ip``
#: names its mechanism per row.
MEASURES: dict[str, str] = {"table1": "PTR", "table1-global": "Global", "table1-weights": "PTR",
                             "attack": "PTR"}
#: Experiments that ``all`` leaves out (run them by name): they train models, or read models trained
#: for them alone.
NOT_IN_ALL: frozenset[str] = frozenset({"select", "select-global", "select-frontier", "frontier-groupsort",
                                        "table1-weights"})


def get_experiment(name: str) -> Callable[[RunContext], Any]:
    """The ``run`` function of experiment ``name`` (ValueError naming the known ones otherwise)."""
    if name not in EXPERIMENTS:
        raise ValueError(f"experiment must be one of {', '.join(map(repr, EXPERIMENTS))}, got {name!r}")
    module = importlib.import_module(f"privcore.experiments.{EXPERIMENTS[name]}")
    return module.run


def run_experiment(name: str, ctx: RunContext) -> Any:
    """Run one experiment (resuming where a previous identical run stopped); return its DataFrame."""
    return get_experiment(name)(ctx)
