"""The Lipschitz page's certified radius table (posthoc paper Sec. 4: L(f, B(z, r)) at several radii) and
its process-wide memo key, shared by the page and the server's warm-up.

A shipped sample's table is public (its bytes and the weights are): :func:`prepare_sample` certifies the
default sample's, outside any session, into the same :func:`privlens.memo.shared_memo` entry the page
reads, by the page's own decode and embedding path. An upload's table stays in its session's memo (the
page). View glue: the certification is privcore's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["MEMO", "MULTIPLES", "embed", "prepare_sample", "radii_of", "radius_table", "table_key"]

#: the radii of the table, as multiples of the sidebar's R
MULTIPLES = (0.125, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
#: the memo name of the page's tables and of the weights' global bound
MEMO = "privlens_lipschitz"


def radii_of(radius: float) -> tuple[float, ...]:
    """The table's radii at the sidebar's R."""
    return tuple(round(radius * m, 6) for m in MULTIPLES)


def table_key(pipe: Any, digest: str, radii: Sequence[float]) -> tuple[str, str, tuple[float, ...]]:
    """The memo key of a table: the obfuscator's weights (SHA-256 of its card), the image's digest, the
    radii."""
    return str(pipe.cards["obfuscator"]["weights"]["sha256"]), digest, tuple(radii)


def embed(pipe: Any, tensor: Any) -> np.ndarray:
    """z = g(x) as a read-only float64 vector (what the page certifies around)."""
    z = pipe.embed(tensor).double().cpu().numpy().reshape(-1)
    z.setflags(write=False)
    return z


def radius_table(net: Any, z: np.ndarray, radii: Sequence[float], *, cache: bool | None,
                 progress: Callable[[float, str], None] | None = None) -> pd.DataFrame:
    """Exact (LipMIP portfolio), LP and interval upper bounds and the verified lower bound at every
    radius, one row each; ``progress(fraction, text)`` after each. CertificationError when one fails."""
    from privcore.lipschitz import Certifier, relaxed_upper_bound

    rows = []
    exact = Certifier(kind="exact", cache=cache, time_limit=60.0)  # per image: deployment
    for i, r in enumerate(radii):
        c = exact.certify(net, z, r)
        row = {
            "radius": r,
            "exact_upper": c.upper,
            "lower": c.lower,
            "exact": c.exact,
            "solver": c.solver,
            "status": c.status,
            "unstable": c.n_unstable,
            "solve_seconds": c.seconds,
            "lp_upper": relaxed_upper_bound(net, z, r, kind="lp"),
            "interval_upper": relaxed_upper_bound(net, z, r, kind="interval"),
        }
        rows.append(row)
        if progress is not None:
            progress((i + 1) / len(radii), f"radius {r:g}: L ≤ {row['exact_upper']:.4g} ({row['solver']})")
    return pd.DataFrame(rows)


def prepare_sample(dataset: str, pipe: Any, radius: float, *, cache: bool | None) -> bool:
    """Certify the first shipped sample of ``dataset`` (the image a new session opens on) at
    :func:`radii_of` ``radius`` into the page's process-wide memo, decoded and embedded as the page does
    (:func:`privlens.image.current_image`); its global bound too. Public inputs only. Needs Streamlit's
    runtime (the memo); whether there was a sample."""
    from privcore.inputs import decode_image
    from privcore.lipschitz import as_network, max_pattern_norm
    from privlens.image import image_digest, samples
    from privlens.memo import shared_memo

    shipped = samples(dataset)
    if not shipped:
        return False
    shape = tuple(int(v) for v in pipe.image_shape)
    decoded = decode_image(shipped[0].data(), target_shape=shape, background=0.0, invert=False)
    net = as_network(pipe.obfuscator)
    radii = radii_of(radius)
    key = table_key(pipe, image_digest(decoded.tensor), radii)
    z = embed(pipe, decoded.tensor)
    shared_memo(MEMO, key, lambda: radius_table(net, z, radii, cache=cache))
    shared_memo(MEMO, ("global", net.digest), lambda: max_pattern_norm(net, max_nodes=2_000_000))
    return True
