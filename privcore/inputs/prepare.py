"""The image a release starts from, prepared the same way by the dashboard and the CLI.

One place for what both do to a user's PNG/JPEG before anything is computed, and for the words they
show about it, so ``privcore release`` and the dashboard's Release page cannot drift apart:

* :func:`prepare_image` — decode to the model's input (:func:`privcore.inputs.images.decode_image`),
  optionally inverted, optionally digit-style (:func:`digit_styled`); its ``notes`` say what was done
  (resized, padded, converted, inverted …), each shown as :func:`note_text`;
* :func:`concerns` — why the image may not be a valid input: the measured domain check
  (:func:`privcore.inputs.domain.check`: the upload's own pixels and the model input's scores,
  calibrated on the validation split); shown under :func:`concern_heading` and followed by
  :data:`CONCERN_CONSEQUENCE`; nothing is released for such an image until the user confirms it
  (:data:`UNCONFIRMED`, :data:`CONFIRMED`).

Usability only: these read the user's own input on the user's device and release nothing. Never
imports Streamlit (the dashboard memoises these per session itself).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from privcore.inputs.images import DecodedImage, decode_image

__all__ = [
    "CONCERN_CONSEQUENCE",
    "CONFIRMED",
    "DIGIT_STYLE_FACTOR",
    "UNCONFIRMED",
    "concern_heading",
    "concerns",
    "digit_styled",
    "note_text",
    "prepare_image",
]

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
    (:func:`privcore.inputs.preprocess.digit_style`: invert a light page, crop to the ink, scale, centre by
    mass, pad) at ``shape``; the steps are added to its notes. ValueError when it cannot be used."""
    from privcore.inputs.preprocess import digit_style

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


def concerns(
    x: Any,
    *,
    pipe: Any = None,
    dataset: str | None = None,
    upload: bytes | None = None,
    invert: bool = False,
    digit_style: bool = False,
) -> list[str]:
    """Why the model input ``x`` (C, H, W) may not be a valid input (empty when none):
    :func:`privcore.inputs.domain.check` (``pipe``'s VAE, calibrated on ``dataset``'s validation split) on the
    input and on the file it came from (``upload``, with the user's ``invert``; ``digit_style``: the input
    was made digit-style). Without ``pipe`` (no model), only whether ``x`` is blank."""
    from privcore.inputs.domain import blank_reason, check  # torch: imported where an input is checked

    if pipe is None:
        blank = blank_reason(x)
        return [] if blank is None else [blank]
    return list(check(x, pipe, dataset=dataset, upload=upload, invert=invert, digit_style=digit_style))
