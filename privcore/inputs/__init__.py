"""What a release starts from: a user's image, decoded and checked the same way everywhere.

* :mod:`privcore.inputs.images` — decode a PNG/JPEG (or array) to the model's input, with notes;
  :mod:`privcore.inputs.formats` and :mod:`privcore.inputs.resample` are its parts.
* :mod:`privcore.inputs.preprocess` — digit-style preprocessing (invert, crop, centre by mass).
* :mod:`privcore.inputs.domain` — the measured domain check: is the image like the dataset's?
* :mod:`privcore.inputs.prepare` — the dashboard's and CLI's shared preparation and its words
  (re-exported here).

Names are exported lazily (PEP 562): importing the package loads nothing heavy.
"""

from privcore._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **{name: "prepare" for name in (
            "CONCERN_CONSEQUENCE", "CONFIRMED", "DIGIT_STYLE_FACTOR", "UNCONFIRMED", "concern_heading",
            "concerns", "digit_styled", "note_text", "prepare_image",
        )},
        **{name: "images" for name in (
            "DEFAULT_MAX_BYTES", "DEFAULT_MAX_PIXELS", "DecodedImage", "decode_image", "encode_png",
            "load_image",
        )},
        "check": "domain",
        "domain_check": "domain",
    },
)
