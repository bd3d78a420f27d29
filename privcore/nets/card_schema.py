"""What a checkpoint card must say, checked like any parameter before anything is built from it.

:func:`check_card` validates every field the loaders use against :data:`CARD_FIELDS` (with
:mod:`privcore.validation`): every number finite; Δp's statistics (posthoc-PTR Sec. 6), the Lipschitz
constants, noise parameters and the recipe's β in their ranges; the radius R a release defaults to in
:data:`~privcore.ranges.RADIUS_RANGE`, the range a user's R is held to; the global mechanism's
clipping box and constant G (``global_lipschitz``, optional; its G, ``value``, is a hint every process
verifies and a bad one is ignored, never fatal); sizes
(image shape, architecture widths, parameter counts) integers within :data:`MAX_CARD_SIZE`; file
names plain names in the card's folder. A bad card is a CheckpointError naming the card file and the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from privcore.errors import CheckpointError
from privcore.validation import (
    RADIUS_RANGE,
    check_bool,
    check_choice,
    check_in_range,
    check_int,
    check_nonnegative,
    check_positive,
    check_range,
    check_real,
)

__all__ = ["CARD_FIELDS", "GLOBAL_HOWS", "MAX_CARD_SIZE", "check_card"]

#: Largest integer a card may give as a size (an architecture width, a channel count, an image side, a
#: parameter count is checked against the weights instead): 2**24, so a tampered card cannot make
#: :func:`~privcore.nets.checkpoint.build_module` allocate gigabytes before the weights' shapes are compared.
MAX_CARD_SIZE = 1 << 24
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: how a card's global constant G was obtained (:class:`privcore.lipschitz.global_box.How`'s values)
GLOBAL_HOWS = (
    "exact", "enumeration-bound", "cube-exact", "split-bound", "milp-bound", "all-patterns", "interval",
)


def _mapping(name: str, value: Any) -> None:
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be an object (a JSON mapping), got {type(value).__name__} {value!r}")


def _text(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{name} must be a non-empty string, got {type(value).__name__} {value!r}")


def _file_name(name: str, value: Any) -> None:
    _text(name, value)
    if value in (".", "..") or any(ch in value for ch in "/\\\0"):
        raise ValueError(f"{name} must be a plain file name in the card's folder, got {value!r}")


def _sha256(name: str, value: Any) -> None:
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise ValueError(f"{name} must be a SHA-256 (64 lowercase hex digits), got {value!r}")


def _count(name: str, value: Any) -> None:
    check_int(name, value, minimum=0)


def _size(name: str, value: Any) -> None:
    check_in_range(name, check_int(name, value, minimum=1), 1, MAX_CARD_SIZE, low_open=False, high_open=False)


def _positive(name: str, value: Any) -> None:
    check_positive(name, value)


def _radius(name: str, value: Any) -> None:
    """R a release defaults to: in :data:`~privcore.ranges.RADIUS_RANGE`, the range a user's R is held to."""
    check_range(name, value, RADIUS_RANGE)


def _nonnegative(name: str, value: Any) -> None:
    check_nonnegative(name, value)


def _fraction(name: str, value: Any) -> None:
    check_in_range(name, value, 0.0, 1.0, low_open=False, high_open=False)


def _probability(name: str, value: Any) -> None:
    check_in_range(name, value, 0.0, 1.0)


def _flag(name: str, value: Any) -> None:
    check_bool(name, value)


def _image_shape(name: str, value: Any) -> None:
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise ValueError(f"{name} must be [channels, height, width], got {value!r}")
    for axis, v in zip(("channels", "height", "width"), value, strict=True):
        _size(f"{name}.{axis}", v)


def _class_names(name: str, value: Any) -> None:
    if not isinstance(value, list | tuple) or not value:
        raise ValueError(f"{name} must be a non-empty list of names, got {value!r}")
    for i, v in enumerate(value):
        if not isinstance(v, str):
            raise TypeError(f"{name}[{i}] must be a string, got {type(v).__name__} {v!r}")


def _positive_list(name: str, value: Any) -> None:
    if not isinstance(value, list | tuple):
        raise TypeError(f"{name} must be a list of numbers, got {type(value).__name__} {value!r}")
    for i, v in enumerate(value):
        check_positive(f"{name}[{i}]", v)


def _architecture(name: str, value: Any) -> None:
    _mapping(name, value)
    if not value:
        raise ValueError(f"{name} must describe at least one module, got {{}}")
    for module, spec in value.items():
        where = f"{name}.{module}"
        _mapping(where, spec)
        if "type" not in spec:
            raise ValueError(f"{where}.type is missing")
        _text(f"{where}.type", spec["type"])
        if "n_params" in spec:
            _count(f"{where}.n_params", spec["n_params"])
        kwargs = spec.get("kwargs", {})
        _mapping(f"{where}.kwargs", kwargs)
        for path, v in _leaves(kwargs, f"{where}.kwargs"):
            if isinstance(v, bool):
                continue
            if isinstance(v, int):  # widths, channels, dimensions: sizes
                check_in_range(path, v, 0, MAX_CARD_SIZE, low_open=False, high_open=False)


def _fingerprints(name: str, value: Any) -> None:
    _mapping(name, value)
    for k, v in value.items():
        _sha256(f"{name}.{k}", v)


def _leaves(obj: Any, path: str) -> Any:
    """(dotted path, value) of every leaf of a JSON tree."""
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, obj


def _hint(name: str, value: Any) -> None:
    """A value only ever verified, never trusted: anything is accepted (a bad one is ignored by its
    reader, e.g. :func:`~privcore.mechanisms.global_mechanism.card_global_hint`)."""


#: fields that are hints: exempt from the finiteness check, since a bad hint is ignored, not fatal
_HINTS = ("global_lipschitz.value",)


def _is_hint(path: str) -> bool:
    """Whether a leaf's dotted path is a hint or lies inside one."""
    return any(path == h or path.startswith((f"{h}.", f"{h}[")) for h in _HINTS)


def _global_how(name: str, value: Any) -> None:
    check_choice(name, value, GLOBAL_HOWS)


def _bounds(name: str, value: Any) -> None:
    _mapping(name, value)
    for k, v in value.items():
        check_choice(f"{name} key", k, GLOBAL_HOWS)
        check_nonnegative(f"{name}.{k}", v)


def _clip_box(name: str, value: Any) -> None:
    """``{"lower": [...], "upper": [...]}``: finite numbers, one length (1 … MAX_CARD_SIZE), lower ≤ upper."""
    _mapping(name, value)
    sides = []
    for side in ("lower", "upper"):
        v = value.get(side)
        if not isinstance(v, list | tuple) or not 1 <= len(v) <= MAX_CARD_SIZE:
            raise ValueError(f"{name}.{side} must be a non-empty list of numbers, got {v!r}")
        sides.append([check_real(f"{name}.{side}[{i}]", x) for i, x in enumerate(v)])
    lo, hi = sides
    if len(lo) != len(hi):
        raise ValueError(f"{name}.lower and {name}.upper must have one length, got {len(lo)} and {len(hi)}")
    for i, (a, b) in enumerate(zip(lo, hi, strict=True)):
        if not (math.isfinite(a) and math.isfinite(b) and a <= b):
            raise ValueError(f"{name}: coordinate {i} must have finite lower ≤ upper, got {a!r} and {b!r}")


_Check = Callable[[str, Any], None]
#: (field, check, kinds that require it: "*" every card, or a tuple of kinds; () optional). A field of an
#: optional block is required once the block is there (``delta_p`` is absent before Δp is computed).
CARD_FIELDS: tuple[tuple[str, _Check, Any], ...] = (
    ("kind", _text, "*"),
    ("name", _text, ()),
    ("dataset", _mapping, "*"),
    ("dataset.name", _text, "*"),
    ("dataset.image_shape", _image_shape, ("embedder", "ip-classifier")),
    ("dataset.class_names", _class_names, ("embedder", "ip-classifier")),
    ("dataset.n_train", _count, ()),
    ("dataset.n_test", _count, ()),
    ("dataset.fingerprint", _sha256, ()),
    ("architecture", _architecture, "*"),
    ("weights", _mapping, "*"),
    ("weights.file", _file_name, "*"),
    ("weights.sha256", _sha256, "*"),
    ("weights.bytes", _count, ()),
    ("code_fingerprint", _fingerprints, "*"),
    ("radius", _mapping, ("obfuscator",)),
    ("radius.value", _radius, "radius"),
    ("embedder", _mapping, ("obfuscator",)),
    ("embedder.file", _file_name, "embedder"),
    ("embedder.sha256", _sha256, "embedder"),
    ("obfuscator", _mapping, ("attacker", "told-attacker", "release-classifier")),
    ("obfuscator.file", _file_name, ()),
    ("obfuscator.sha256", _sha256, "obfuscator"),
    ("delta_p", _mapping, ()),
    ("delta_p.mu", _nonnegative, "delta_p"),
    ("delta_p.sigma", _nonnegative, "delta_p"),
    ("delta_p.n_sigma", _nonnegative, "delta_p"),
    ("delta_p.proposed", _positive, "delta_p"),
    ("delta_p.n", _size, "delta_p"),
    ("delta_p.radius", _positive, "delta_p"),
    ("delta_p.all_exact", _flag, ()),
    ("delta_p.n_inexact", _count, ()),
    ("delta_p.min", _nonnegative, ()),
    ("delta_p.median", _nonnegative, ()),
    ("delta_p.q95", _nonnegative, ()),
    ("delta_p.max", _nonnegative, ()),
    ("delta_p.fraction_above_proposed", _fraction, ()),
    ("lipschitz", _mapping, ()),
    ("lipschitz.l1", _positive, "lipschitz"),
    ("lipschitz.l2", _positive, "lipschitz"),
    ("release_noise", _mapping, ()),
    ("release_noise.delta_p", _positive, ()),
    ("release_noise.radius", _positive, ()),
    ("release_noise.epsilons", _positive_list, ()),
    ("release_noise.clean_fraction", _fraction, ()),
    ("finetune", _mapping, ()),
    ("finetune.alpha", _positive, ()),
    ("finetune.epsilon", _positive, ()),
    ("finetune.delta", _probability, ()),
    ("finetune.sigma", _nonnegative, ()),
    ("global_lipschitz", _mapping, ()),
    ("global_lipschitz.value", _hint, ()),
    ("global_lipschitz.how", _global_how, "global_lipschitz"),
    ("global_lipschitz.clip_box", _clip_box, "global_lipschitz"),
    ("global_lipschitz.clip_box.margin", _nonnegative, ()),
    ("global_lipschitz.clip_box.n", _count, ()),
    ("global_lipschitz.lower", _nonnegative, ()),
    ("global_lipschitz.seconds", _nonnegative, ()),
    ("global_lipschitz.time_limit", _positive, ()),
    ("global_lipschitz.bounds", _bounds, ()),
    ("recipe", _mapping, ()),
    ("recipe.beta", _nonnegative, ()),
    ("recipe.lr", _positive, ()),
    ("recipe.epochs", _count, ()),
    ("recipe.batch_size", _size, ()),
    ("recipe.latent_dim", _size, ()),
)


def check_card(card: Mapping[str, Any], *, where: str = "card") -> None:
    """Validate every field a card carries (CheckpointError naming ``where``, the card file, and the
    field): the fields the loaders use, in their ranges (:data:`CARD_FIELDS`), and every number finite."""

    def bad(message: str) -> CheckpointError:
        return CheckpointError(
            f"checkpoint card {where} is invalid: {message}; regenerate the checkpoint (see its 'command')"
        )

    if not isinstance(card, Mapping):
        raise bad(f"it must be a JSON object, got {type(card).__name__}")
    kind = card.get("kind")
    for name, check, required in CARD_FIELDS:
        block = card.get(required) if isinstance(required, str) and required != "*" else None
        needed = (
            required == "*"
            or (isinstance(required, tuple) and kind in required)
            or (isinstance(block, Mapping) and bool(block))
        )
        parts = name.split(".")
        node: Any = card
        present = True
        for depth, part in enumerate(parts):
            if depth and node is None:  # inside an optional block written as null
                present = False
                break
            if depth and not isinstance(node, Mapping):
                parent = ".".join(parts[:depth])
                raise bad(
                    f"field {parent!r} must be an object (a JSON mapping) with {part!r}, "
                    f"got {type(node).__name__} {node!r}"
                )
            if part not in node:
                present = False
                break
            node = node[part]
        if not present or (node is None and not needed):
            if needed:
                raise bad(f"field {name!r} is missing")
            continue
        try:
            check(name, node)
        except (TypeError, ValueError) as exc:
            raise bad(f"field {name!r}: {exc}") from exc
    for path, value in _leaves(card, ""):
        if isinstance(value, float) and not math.isfinite(value) and not _is_hint(path):
            raise bad(f"field {path!r} is {value!r}; every number in a card must be finite")
