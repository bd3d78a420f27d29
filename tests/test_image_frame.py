"""Model-input pictures are drawn in a 1-pixel grey frame: a blank white upload stays visible on the
white page (privlens.image.framed; the model's-eye picture of privlens.checks)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from privcore.inputs.images import decode_image, encode_png


def _pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("L"))


def test_a_blank_white_upload_is_shown_in_a_visible_frame() -> None:
    from privlens.checks import model_eye
    from privlens.image import FRAME_GREY, CurrentImage

    buf = io.BytesIO()
    Image.fromarray(np.full((40, 40), 255, np.uint8)).save(buf, format="PNG")
    decoded = decode_image(buf.getvalue(), target_shape=(1, 28, 28))
    image = CurrentImage(name="white.png", decoded=decoded, digest="d", source="upload")
    eye = _pixels(model_eye(image))
    plain = _pixels(encode_png(decoded.tensor, scale=1))
    assert (plain == 255).all()  # the input itself is all white
    for edge in (eye[0], eye[-1], eye[:, 0], eye[:, -1]):
        assert (edge == FRAME_GREY).all()
    assert (eye[1:-1, 1:-1] == 255).all()  # the picture inside is unchanged


def test_framed_keeps_colour_pictures_in_colour() -> None:
    import torch

    from privlens.image import FRAME_GREY, framed

    png = framed(encode_png(torch.ones(3, 4, 4), scale=2))
    with Image.open(io.BytesIO(png)) as im:
        assert im.size == (10, 10) and im.mode == "RGB"
        assert im.getpixel((0, 0)) == (FRAME_GREY,) * 3 and im.getpixel((5, 5)) == (255, 255, 255)
