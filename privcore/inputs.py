"""The image a release starts from, prepared the same way by the dashboard and the CLI (issue 33).

One place for what both do to a user's PNG/JPEG before anything is computed, and for the words they
show about it, so ``privcore release`` and the dashboard's Release page cannot drift apart:

* :func:`prepare_image` — decode to the model's input (:func:`privcore.images.decode_image`), optionally
  inverted, optionally digit-style (:func:`digit_styled`); its ``notes`` say what was done (resized,
  padded, converted, inverted …), each shown as :func:`note_text`;
* :func:`concerns` — why the image may not be a valid input: blank (:func:`privcore.domain.blank_reason`,
  no model needed) or out of domain (:meth:`privcore.domain.DomainProfile.check` against
  :func:`domain_profile`); shown under :func:`concern_heading` and followed by
  :data:`CONCERN_CONSEQUENCE`; nothing is released for such an image until the user confirms it
  (:data:`UNCONFIRMED`, :data:`CONFIRMED`).

Usability only: these read the user's own input on the user's device and release nothing. Never
imports Streamlit (the dashboard memoises these per session itself).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from privcore.domain import DomainProfile, blank_reason
from privcore.errors import PrivcoreError
from privcore.images import DecodedImage, decode_image

__all__ = [
    "CONCERN_CONSEQUENCE",
    "CONFIRMED",
    "DIGIT_STYLE_FACTOR",
    "UNCONFIRMED",
    "concern_heading",
    "concerns",
    "digit_styled",
    "domain_profile",
    "note_text",
    "prepare_image",
]

LOG = logging.getLogger("privcore")

#: Digit-style preprocessing works on the image decoded at this many times the model's size.
DIGIT_STYLE_FACTOR = 4
#: The sentence after the reasons an image does not look like the dataset's.
CONCERN_CONSEQUENCE = "Its release would still be private, but its prediction is likely meaningless."
#: What happens to such an image until the user confirms it (dashboard: a button; CLI: --force).
UNCONFIRMED = "Nothing is computed or released for this image until you confirm it."
#: What the user reads once they have confirmed it.
CONFIRMED = "You confirmed this image; it is used as prepared (its notes say what was done to it)."

#: ``decode(data, (C, H, W), invert)``: how a caller decodes (the dashboard passes its per-session memo).
Decoder = Callable[[bytes, tuple[int, int, int], bool], DecodedImage]


def _decoder(name: str) -> Decoder:
    def decode(data: bytes, shape: tuple[int, int, int], invert: bool) -> DecodedImage:
        return decode_image(data, target_shape=shape, invert=invert, name=name)

    return decode


def digit_styled(
    data: bytes, shape: Sequence[int], *, invert: bool = False, decode: Decoder | None = None
) -> DecodedImage:
    """The image decoded at :data:`DIGIT_STYLE_FACTOR` × the model's size, then made digit-style
    (:func:`privcore.preprocess.digit_style`: invert a light page, crop to the ink, scale, centre by
    mass, pad) at ``shape``; the steps are added to its notes. ValueError when it cannot be used."""
    from privcore.preprocess import digit_style

    dec = decode or _decoder("the upload")
    c, h, w = (int(v) for v in shape)
    big = dec(data, (c, h * DIGIT_STYLE_FACTOR, w * DIGIT_STYLE_FACTOR), bool(invert))
    fill = 20 / 28 if min(h, w) >= 28 else 7 / 8  # MNIST's 20-pixel box in 28; small frames fuller
    pre = digit_style(big.tensor, target_hw=(h, w), fill=fill)
    # the notes of the image at the model's size (its real resize), less the hint to invert a light
    # border when the preprocessing has just done so
    small = dec(data, (c, h, w), bool(invert))
    inverted = any(step.startswith("inverted") for step in pre.steps)
    notes = [n for n in small.notes if not (inverted and "invert it" in n)]
    notes.append("digit-style: " + "; ".join(pre.steps) + ".")
    return replace(small, tensor=pre.tensor, notes=tuple(notes))


def prepare_image(
    data: bytes,
    shape: Sequence[int],
    *,
    invert: bool = False,
    digit_style: bool = False,
    decode: Decoder | None = None,
    name: str = "the upload",
) -> DecodedImage:
    """The model input (``shape`` = (C, H, W)) of an image file's bytes, as the dashboard's upload and
    ``privcore release`` make it: decoded, inverted when ``invert`` (v ↦ 1 − v, for dark-on-light
    drawings), digit-style when ``digit_style``; ``.notes`` says what was done. ValueError (the reason)
    for a file that cannot be used (``name``: what its messages call the file, when ``decode`` is not
    given)."""
    target = tuple(int(v) for v in shape)
    dec = decode or _decoder(name)
    if digit_style:
        return digit_styled(data, target, invert=invert, decode=dec)
    return dec(data, target, bool(invert))  # type: ignore[arg-type]


def note_text(note: str) -> str:
    """One of :attr:`DecodedImage.notes` as the user reads it."""
    return f"Note: {note}"


def concern_heading(name: str, dataset: str) -> str:
    """The line above the :func:`concerns` of the image called ``name`` (shown as given)."""
    return f"{name} does not look like the {dataset} images the models were built for:"


_PROFILES: OrderedDict[tuple[str, str], DomainProfile] = OrderedDict()
_LOCK = threading.Lock()


def domain_profile(dataset: str, pipe: Any) -> DomainProfile:
    """The :class:`~privcore.domain.DomainProfile` of ``dataset``'s test split under ``pipe``'s VAE (its
    training split standardises the embedding), computed once per process and embedder. Raises what
    loading the dataset raises (e.g. :class:`~privcore.errors.DatasetUnavailableError`)."""
    key = (str(dataset), str(pipe.cards["embedder"]["weights"]["sha256"]))
    with _LOCK:
        hit = _PROFILES.get(key)
    if hit is not None:
        return hit
    from privcore.data import load_dataset

    ds = load_dataset(dataset)
    profile = DomainProfile.from_data(
        train=ds.x_train, held_out=ds.x_test, embed=pipe.embed, decode=pipe.decode
    )
    with _LOCK:
        _PROFILES[key] = profile
        while len(_PROFILES) > 8:
            _PROFILES.popitem(last=False)
    return profile


def concerns(x: Any, *, pipe: Any = None, profile: Callable[[], DomainProfile] | None = None) -> list[str]:
    """Why the model input ``x`` (C, H, W) may not be a valid input (empty when none): blank, and — when
    ``pipe`` (its VAE) and ``profile`` (called once, e.g. ``lambda: domain_profile(dataset, pipe)``) are
    given — out of domain. A profile that cannot be had (no data, no model) is logged and skipped."""
    import torch

    out = []
    blank = blank_reason(x)
    if blank is not None:
        out.append(blank)
    if pipe is None or profile is None:
        return out
    try:
        prof = profile()
    except (PrivcoreError, OSError, ValueError, ImportError) as exc:  # the check needs the data and a VAE
        LOG.warning("no domain profile for %s: %s", getattr(pipe, "dataset", "this dataset"), exc)
        return out
    z = pipe.embed(x)
    recon = pipe.decode(torch.as_tensor(z, dtype=torch.float32).reshape(1, -1))
    return out + prof.check(x, z, recon)
