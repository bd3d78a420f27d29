"""Is an input like the images the model was built for? A measured domain check.

A release's guarantee holds for any input, but its usefulness does not: a blank image, a 1×1 pixel, a
colour photo or a page of text fed to a digits model is released as confidently as a digit. One check,
the same for the API (:attr:`privcore.api.Release.warnings`), the CLI (``privcore release`` refuses a
warned image without ``--force``) and the dashboard (the warning beside the model's-eye image):
:func:`check` → a tuple of plain sentences, empty when the image looks in domain.

**Facts about the upload** (:class:`UploadFacts`, read before preprocessing, since resizing loses them):
its size (under half the model's side, or a 1×1 pixel, is enlarged into a blur), its aspect ratio (more
than :data:`MAX_ASPECT`: padded to a square it becomes a thin strip), near-constant pixels (blank), colour
in a grey dataset (:data:`COLOUR_SHARE` of its pixels with chroma max − min of R, G, B ≥
:data:`COLOUR_CHROMA`) and a light background (the median of its edge pixels, after the user's inversion,
above :data:`LIGHT_EDGE`, where every shipped dataset is light on black). These are fixed rules: a
dataset image saved as a PNG never meets them (the measured false alarms below include them).

**Scores of the model input** (the image as the model will see it, after any inversion or digit-style
preprocessing), each higher for a more unusual image:

* ``reconstruction`` — the VAE's reconstruction error ‖x − g⁻¹(g(x))‖² / d;
* ``neighbours`` — the cosine distance to its :data:`K_NEIGHBOURS` nearest training images (a seeded
  sample of at most :data:`N_REFERENCE` images of the training part that excludes the validation split);
* ``faint`` — 1 − its brightest pixel (every dataset image reaches nearly full brightness);
* ``border`` — the mean of its outermost ring of pixels (objects on a black background);

and a near-constant model input (pixel standard deviation below :data:`BLANK_STD`) is blank.

**Calibration** (:meth:`DomainCheck.calibrate`, in this process, never read from disk): on the dataset's
validation split (:func:`privcore.data.validation_split`; at most :data:`N_VALIDATION` of its images, a
seeded sample) every score gets its threshold at one common quantile q, the smallest q at which at most
:data:`ALPHA` = 2 % of the validation images exceed any threshold. The test split is never read. Its
false-alarm rate on each test split and its detection rate on off-domain sets are measured by
``python -m privcore.experiments.domain`` (docs/RESULTS.md, "The domain check").

These are usability checks, not privacy mechanisms: they read the user's own input on the user's device
and release nothing; their thresholds come from public data only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from privcore._inflight import Memo
from privcore.validation import check_in_range

__all__ = [
    "ALPHA",
    "BLANK_STD",
    "SCORES",
    "DomainCheck",
    "UploadFacts",
    "blank_reason",
    "check",
    "domain_check",
    "upload_facts",
]

LOG = logging.getLogger("privcore")

#: Pixel standard deviation (values in [0, 1]) under which an image counts as blank.
BLANK_STD = 0.02
#: Share of the validation images the calibrated check may warn about (the false-alarm target there).
ALPHA = 0.02
#: The model-input scores, in the order their sentences are given.
SCORES = ("reconstruction", "neighbours", "faint", "border")
#: Nearest training images whose mean cosine distance is the ``neighbours`` score.
K_NEIGHBOURS = 5
#: At most this many training images (seeded sample) are the neighbours' reference.
N_REFERENCE = 5000
#: At most this many validation images (seeded sample) calibrate the thresholds.
N_VALIDATION = 3000
#: An upload whose longer side is more than this many times its shorter side is a strip.
MAX_ASPECT = 4.0
#: Chroma (max − min of R, G, B in [0, 1]) from which a pixel counts as coloured …
COLOUR_CHROMA = 0.2
#: … and the share of coloured pixels from which a grey dataset's upload counts as a colour image.
COLOUR_SHARE = 0.1
#: Median edge value (in [0, 1], after the user's inversion) above which the background is light.
LIGHT_EDGE = 0.5
#: Side of the colour thumbnail the upload facts are read from.
_THUMB = 64
_SEED = 0

#: What the models were trained on, in words (``the <dataset> images`` for others).
DATASET_WORDS: Mapping[str, str] = {
    "digits": "scikit-learn's 8×8 handwritten digits (not MNIST's 28×28 ones)",
    "fashion-mnist": "Fashion-MNIST's 28×28 grey photos of clothing",
    "mnist": "MNIST's 28×28 handwritten digits",
    "mnist-full": "MNIST's 28×28 handwritten digits",
}
#: What a warning about an upload to a model of handwritten digits means, and what may help.
_HANDWRITING: Mapping[str, str] = {
    "digits": "Real MNIST digits and photos of handwriting are unlike these 8×8 scans even when they are "
    "digits (nearly every real MNIST test digit is warned about, with or without digit-style preprocessing): "
    "the warning means the model never saw images like this one, not that it is no digit.",
    "mnist": "Photos of handwriting on paper are unlike MNIST's digits even when they are digits; try "
    "digit-style preprocessing, what MNIST did to its digits.",
    "mnist-full": "Photos of handwriting on paper are unlike MNIST's digits even when they are digits; try "
    "digit-style preprocessing, what MNIST did to its digits.",
}


def dataset_words(dataset: str) -> str:
    """What ``dataset``'s models were trained on, in words."""
    return DATASET_WORDS.get(str(dataset), f"the {dataset} images")


@dataclass(frozen=True, kw_only=True)
class UploadFacts:
    """What an upload's pixels say before they are resized to the model's input (:func:`upload_facts`).

    ``width`` × ``height`` in pixels; ``std`` the standard deviation of its grey values; ``colour`` the
    share of its pixels with chroma ≥ :data:`COLOUR_CHROMA`; ``edge`` the median of its edge pixels'
    grey values, after ``inverted`` (the user's choice) was applied. Read from a 64-pixel colour
    thumbnail of the upload, its padding cut off."""

    width: int
    height: int
    std: float
    colour: float
    edge: float
    inverted: bool = False


def upload_facts(data: bytes, *, invert: bool = False) -> UploadFacts:
    """The :class:`UploadFacts` of a PNG/JPEG upload (decoded with
    :func:`privcore.inputs.images.decode_image`, so with its checks: ValueError for a file that cannot
    be used). ``invert``: the user's inversion."""
    from privcore.inputs.images import decode_image

    square = decode_image(data, target_shape=(3, _THUMB, _THUMB))  # one decode, padded to a square
    w, h = square.source_size
    thumb = square.tensor.double()[:, _inside(h, w, axis=0), _inside(h, w, axis=1)]  # the padding cut off
    grey = 0.299 * thumb[0] + 0.587 * thumb[1] + 0.114 * thumb[2]
    chroma = thumb.amax(0) - thumb.amin(0)
    if invert:
        grey = 1.0 - grey
    edges = torch.cat([grey[0], grey[-1], grey[:, 0], grey[:, -1]])
    return UploadFacts(
        width=int(w),
        height=int(h),
        std=float(grey.std(unbiased=False)),
        colour=float((chroma >= COLOUR_CHROMA).double().mean()),
        edge=float(edges.median()),
        inverted=bool(invert),
    )


def _inside(h: int, w: int, *, axis: int) -> slice:
    """The rows (``axis`` 0) or columns (1) of a :data:`_THUMB`-pixel square thumbnail of an h × w image
    (padded to its longer side, centred, as :func:`privcore.inputs.images.decode_image` does) that hold only
    the image's own pixels; at least one, the middle one, for a very thin image."""
    side, size = max(h, w), (h, w)[axis]
    if size == side:
        return slice(0, _THUMB)
    scale = _THUMB / side
    start = (side - size) // 2
    margin = math.ceil(scale / 2) + 1  # resampling mixes up to half a source pixel (enlarging) or one in
    lo, hi = math.floor(start * scale) + margin, math.ceil((start + size) * scale) - margin
    if hi <= lo:
        mid = min(_THUMB - 1, int((start + size / 2) * scale))
        return slice(mid, mid + 1)
    return slice(lo, hi)


def blank_reason(x: Any, *, min_std: float = BLANK_STD) -> str | None:
    """Why ``x`` (pixels in [0, 1]) looks blank, or None: its pixels barely vary."""
    arr = np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, dtype=np.float64)
    std = float(arr.std()) if arr.size else 0.0
    if std < min_std:
        return (
            f"the image is nearly uniform (pixel standard deviation {std:.3g} < {min_std:g}, mean "
            f"{float(arr.mean()) if arr.size else 0.0:.3g}): it may have decoded blank, e.g. a drawing on a "
            "transparent background"
        )
    return None


def _small_text(width: int, height: int, *, model: tuple[int, int]) -> str:
    """Why an upload is too small, naming the side that is: both ("only 5×6 pixels") or the short one
    ("its height is only 1 pixel"), against the model's width × height."""
    w, h = model
    size = f"{width}×{height} pixels (width × height)"
    if max(width, height) < max(2, min(h, w) // 2):
        return (f"The upload is only {size}, less than half the model's {w}×{h}: enlarged to the model's "
                "size it is a blur.")
    side, n, full = ("height", height, h) if height < width else ("width", width, w)
    return (f"The upload is {size}: its {side} is only {n} pixel{'s' if n != 1 else ''}, less than half "
            f"the model's {full} (its input is {w}×{h}): enlarged to the model's size that side is a blur.")


def _raw_warnings(facts: UploadFacts, *, dataset: str, shape: tuple[int, int, int],
                  digit_style: bool) -> list[str]:
    """The fixed rules on the upload's own pixels (module docstring), in words."""
    return _raw(facts, dataset=dataset, shape=shape, digit_style=digit_style)[0]


def _raw(facts: UploadFacts, *, dataset: str, shape: tuple[int, int, int],
         digit_style: bool) -> tuple[list[str], bool]:
    """:func:`_raw_warnings`, and whether they settle it (a blank or tiny upload: nothing more to say)."""
    c, h, w = shape
    out = []
    tiny = min(facts.width, facts.height) < max(2, min(h, w) // 2)
    if tiny:
        out.append(_small_text(facts.width, facts.height, model=(w, h)))
    long, short = max(facts.width, facts.height), min(facts.width, facts.height)
    if long > MAX_ASPECT * short:
        shape_text = "wider than high" if facts.width > facts.height else "higher than wide"
        ratio = long / short
        out.append(
            f"The upload is {facts.width}×{facts.height} pixels (width × height), "
            f"{ratio:.0f} times {shape_text}: padded to the model's square it becomes a thin strip."
            if ratio >= 10 else
            f"The upload is {facts.width}×{facts.height} pixels (width × height), {ratio:.1f} times "
            f"{shape_text}: padded to the model's square it becomes a thin strip."
        )
    if facts.std < BLANK_STD:
        out.append(
            f"The upload is blank: its pixels are nearly one value (standard deviation {facts.std:.2g}); "
            "it may have decoded blank, e.g. a drawing on a transparent background."
        )
    if tiny or facts.std < BLANK_STD:  # nothing to see: its colour or background adds nothing
        return out, True
    if c == 1 and facts.colour >= COLOUR_SHARE:
        out.append(
            f"The upload is in colour ({facts.colour:.0%} of its pixels clearly coloured), but the training "
            "images are grey: it is probably a photo of something else."
        )
    if not digit_style and facts.edge > LIGHT_EDGE:
        if facts.inverted:
            out.append(
                f"After inversion its background is light (edge median {facts.edge:.2f}), but the training "
                "images are light on black: untick Invert."
            )
        else:
            out.append(
                f"Its background is light (edge median {facts.edge:.2f}), but the training images are light "
                "on black: if it is dark on a light page, use Invert (CLI: --invert) or digit-style "
                "preprocessing."
            )
    return out, False


def _border(x: torch.Tensor) -> torch.Tensor:
    """Mean of each image's outermost ring of pixels, (N, C, H, W) → (N,)."""
    ring = torch.cat(
        [x[:, :, 0, :].flatten(1), x[:, :, -1, :].flatten(1), x[:, :, 1:-1, 0].flatten(1),
         x[:, :, 1:-1, -1].flatten(1)], dim=1,
    )
    return ring.mean(1)


@dataclass(frozen=True, kw_only=True, eq=False)
class DomainCheck:
    """The calibrated check of one dataset under one VAE (:meth:`calibrate`; module docstring).

    ``thresholds``: per score of :data:`SCORES`, the common ``quantile`` of its validation values;
    ``val_rate``: the share of the ``n_val`` validation images it warns about (≤ ``alpha``);
    ``n_reference``: training images the ``neighbours`` score compares with."""

    dataset: str
    image_shape: tuple[int, int, int]
    thresholds: Mapping[str, float]
    quantile: float
    alpha: float
    n_val: int
    val_rate: float
    n_reference: int
    embed: Callable[[torch.Tensor], torch.Tensor] = field(repr=False)
    decode: Callable[[torch.Tensor], torch.Tensor] = field(repr=False)
    reference: torch.Tensor = field(repr=False)  # (n_reference, d) unit vectors, float32

    @classmethod
    def calibrate(
        cls,
        dataset: str,
        *,
        embed: Callable[[torch.Tensor], torch.Tensor],
        decode: Callable[[torch.Tensor], torch.Tensor],
        train: torch.Tensor,
        val: torch.Tensor,
        alpha: float = ALPHA,
        n_reference: int = N_REFERENCE,
        n_validation: int = N_VALIDATION,
        seed: int = _SEED,
    ) -> DomainCheck:
        """Thresholds from the validation images ``val`` (never the test split), rounded to 8 bits as an
        upload of one would be, and the neighbours' reference from the training images ``train`` (which
        must exclude ``val``); both subsampled with ``seed`` to at most ``n_validation`` / ``n_reference``
        images (module docstring)."""
        a = check_in_range("alpha", alpha, 0.0, 0.5)
        rng = np.random.default_rng(seed)

        def sample(x: torch.Tensor, n: int) -> torch.Tensor:
            if x.shape[0] <= n:
                return x
            return x[torch.as_tensor(np.sort(rng.choice(x.shape[0], n, replace=False)))]

        ref = sample(train, int(n_reference)).flatten(1).float()
        ref = ref / ref.norm(dim=1, keepdim=True).clamp_min(1e-12)
        # 8-bit, as an upload reaches the check (else a PNG of 15/16 = 239/255 would count as fainter)
        v = torch.round(sample(val, int(n_validation)).float().clamp(0.0, 1.0) * 255.0) / 255.0
        shell = cls(dataset=str(dataset), image_shape=tuple(int(s) for s in train.shape[1:]),
                    thresholds={}, quantile=1.0, alpha=a, n_val=int(v.shape[0]), val_rate=0.0,
                    n_reference=int(ref.shape[0]), embed=embed, decode=decode, reference=ref)
        scores = shell.scores(v)
        q, rate = _common_quantile(scores, a)
        thresholds = {k: float(np.quantile(scores[k], q)) for k in SCORES}
        return cls(dataset=shell.dataset, image_shape=shell.image_shape, thresholds=thresholds, quantile=q,
                   alpha=a, n_val=shell.n_val, val_rate=rate, n_reference=shell.n_reference, embed=embed,
                   decode=decode, reference=ref)

    @torch.no_grad()
    def scores(self, x: torch.Tensor, *, batch_size: int = 500) -> dict[str, np.ndarray]:
        """The model-input scores (:data:`SCORES`, and ``std``) of images ``x`` (N, C, H, W) or (C, H, W)."""
        x = torch.as_tensor(x, dtype=torch.float32)
        if x.ndim == 3:
            x = x[None]
        parts: dict[str, list[np.ndarray]] = {k: [] for k in (*SCORES, "std")}
        k = min(K_NEIGHBOURS, int(self.reference.shape[0]))
        for i in range(0, x.shape[0], batch_size):
            xb = x[i : i + batch_size]
            flat = xb.flatten(1)
            z = torch.as_tensor(self.embed(xb)).float().reshape(xb.shape[0], -1)
            recon = torch.as_tensor(self.decode(z)).double().reshape(flat.shape)
            parts["reconstruction"].append(((flat.double() - recon) ** 2).mean(1).numpy())
            unit = flat / flat.norm(dim=1, keepdim=True).clamp_min(1e-12)
            sims = (unit @ self.reference.T).topk(k, dim=1).values.double()
            parts["neighbours"].append((1.0 - sims.mean(1)).numpy())
            parts["faint"].append((1.0 - flat.amax(1)).double().numpy())
            parts["border"].append(_border(xb).double().numpy())
            parts["std"].append(flat.double().std(1, unbiased=False).numpy())
        return {key: np.concatenate(val) for key, val in parts.items()}

    def warnings(
        self, x: Any, *, upload: UploadFacts | None = None, digit_style: bool = False
    ) -> tuple[str, ...]:
        """Why the model input ``x`` (C, H, W) in [0, 1] may not be like the dataset's images, as plain
        sentences (empty when it looks in domain). ``upload``: the :class:`UploadFacts` of the file it came
        from (None for an array); ``digit_style``: whether it was made digit-style."""
        xt = torch.as_tensor(np.asarray(x.detach().cpu() if hasattr(x, "detach") else x), dtype=torch.float32)
        return self.warnings_many(xt.reshape(1, *self.image_shape), [upload], digit_style=digit_style)[0]

    def warnings_many(
        self,
        x: torch.Tensor,
        uploads: Sequence[UploadFacts | None] | None = None,
        *,
        digit_style: bool = False,
    ) -> list[tuple[str, ...]]:
        """:meth:`warnings` of each of the images ``x`` (N, C, H, W), ``uploads`` their facts (or None)."""
        x = torch.as_tensor(x, dtype=torch.float32)
        scores = self.scores(x)
        ups = list(uploads) if uploads is not None else [None] * x.shape[0]
        if len(ups) != x.shape[0]:
            raise ValueError(f"{len(ups)} upload facts for {x.shape[0]} images")
        return [
            self._sentences({k: float(v[i]) for k, v in scores.items()}, ups[i], digit_style=digit_style)
            for i in range(x.shape[0])
        ]

    def _sentences(
        self, s: Mapping[str, float], upload: UploadFacts | None, *, digit_style: bool
    ) -> tuple[str, ...]:
        out, settled = ([], False) if upload is None else _raw(
            upload, dataset=self.dataset, shape=self.image_shape, digit_style=digit_style
        )
        if settled:  # a blank or tiny upload: what the model makes of it adds nothing
            return tuple(out)
        h, w = self.image_shape[1:]
        if s["std"] < BLANK_STD:
            out.append(
                f"What the model sees is blank: at {w}×{h} its pixels are nearly one value (standard "
                f"deviation {s['std']:.2g})."
            )
            return tuple(out)
        t = self.thresholds
        found = []
        if s["reconstruction"] > t["reconstruction"]:
            found.append(
                f"At {w}×{h}, the model's VAE reconstructs it poorly (error {s['reconstruction']:.3g}; "
                f"threshold {t['reconstruction']:.3g})."
            )
        if s["neighbours"] > t["neighbours"]:
            found.append(
                f"At {w}×{h}, no training image is like it (cosine distance {s['neighbours']:.3g} to its "
                f"{K_NEIGHBOURS} nearest of {self.n_reference:,}; threshold {t['neighbours']:.3g})."
            )
        if s["faint"] > t["faint"]:
            found.append(
                f"At {w}×{h}, it is faint (brightest pixel {1 - s['faint']:.2f}; threshold "
                f"{1 - t['faint']:.2f}): the training images are drawn at full brightness."
            )
        if s["border"] > t["border"]:
            found.append(
                f"At {w}×{h}, its edges are bright (mean {s['border']:.2f}; threshold {t['border']:.2f}): "
                "the training images lie on black."
            )
        out += found
        if not out:
            return ()
        closing = f"The model was trained on {dataset_words(self.dataset)}"
        if found:
            closing += (
                f"; the thresholds warn about at most {self.alpha:.0%} of its {self.n_val:,} validation "
                f"images ({self.val_rate:.1%})"
            )
        out.append(closing + ".")
        if found and not digit_style and self.dataset in _HANDWRITING:
            out.append(_HANDWRITING[self.dataset])
        return tuple(out)


def _common_quantile(scores: Mapping[str, np.ndarray], alpha: float) -> tuple[float, float]:
    """The smallest q (to 1e-6) at which at most ``alpha`` of the images exceed the q-quantile of any
    of the :data:`SCORES`, and that share."""

    def rate(q: float) -> float:
        over = np.zeros(len(next(iter(scores.values()))), dtype=bool)
        for k in SCORES:
            over |= scores[k] > np.quantile(scores[k], q)
        return float(over.mean())

    lo, hi = 0.5, 1.0
    if rate(lo) <= alpha:
        return lo, rate(lo)
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2
        if rate(mid) <= alpha:
            hi = mid
        else:
            lo = mid
    return hi, rate(hi)


_CHECKS = Memo(8)  # per (dataset, embedder digest); a second caller of one being calibrated waits for it


def domain_check(dataset: str, pipe: Any) -> DomainCheck:
    """The :class:`DomainCheck` of ``dataset`` under ``pipe``'s domain VAE (``pipe.domain_embed`` and
    ``pipe.domain_decode``: the dataset's reference VAE, the same for every model of the dataset, else
    ``pipe.embed`` and ``pipe.decode``), calibrated in this process on
    :func:`privcore.data.validation_split` once per dataset and VAE
    and kept in memory only (a call while another thread calibrates it waits for that one). Raises what
    loading the dataset raises (e.g.
    :class:`~privcore.errors.DatasetUnavailableError`)."""
    digest = getattr(pipe, "domain_digest", None) or pipe.cards["embedder"]["weights"]["sha256"]
    key = (str(dataset), str(digest))
    embed, decode = getattr(pipe, "domain_embed", pipe.embed), getattr(pipe, "domain_decode", pipe.decode)

    def compute() -> DomainCheck:
        from privcore.data import load_dataset, validation_split

        split = validation_split(load_dataset(str(dataset)))
        return DomainCheck.calibrate(str(dataset), embed=embed, decode=decode,
                                     train=split.dataset.x_train, val=split.x_val)

    return _CHECKS.get(key, compute)


def check(
    image: Any,
    pipe: Any,
    *,
    dataset: str | None = None,
    upload: bytes | UploadFacts | None = None,
    invert: bool = False,
    digit_style: bool = False,
) -> tuple[str, ...]:
    """The domain check of API, CLI and dashboard: why ``image`` — the model input (C, H, W) in [0, 1] —
    may not be like ``dataset``'s images (default ``pipe.dataset``), as plain sentences; empty when it
    looks in domain. ``upload``: the file's bytes (or their :class:`UploadFacts`) when it came from one,
    with ``invert`` the user's inversion; ``digit_style``: whether the input was made digit-style.

    When the check cannot be calibrated (the dataset's images are not installed), the one sentence says
    so: the image was then not compared with anything."""
    from privcore.errors import PrivcoreError

    name = str(dataset if dataset is not None else pipe.dataset)
    facts = upload_facts(bytes(upload), invert=invert) if isinstance(upload, bytes | bytearray) else upload
    try:
        dc = domain_check(name, pipe)
    except (PrivcoreError, OSError, ImportError, ValueError) as exc:  # no data to calibrate on
        LOG.warning("no domain check for %s: %s", name, exc)
        shape = tuple(int(v) for v in pipe.image_shape)
        raw = [] if facts is None else _raw_warnings(facts, dataset=name, shape=shape,
                                                     digit_style=digit_style)
        return (*raw, f"The domain check could not run ({exc}): this image was not compared with "
                      f"{dataset_words(name)}.")
    return dc.warnings(image, upload=facts, digit_style=digit_style)
