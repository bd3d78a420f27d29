"""Noise seeds of experiment rows, derived from what the row *is*, never from where it sits.

``row_seed(run_seed, "table1", "ARL-C-N", 1.0)`` hashes the run's ``--seed`` with the row's
identity (experiment, variant, setting): a row's noise, hence its numbers, are the same whether
or not other variants or settings were selected in the same run (a seed that counted list
positions would change Table 1's ARL-C-N rows whenever C-N was also selected).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["row_seed"]


def row_seed(run_seed: int, experiment: str, *key: Any) -> int:
    """A 63-bit seed from SHA-256 of the canonical JSON of (run seed, experiment, key...)."""
    text = json.dumps([int(run_seed), str(experiment), *key], default=str, allow_nan=True)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") >> 1
