"""Neighbourhood: the decoded R-ball around the current image along chosen latent axes (posthoc
Fig. 3), so that R has a visual meaning. Widgets and layout only."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch

from privcore.inputs import encode_png
from privlens import mechanism_view as mv
from privlens import pipelines, results, ui
from privlens.image import require_image
from privlens.latent import latent_walk, rank_axes, tile_images
from privlens.settings import RADIUS_GRID

s = ui.page_setup()
st.title("Neighbourhood")
st.caption(
    "The guarantee protects every image whose embedding lies within ℓ∞ distance R of yours. Here are "
    "some of them: the decoder's pictures of z + t·e_k for offsets t ∈ [−R, R] along latent axes k (posthoc "
    "Fig. 3; the centre column, framed in red, is the reconstruction of your image), and corners z + R·s of "
    "the ball, its farthest points. If they all look alike, R is small; if the digit changes, R is large."
)

loaded = pipelines.pipeline(s)
if loaded is None:
    st.stop()
pipe = loaded.pipeline
if (note := pipelines.embedder_note(pipe)) is not None:
    st.info(note)
image = require_image(loaded.dataset, pipe.image_shape)

ui.bound_widget(
    "select_slider",
    "radius",
    "R (ℓ∞ radius in the embedding)",
    options=RADIUS_GRID,
    format_func=ui.fmt_num,
    suffix="_nb",
)
s = ui.settings()
R = s.radius
z = mv.embedding(pipe, image)
d = z.size


def decode(points: np.ndarray) -> np.ndarray:
    """Decoder on a batch of latent points (numpy in, numpy out)."""
    return pipe.decode(torch.as_tensor(points, dtype=torch.float32)).cpu().numpy()


ranked = rank_axes(decode, z, radius=R, top=4)
c1, c2 = st.columns([3, 1])
axes = c1.multiselect(
    f"Latent axes (of {d}; default: the 4 that change the picture most at this R)",
    list(range(d)),
    default=list(ranked),
    key="nb_axes",
)
steps = c2.select_slider("Steps per side", options=(1, 2, 3, 4), value=3, key="nb_steps")
if not axes:
    st.info("Pick at least one latent axis.")
    st.stop()
offsets = np.linspace(-R, R, 2 * steps + 1)
walk = latent_walk(z, axes=axes, offsets=offsets)
flat = walk.reshape(-1, d)
pictures = decode(flat).reshape(len(axes), len(offsets), *pipe.image_shape)
labels = pipe.classify(pipe.obfuscate(torch.as_tensor(flat, dtype=torch.float32))).argmax(-1).cpu().numpy()
labels = labels.reshape(len(axes), len(offsets))
scale = max(2, 72 // pipe.image_shape[2])
png = encode_png(tile_images(pictures, pad=1, highlight_col=steps), scale=scale)
st.image(
    png,
    caption=f"Rows: latent axes {', '.join(map(str, axes))}; columns: offsets "
    f"{', '.join(f'{t:+.3g}' for t in offsets)} (R = {R:g})",
)
st.download_button(
    "Download the picture (PNG)",
    png,
    file_name=f"neighbourhood-R{R:g}.png",
    mime="image/png",
    key="dl_nb",
    on_click="ignore",
)
names = pipe.class_names
table = pd.DataFrame(
    [[names[int(v)] for v in row] for row in labels],
    index=[f"axis {k}" for k in axes],
    columns=[f"{t:+.3g}" for t in offsets],
)
st.markdown("**What the classifier reads at each point** (noise-free; a change means R spans two classes):")
st.dataframe(table, width="stretch")

st.subheader("Corners of the ball")
rng = np.random.default_rng(0)  # display only: which corners to show (no privacy role)
signs = rng.choice((-1.0, 1.0), size=(8, d))
corners = z[None, :] + R * signs
corner_pics = decode(np.concatenate([z[None, :], corners])).reshape(1, 9, *pipe.image_shape)
png2 = encode_png(tile_images(corner_pics, pad=1, highlight_col=0), scale=scale)
st.image(
    png2, caption="Left (framed): your image's reconstruction; then 8 random corners z + R·s, s ∈ {±1}^d."
)
st.download_button(
    "Download the corners (PNG)",
    png2,
    file_name=f"corners-R{R:g}.png",
    mime="image/png",
    key="dl_corners",
    on_click="ignore",
)

st.subheader("What R protects")
protection = results.what_r_protects(results.load_results(loaded.dataset, "neighbours"),
                                     str(pipe.cards["obfuscator"]["embedder"]["sha256"]))
if protection is None:
    command = results.experiment_command("neighbours", loaded.dataset, quick=False)
    st.caption(f"No measurement for this embedder yet: `{command}` writes it.")
else:
    st.markdown("The guarantee hides the style within a class, not the class (measured at the model's own R, "
                "every test image against the training images):")
    for line in protection.lines:
        st.markdown(f"* {line}")
    st.dataframe(protection.table, width="stretch", hide_index=True)
