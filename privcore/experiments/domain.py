"""Measure the domain check (:mod:`privcore.inputs.domain`): false alarms and detections.

    python -m privcore.experiments.domain                          # digits, fashion-mnist, mnist
    python -m privcore.experiments.domain --dataset digits --json out.json

Per dataset, the check is calibrated as every process calibrates it
(:func:`privcore.inputs.domain.domain_check`: the validation split, never the test split), then run on

* every **test** image, saved as a PNG and checked as an upload (decoded to the model's input, facts
  read from the file): its warned share is the **false-alarm rate** (target ≤ 5 %);
* **off-domain sets** built here, deterministically, each checked as an upload without inversion or
  digit-style preprocessing: the warned share is the **detection rate** (target ≥ 95 %):

  - ``blank``: one grey level (11 levels) at 8×8, 28×28, 100×100 (PNG) and 640×480 (JPEG), and a
    fully transparent 300×200 PNG of each level (a drawing that decoded blank);
  - ``1x1``: 1×1 PNGs, 32 grey levels and 32 seeded colours;
  - ``colour photo`` / ``grey photo``: seeded crops (32–400 pixels a side, aspect 3:4 to 4:3) of
    scikit-learn's two sample photos (``china.jpg``, ``flower.jpg``) as JPEGs, in colour and in grey
    (the grey set measures what is caught without the colour rule);
  - ``text, dark on light`` / ``text, light on dark``: one to four words rendered with Pillow's
    default font at 12–48 px;
  - the other shipped datasets' test images as PNGs (a seeded sample of at most 1 000): ``digits`` at
    their 8×8, and ``digits ×4`` enlarged ×4 by pixel repetition to 32×32 (not caught by the size rule).

Every rate comes with n and a 95 % Clopper–Pearson interval (:func:`scipy.stats.binomtest`).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "DATASETS",
    "blank_uploads",
    "dataset_uploads",
    "measure",
    "off_domain_sets",
    "one_pixel_uploads",
    "photo_uploads",
    "pipeline_for",
    "text_uploads",
]

#: The shipped datasets the check is measured on.
DATASETS = ("digits", "fashion-mnist", "mnist")
#: At most this many of another dataset's test images form its off-domain set.
N_OTHER = 1000
FALSE_ALARM_TARGET = 0.05
DETECTION_TARGET = 0.95

_WORDS = (
    "privacy release model image digit fashion shirt trouser hello world lorem ipsum dolor sit amet the "
    "quick brown fox jumps over lazy dog upload preview warning certify noise laplace budget epsilon delta "
    "radius embedding sneaker bag coat dress sandal ankle boot pullover invoice total date page"
).split()


def _png(arr: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def _jpeg(arr: np.ndarray, quality: int = 90) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def blank_uploads() -> list[bytes]:
    """One grey level each (11 levels): 8×8, 28×28, 100×100 PNG, 640×480 JPEG, a transparent 300×200 PNG."""
    out = []
    for level in np.linspace(0, 255, 11).round().astype(np.uint8):
        for side in (8, 28, 100):
            out.append(_png(np.full((side, side), level, np.uint8)))
        out.append(_jpeg(np.full((480, 640, 3), level, np.uint8)))
        rgba = np.zeros((200, 300, 4), np.uint8)
        rgba[..., :3] = level
        out.append(_png(rgba))  # alpha 0 everywhere: composited over the background
    return out


def one_pixel_uploads(seed: int = 1) -> list[bytes]:
    """1×1 PNGs: 32 grey levels and 32 seeded colours."""
    rng = np.random.default_rng(seed)
    out = [_png(np.full((1, 1), v, np.uint8)) for v in np.linspace(0, 255, 32).round().astype(np.uint8)]
    out += [_png(rng.integers(0, 256, (1, 1, 3), dtype=np.uint8)) for _ in range(32)]
    return out


def photo_uploads(n: int = 200, *, grey: bool = False, seed: int = 2) -> list[bytes]:
    """``n`` seeded crops of scikit-learn's sample photos (china.jpg, flower.jpg) as JPEGs."""
    from sklearn.datasets import load_sample_images

    photos = load_sample_images().images
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        im = photos[i % len(photos)]
        h, w = im.shape[:2]
        ch = min(h, int(rng.integers(32, 401)))
        cw = min(w, max(1, round(ch * float(rng.uniform(0.75, 4 / 3)))))
        y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        crop = np.ascontiguousarray(im[y : y + ch, x : x + cw])
        if grey:
            crop = np.rint(crop @ np.array([0.299, 0.587, 0.114])).clip(0, 255).astype(np.uint8)
        out.append(_jpeg(crop))
    return out


def text_uploads(n: int = 100, *, dark_on_light: bool = True, seed: int = 3) -> list[bytes]:
    """``n`` PNGs of one to four seeded words in Pillow's default font at 12–48 px, dark on a light
    page or light on a dark one."""
    from PIL import Image, ImageDraw, ImageFont

    rng = np.random.default_rng(seed + (0 if dark_on_light else 1))
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(_WORDS, int(rng.integers(1, 5))))
        size = int(rng.integers(12, 49))
        font = ImageFont.load_default(size=size)
        _, _, right, bottom = font.getbbox(text)
        margin = size // 2
        img = Image.new("L", (right + 2 * margin, bottom + 2 * margin), 255 if dark_on_light else 0)
        ImageDraw.Draw(img).text((margin, margin), text, font=font, fill=0 if dark_on_light else 255)
        out.append(_png(np.asarray(img)))
    return out


def dataset_uploads(x: Any, *, n: int | None = None, scale: int = 1, seed: int = 4) -> list[bytes]:
    """Images ``x`` (N, C, H, W) in [0, 1] as PNGs (a seeded sample of ``n``), enlarged ×``scale`` by
    pixel repetition."""
    from privcore.inputs.images import encode_png

    idx = np.arange(int(x.shape[0]))
    if n is not None and n < idx.size:
        idx = np.sort(np.random.default_rng(seed).choice(idx, n, replace=False))
    return [encode_png(x[int(i)], scale=scale) for i in idx]


def off_domain_sets(dataset: str, load: Callable[[str], Any]) -> dict[str, list[bytes]]:
    """The off-domain sets for ``dataset``'s model (module docstring); ``load(name)`` gives a dataset."""
    sets = {
        "blank": blank_uploads(),
        "1x1": one_pixel_uploads(),
        "colour photo": photo_uploads(),
        "grey photo": photo_uploads(grey=True),
        "text, dark on light": text_uploads(dark_on_light=True),
        "text, light on dark": text_uploads(dark_on_light=False),
    }
    for other in DATASETS:
        if other == dataset:
            continue
        x = load(other).x_test
        if other == "digits":
            sets["digits (8×8)"] = dataset_uploads(x, n=N_OTHER)
            sets["digits ×4 (32×32)"] = dataset_uploads(x, n=N_OTHER, scale=4)
        else:
            sets[other] = dataset_uploads(x, n=N_OTHER)
    return sets


def _rate(k: int, n: int) -> dict[str, Any]:
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95, method="exact")
    return {"k": int(k), "n": int(n), "rate": k / n, "ci_low": float(ci.low), "ci_high": float(ci.high)}


def _warned(dc: Any, uploads: Sequence[bytes], shape: tuple[int, int, int]) -> tuple[int, dict[str, int]]:
    """How many of ``uploads`` the check warns about, checked as the dashboard and CLI check a file,
    and how often each kind of sentence appears."""
    import torch

    from privcore.inputs.domain import upload_facts
    from privcore.inputs.images import decode_image

    xs = torch.stack([decode_image(b, target_shape=shape).tensor for b in uploads])
    facts = [upload_facts(b) for b in uploads]
    found = dc.warnings_many(xs, facts)
    kinds: dict[str, int] = {}
    for sentences in found:
        for s in sentences:
            key = _kind(s)
            kinds[key] = kinds.get(key, 0) + 1
    return sum(bool(f) for f in found), kinds


def _kind(sentence: str) -> str:
    for key, marker in (
        ("small", "less than half the model's"),
        ("strip", "it becomes a thin strip"),
        ("blank upload", "The upload is blank"),
        ("colour", "The upload is in colour"),
        ("light background", "background is light"),
        ("blank input", "What the model sees is blank"),
        ("reconstruction", "reconstructs it poorly"),
        ("neighbours", "no training image is like it"),
        ("faint", "it is faint"),
        ("border", "its edges are bright"),
        ("trained on", "The model was trained on"),
        ("unavailable", "could not run"),
    ):
        if marker in sentence:
            return key
    return "note"


def pipeline_for(dataset: str) -> Any:
    """A pipeline of ``dataset`` (its default model, :func:`privcore.defaults.default_model`, when
    shipped, else its first obfuscator): its VAE is what the check uses."""
    from privcore.defaults import default_model
    from privcore.models.pipeline import list_models, load_pipeline

    names = [
        m.name for m in list_models() if m.dataset == dataset and m.kind == "obfuscator" and not m.study_only
    ]
    if not names:
        raise SystemExit(f"no obfuscator of {dataset} in the models directory")
    model = default_model(dataset)
    return load_pipeline(dataset, model if model in names else sorted(names)[0], device="cpu")


def measure(dataset: str, *, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The check of ``dataset`` calibrated as in every process, its false alarms on the test split and
    its detections on :func:`off_domain_sets`."""
    from privcore.data import load_dataset
    from privcore.inputs.domain import domain_check

    pipe = pipeline_for(dataset)
    start = time.perf_counter()
    dc = domain_check(dataset, pipe)
    seconds = time.perf_counter() - start
    shape = tuple(int(v) for v in pipe.image_shape)
    ds = load_dataset(dataset)
    progress(f"{dataset}: calibrated in {seconds:.1f} s; checking {ds.x_test.shape[0]} test images")
    k, kinds = _warned(dc, dataset_uploads(ds.x_test), shape)
    result: dict[str, Any] = {
        "dataset": dataset,
        "calibration": {
            "quantile": dc.quantile,
            "alpha": dc.alpha,
            "n_val": dc.n_val,
            "val_rate": dc.val_rate,
            "n_reference": dc.n_reference,
            "thresholds": dict(dc.thresholds),
            "seconds": round(seconds, 2),
        },
        "test": {**_rate(k, int(ds.x_test.shape[0])), "kinds": kinds},
        "off_domain": {},
    }
    for name, uploads in off_domain_sets(dataset, load_dataset).items():
        progress(f"{dataset}: {name} ({len(uploads)})")
        k, kinds = _warned(dc, uploads, shape)
        result["off_domain"][name] = {**_rate(k, len(uploads)), "kinds": kinds}
    return result


def _pct(r: dict[str, Any]) -> str:
    return f"{100 * r['rate']:.1f} % [{100 * r['ci_low']:.1f}, {100 * r['ci_high']:.1f}]"


def markdown(results: Sequence[dict[str, Any]]) -> str:
    """The results as a Markdown table: rate, n and the 95 % Clopper–Pearson interval per row."""
    lines = [
        "| model | set | warned | n | rate [95 % CI] | target |",
        "|---|---|---:|---:|---|---|",
    ]
    for r in results:
        t = r["test"]
        ok = "✓" if t["rate"] <= FALSE_ALARM_TARGET else "✗"
        lines.append(
            f"| {r['dataset']} | test split (false alarms) | {t['k']} | {t['n']} | {_pct(t)} | ≤ 5 % {ok} |"
        )
        for name, d in r["off_domain"].items():
            ok = "✓" if d["rate"] >= DETECTION_TARGET else "✗"
            lines.append(f"| {r['dataset']} | {name} | {d['k']} | {d['n']} | {_pct(d)} | ≥ 95 % {ok} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--json", help="also write the results (calibration, counts, intervals) here")
    args = parser.parse_args(argv)
    results = []
    for name in args.dataset:
        results.append(measure(name, progress=lambda m: print(m, file=sys.stderr, flush=True)))
        c = results[-1]["calibration"]
        print(
            f"{name}: q = {c['quantile']:.4f} on {c['n_val']} validation images ({100 * c['val_rate']:.1f} % "
            f"warned there), thresholds {', '.join(f'{k} {v:.4g}' for k, v in c['thresholds'].items())}; "
            f"{c['n_reference']} reference images; calibrated in {c['seconds']} s",
            file=sys.stderr,
        )
    print(markdown(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
