"""``experiment fig3``: posthoc paper Fig. 3 — what an R-neighbourhood looks like.

For a few test images x with embedding z = g(x), decode points on the boundary of ℓ∞ balls
around z along single latent axes: g⁻¹(z + s·r·e_k) for s = ±1, r ∈ R·{½, 1, 2, 4} (R the dataset's
radius) and the most informative axes k (largest KL in the embedder's card). Each picture row is
one (image, axis); the centre tile (framed red) is the reconstruction of x itself. The CSV says
how far each decoded point is from the centre in pixel space (ℓ2, SSIM) and whether the
pipeline's classifier still gives it the same label: what (ε, δ, R)-privacy hides at that R.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privcore._atomic import atomic_path
from privcore.experiments.ptr_common import embed, test_indices
from privcore.experiments.runner import RunContext, save_figure

__all__ = ["COLUMNS", "neighbourhood_points", "run"]

COLUMNS = (
    "dataset",
    "image_index",
    "axis",
    "radius",
    "sign",
    "pixel_l2",
    "ssim_to_centre",
    "label_centre",
    "label_point",
    "tile",
)
KEY = ("image_index", "axis", "radius", "sign")
FACTORS = (0.5, 1.0, 2.0, 4.0)


def neighbourhood_points(
    z: np.ndarray, axis: int, radii: tuple[float, ...]
) -> tuple[np.ndarray, list[tuple[float, int]]]:
    """Latent points z + s·r·e_axis ordered −r_max … 0 … +r_max, with their (r, s) (s = 0: z)."""
    steps = [(r, -1) for r in sorted(radii, reverse=True)] + [(0.0, 0)] + [(r, 1) for r in sorted(radii)]
    pts = np.repeat(z[None, :], len(steps), axis=0)
    for i, (r, s) in enumerate(steps):
        pts[i, axis] += s * r
    return pts, steps


def _axes(pipe: Any, k: int) -> list[int]:
    kl = pipe.cards["embedder"].get("metrics", {}).get("kl_per_dim")
    if not kl:
        return list(range(min(k, pipe.latent_dim)))
    return [int(a) for a in np.argsort(kl)[::-1][:k]]


def _grid_image(tiles: np.ndarray, n_rows: int, n_cols: int, centre_col: int, scale: int) -> np.ndarray:
    """Tiles (n_rows·n_cols, C, H, W) in [0, 1] → one RGB uint8 picture with 2-px gaps, centre framed red."""
    _, c, h, w = tiles.shape
    gap = 2
    big_h, big_w = h * scale, w * scale
    canvas = np.full((n_rows * (big_h + gap) + gap, n_cols * (big_w + gap) + gap, 3), 255, dtype=np.uint8)
    for t in range(n_rows * n_cols):
        row, col = divmod(t, n_cols)
        img = tiles[t]
        rgb = np.repeat(img, 3, axis=0) if c == 1 else img[:3]
        rgb = np.kron(np.clip(rgb, 0, 1), np.ones((1, scale, scale))).transpose(1, 2, 0)
        y0, x0 = gap + row * (big_h + gap), gap + col * (big_w + gap)
        canvas[y0 : y0 + big_h, x0 : x0 + big_w] = (rgb * 255).round().astype(np.uint8)
        if col == centre_col:
            canvas[y0 : y0 + big_h, [x0, x0 + big_w - 1]] = (220, 30, 30)
            canvas[[y0, y0 + big_h - 1], x0 : x0 + big_w] = (220, 30, 30)
    return canvas


def run(ctx: RunContext) -> Any:
    """Fig. 3 for one dataset; write ``fig3.csv``, ``fig3.png`` (PIL) and ``fig3.html``."""
    import plotly.express as px
    import torch
    from PIL import Image

    from privcore.attacks.metrics import ssim
    from privcore.data import load_dataset

    pipe = ctx.pipeline("ARL-C-N")
    ds = load_dataset(ctx.dataset)
    n_images = ctx.pick(full=6, quick=4, tiny=2)
    n_axes = ctx.pick(full=3, quick=2, tiny=1)
    idx = test_indices(ds.x_test.shape[0], n_images, ctx.seed)
    radii = tuple(pipe.radius * f for f in FACTORS)
    axes = _axes(pipe, n_axes)
    config = {
        "images": idx.tolist(),
        "axes": axes,
        "radii": list(radii),
        "weights": pipe.cards["embedder"]["weights"]["sha256"],
        "classifiers": ctx.classifier_weights([pipe.obfuscator_name]),
    }
    table = ctx.table("fig3", columns=COLUMNS, key=KEY, config=config)
    z_all = embed(pipe, ds.x_test[idx])
    tiles, n_rows = [], 0
    for i, image_index in enumerate(idx):
        for axis in axes:
            pts, steps = neighbourhood_points(z_all[i], axis, radii)
            t = torch.as_tensor(pts, dtype=torch.float32)
            decoded = pipe.decode(t).cpu().double()
            labels = pipe.classify(pipe.obfuscate(t)).argmax(-1).cpu().numpy()
            centre = len(steps) // 2
            ref = decoded[centre : centre + 1].expand_as(decoded)
            l2 = ((decoded - ref) ** 2).flatten(1).sum(1).sqrt().numpy()
            sim = ssim(ref, decoded)
            for col, (r, s) in enumerate(steps):
                if not table.done(image_index=int(image_index), axis=axis, radius=r, sign=s):
                    table.add(
                        {
                            "dataset": ctx.dataset,
                            "image_index": int(image_index),
                            "axis": axis,
                            "radius": r,
                            "sign": s,
                            "pixel_l2": float(l2[col]),
                            "ssim_to_centre": float(sim[col]),
                            "label_centre": int(labels[centre]),
                            "label_point": int(labels[col]),
                            "tile": f"{n_rows},{col}",
                        }
                    )
            tiles.append(decoded.numpy())
            n_rows += 1
    n_cols = 2 * len(radii) + 1
    picture = _grid_image(
        np.concatenate(tiles), n_rows, n_cols, len(radii), scale=max(1, 96 // ds.image_shape[-1])
    )
    ctx.dataset_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(ctx.dataset_dir / "fig3.png") as tmp:
        Image.fromarray(picture).save(tmp, format="PNG")
    cols = ", ".join(
        ["−" + f"{r:g}" for r in sorted(radii, reverse=True)] + ["0"] + [f"+{r:g}" for r in radii]
    )
    fig = px.imshow(
        picture,
        title=f"Fig. 3 ({ctx.dataset}): decoded z ± r·e_k, columns r = {cols}; "
        f"rows: test images {idx.tolist()} × axes {axes}",
    )
    fig.update_xaxes(showticklabels=False).update_yaxes(showticklabels=False)
    figures = [*save_figure(fig, ctx.dataset_dir / "fig3", png=False), "fig3.png"]
    return table.finish(figures=figures)
