"""``privcore release IMAGE …`` and ``privcore certify IMAGE …``: :mod:`privcore.api` on the
command line, the dashboard's twin: the same preparation of the image (``--invert``,
``--digit-style``; :mod:`privcore.inputs`), the same notes and blank / out-of-domain warnings (on
stderr, in the dashboard's words; such an image is refused unless ``--force``), the same parameter
ranges (:mod:`privcore.ranges`) and the same JSON document (:meth:`privcore.api.Release.document`).
Errors are reported by :func:`privcore.cli.main`. Nothing heavy is imported before a command runs, so
``privcore --help`` stays fast."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from privcore.data.options import dataset_option
from privcore.defaults import DEFAULT_DATASET, DEFAULT_MODELS, OTHER_DEFAULT_MODEL, default_model
from privcore.ranges import ALPHA_RANGE, DELTA_RANGE, EPSILON_RANGE, RADIUS_RANGE

#: what the CLI's messages call the image file
IMAGE_WORDS = "the IMAGE argument"

_IMAGE = typer.Argument(help="a PNG or JPEG image", show_default=False)
_DATASET = typer.Option(help="dataset of the model (digits, fashion-mnist, …)", callback=dataset_option)
_MODEL = typer.Option(
    help="obfuscator variant (e.g. ARL-C-N); default: the dataset's default model ("
    + ", ".join(f"{d}: {m}" for d, m in DEFAULT_MODELS.items()) + f", others: {OTHER_DEFAULT_MODEL})",
    show_default=False,
)
_RADIUS = typer.Option(
    help=f"R, ℓ∞ on the embedding, in [{RADIUS_RANGE[0]:g}, {RADIUS_RANGE[1]:g}] (default: the model card's)"
)
_CERTIFIER = typer.Option(help="exact (LipMIP), lp or interval")
_TIME_LIMIT = typer.Option(help="seconds per MIP; reaching it fails the certification (nothing released)")
_MODELS_DIR = typer.Option(help="models directory (default: $PRIVCORE_MODELS_DIR or the shipped models)")
_INVERT = typer.Option(
    "--invert",
    help="invert the image (v ↦ 1 − v) after decoding, for dark-on-light drawings: the training images are "
    "light on a dark background (the dashboard's Invert box)",
)
_DIGIT_STYLE = typer.Option(
    "--digit-style",
    help="digit-style preprocessing for hand-drawn digits: invert a light page, crop to the ink, centre by "
    "mass, pad (what MNIST did to its digits; the dashboard's box of that name)",
)
_FORCE = typer.Option(
    "--force",
    help="use an image that looks blank or unlike the dataset's images anyway (the warning still goes to "
    "stderr); without it nothing is computed or released for such an image, as the dashboard waits for "
    "'Use this image anyway'",
)

_EPSILON_HELP = (
    f"ε, the total of the sent release's guarantee, for every mechanism (PTR runs at ε/2 so that its "
    f"statement spends ε), in [{EPSILON_RANGE[0]:g}, {EPSILON_RANGE[1]:g}]"
)
_DELTA_HELP = (f"δ, in [{DELTA_RANGE[0]:g}, {DELTA_RANGE[1]:g}], for the mechanisms that take one "
               "(`privcore mechanisms` shows what each guarantee spends)")
_ALPHA_HELP = (f"α, the input radius of the inference-privacy mechanisms (ℓ2, ℓ1 for lap-output; pixels in "
               f"[0, 1]), in [{ALPHA_RANGE[0]:g}, {ALPHA_RANGE[1]:g}]")
_MIN_SECONDS_HELP = (
    "return (and write the release) no earlier than this many seconds after the release began, so that "
    "when a script sends it straight away the send time does not depend on the private φ; if the work "
    "takes longer, nothing is released (exit 1). Without it, send the written file at a time of your choosing"
)
_MECHANISM_HELP = (
    "a mechanism of the registry, any case (default global: f(clip z) + Lap(G·R/ε), (ε, 0, R), never ⊥); "
    "`privcore mechanisms` lists them with their guarantees and parameters. Inference-privacy mechanisms "
    "take --alpha, and --model names their IP classifier"
)


def mechanisms() -> None:
    """List the mechanisms of the registry: name, guarantee of one sent release (ε its total),
    parameters, what each releases and needs."""
    from privcore.mechanisms.registry import MECHANISMS

    for m in MECHANISMS:
        typer.echo(f"{m.name.lower():<14}{m.guarantee:<20}{', '.join(m.parameter_names)}")
        typer.echo(f"{'':<14}{m.description}")
        typer.echo(f"{'':<14}needs {m.needs} ({m.source})")


def _err(line: str) -> None:
    typer.echo(line, err=True)


def _check_release_parameters(*, epsilon: float, delta: float, mechanism: str, radius: float | None,
                              alpha: float | None, certifier: str, min_seconds: float | None) -> Any:
    """The API's checks of :func:`privcore.api.release` (the same function), before the image is read;
    the registry's mechanism."""
    from privcore.api.core import check_release_arguments
    from privcore.validation import check_positive

    mech, _, _ = check_release_arguments(epsilon=epsilon, delta=delta, mechanism=mechanism, radius=radius,
                                         alpha=alpha, certifier=certifier)
    if min_seconds is not None:
        check_positive("min_seconds", min_seconds)
    return mech


def prepared_image(image: Path, *, dataset: str, model: str | None, models_dir: Path | None, invert: bool,
                   digit_style: bool, force: bool) -> Any:
    """The model input of ``image`` as the dashboard makes it (:func:`privcore.inputs.prepare_image`),
    with its notes and the domain check's warnings (:func:`privcore.inputs.domain.check`) on stderr in the
    dashboard's words. Such an image stops the command (exit 2, nothing computed) unless ``force``."""
    from privcore import api, inputs
    from privcore.errors import ParameterError
    from privcore.inputs.images import DEFAULT_MAX_BYTES
    from privcore.validation import check_input_file

    model = default_model(str(dataset)) if model is None else model
    pipe = api._pipeline(str(dataset), str(model), None if models_dir is None else str(models_dir))
    shape = tuple(int(v) for v in pipe.image_shape)
    path = check_input_file(IMAGE_WORDS, image)  # missing: file not found; a directory: said so
    size = path.stat().st_size
    if size > DEFAULT_MAX_BYTES:
        raise ParameterError(f"{IMAGE_WORDS} is too large: {size:,} bytes; the limit is "
                             f"{DEFAULT_MAX_BYTES // (1 << 20)} MiB")
    data = path.read_bytes()
    decoded = inputs.prepare_image(data, shape, invert=invert, name=IMAGE_WORDS)  # ValueError: bad file
    if digit_style:
        try:
            decoded = inputs.prepare_image(data, shape, invert=invert, digit_style=True, name=IMAGE_WORDS)
        except ValueError as exc:
            raise ParameterError(f"digit-style preprocessing failed: {exc}; nothing was released: drop "
                                 "--digit-style to use the image as it is") from exc
    for note in decoded.notes:
        _err(inputs.note_text(note))
    found = inputs.concerns(decoded.tensor, pipe=pipe, dataset=dataset, upload=data, invert=invert,
                            digit_style=digit_style)
    if found:
        _err(f"Warning: {inputs.concern_heading(str(image), dataset)}")
        for reason in found:
            _err(f"* {reason}")
        _err(inputs.CONCERN_CONSEQUENCE)
        if not force:  # exit 2, as for a bad parameter: the input is refused, nothing computed
            _err(f"error: {inputs.UNCONFIRMED.rstrip('.')}: rerun with --force to use it anyway")
            raise typer.Exit(code=2)
        _err(f"{inputs.CONFIRMED} (--force)")
    return decoded.tensor


def _write_json(text: str) -> None:
    """``text`` on stdout as UTF-8 whatever the locale (ℓ∞, ε and δ stay characters)."""
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:
        typer.echo(text)
        return
    sys.stdout.flush()
    stream.write((text + "\n").encode("utf-8"))
    stream.flush()


def release(
    image: Annotated[Path, _IMAGE],
    epsilon: Annotated[float, typer.Option(help=_EPSILON_HELP)],
    delta: Annotated[float, typer.Option(help=_DELTA_HELP)] = 1e-5,
    dataset: Annotated[str, _DATASET] = DEFAULT_DATASET,
    model: Annotated[str | None, _MODEL] = None,
    mechanism: Annotated[str, typer.Option(help=_MECHANISM_HELP)] = "global",
    alpha: Annotated[float | None, typer.Option(help=_ALPHA_HELP)] = None,
    invert: Annotated[bool, _INVERT] = False,
    digit_style: Annotated[bool, _DIGIT_STYLE] = False,
    force: Annotated[bool, _FORCE] = False,
    radius: Annotated[float | None, _RADIUS] = None,
    certifier: Annotated[str, _CERTIFIER] = "exact",
    time_limit: Annotated[float, _TIME_LIMIT] = 60.0,
    models_dir: Annotated[Path | None, _MODELS_DIR] = None,
    out: Annotated[Path | None, typer.Option(help="write the release JSON here (default: stdout)")] = None,
    min_seconds: Annotated[float | None, typer.Option(help=_MIN_SECONDS_HELP)] = None,
) -> None:
    """Release one image with any mechanism: the noisy obfuscated embedding (or ⊥ under PTR), or an IP
    classifier's noisy scores, as UTF-8 JSON, the dashboard's release document; ε is the guarantee's
    total. Notes and warnings about the image go to stderr.

    Under ptr, certifying takes longer for some (private) φ: send the output later, or use --min-seconds."""
    from privcore import api
    from privcore.validation import check_output_file

    mech = _check_release_parameters(epsilon=epsilon, delta=delta, mechanism=mechanism, radius=radius,
                                     alpha=alpha, certifier=certifier, min_seconds=min_seconds)
    if out is not None:  # before anything is computed: a release that could not be written is not made
        check_output_file("--out", out)
    # the image is prepared and checked with the dataset's posthoc pipeline (its domain model)
    x = prepared_image(image, dataset=dataset, model=model if mech.family == "posthoc" else None,
                       models_dir=models_dir, invert=invert, digit_style=digit_style, force=force)
    res = api.release(x, epsilon=epsilon, delta=delta, dataset=dataset, model=model, mechanism=mechanism,
                      radius=radius, alpha=alpha, certifier=certifier, time_limit=time_limit,
                      models_dir=models_dir, min_seconds=min_seconds)
    text = json.dumps(res.document(), indent=2, ensure_ascii=False)
    if out is None:
        _write_json(text)
    else:
        from privcore._atomic import atomic_write_text

        atomic_write_text(out, text + "\n")
        _err(f"{'released' if res.released else '⊥ (nothing released)'}; wrote {out}")


def certify(
    image: Annotated[Path, _IMAGE],
    dataset: Annotated[str, _DATASET] = DEFAULT_DATASET,
    model: Annotated[str | None, _MODEL] = None,
    invert: Annotated[bool, _INVERT] = False,
    digit_style: Annotated[bool, _DIGIT_STYLE] = False,
    force: Annotated[bool, _FORCE] = False,
    radius: Annotated[float | None, _RADIUS] = None,
    certifier: Annotated[str, _CERTIFIER] = "exact",
    time_limit: Annotated[float, _TIME_LIMIT] = 60.0,
    models_dir: Annotated[Path | None, _MODELS_DIR] = None,
) -> None:
    """Print φ, R* and L(f, B(z, R)) for one image (private values: for your own view only)."""
    from privcore import api
    from privcore.validation import check_range

    if radius is not None:
        check_range("radius", radius, RADIUS_RANGE)
    x = prepared_image(image, dataset=dataset, model=model, models_dir=models_dir, invert=invert,
                       digit_style=digit_style, force=force)
    c = api.certify(x, dataset=dataset, model=model, radius=radius, certifier=certifier,
                    time_limit=time_limit, models_dir=models_dir)
    r_star = "none (the test at R failed)" if c.r_star is None else f"{c.r_star:.6g}"
    typer.echo(f"phi     {c.phi:.6g}")
    typer.echo(f"R*      {r_star}")
    bound = "" if c.lipschitz_exact else " (upper bound)"
    typer.echo(f"L       {c.lipschitz:.6g}{bound}  (Δp = {c.delta_p:.6g})")
    grid = f"search to R_max {c.r_max:.6g}, tol {c.tol:.6g}, {c.n_decisions} decisions"
    typer.echo(f"R       {c.radius:.6g}  ({grid})")
