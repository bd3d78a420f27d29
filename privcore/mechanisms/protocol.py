"""The mechanism protocol: one object per release mechanism, from the library to the page.

A :class:`Mechanism` owns everything a caller needs to know or do about one way of releasing an
image, so that the API, the CLI, the experiments and the dashboard dispatch through the registry
(:mod:`privcore.mechanisms.registry`) and never on a mechanism's name:

* its parameters and their ranges (:attr:`Mechanism.parameters`, :meth:`Mechanism.setting`, which
  validates them into a :class:`Setting`);
* what it needs from the model (:attr:`Mechanism.needs`, :meth:`Mechanism.load`, :meth:`Mechanism.prepare`);
* its :meth:`Mechanism.outlook`, which draws nothing: the noise scale, P[release] from what is public
  or certified, and the guarantee of one sent release — a total (ε, δ) over a named neighbourhood;
* :meth:`Mechanism.release`, which draws once with the secure sampler (OS randomness unless a seed is
  given explicitly) and returns a :class:`Release`, whose :meth:`Release.document` is the public JSON.

ε everywhere is the total of one sent release's guarantee (:attr:`Setting.epsilon`); a mechanism that
spends it in parts (PTR: half on the test, half on the noise) says so in its calibration text only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from privcore.errors import ParameterError
from privcore.ranges import ALPHA_RANGE, DELTA_RANGE, EPSILON_RANGE, RADIUS_RANGE

__all__ = [
    "DEFAULT_DELTA",
    "RELEASE_FORMAT",
    "Mechanism",
    "Options",
    "Outlook",
    "Parameter",
    "Release",
    "Setting",
    "Simulation",
]

RELEASE_FORMAT = "privlens.release/1"
#: δ of a release when none is given.
DEFAULT_DELTA = 1e-5


@dataclass(frozen=True, kw_only=True)
class Parameter:
    """One public parameter of a mechanism: ``name`` (as in the API and ``--name`` on the CLI), the
    closed ``bounds`` it must lie in, and ``text``, what it means."""

    name: str
    bounds: tuple[float, float]
    text: str


#: The parameters the mechanisms take, with the ranges of :mod:`privcore.ranges`.
EPSILON = Parameter(name="epsilon", bounds=EPSILON_RANGE, text="ε, the total of one sent release's guarantee")
DELTA = Parameter(name="delta", bounds=DELTA_RANGE, text="δ the mechanism runs at")
RADIUS = Parameter(name="radius", bounds=RADIUS_RANGE, text="R, ℓ∞ on the embedding")
ALPHA = Parameter(name="alpha", bounds=ALPHA_RANGE, text="α, the input radius (pixels in [0, 1])")


@dataclass(frozen=True, kw_only=True)
class Setting:
    """The validated public parameters of one release: ``epsilon`` (total), ``delta`` (0 for a
    mechanism without δ), ``radius`` (posthoc mechanisms; None: the model card's R) and ``alpha``
    (inference-privacy mechanisms)."""

    epsilon: float
    delta: float = 0.0
    radius: float | None = None
    alpha: float | None = None


@dataclass(frozen=True, kw_only=True)
class Options:
    """How a release is computed, not what it guarantees: ``certifier`` and ``time_limit`` (the
    certified constants), ``cache`` (PTR's φ cache), ``certification`` (PTR: a certification this
    process made, to send later), ``progress`` (PTR's bisection callback) and ``rng`` (None: the OS
    CSPRNG; a seed only for tests and experiments)."""

    certifier: Any = "exact"
    time_limit: float | None = 60.0
    cache: Any = True
    certification: Any = None
    progress: Callable[[float, bool], None] | None = None
    rng: Any = None


@dataclass(frozen=True, kw_only=True)
class Outlook:
    """What a mechanism will do at a setting, before anything is drawn: the ``guarantee`` of one sent
    release (its total ε), the ``noise_scale`` of the formula and the ``noise_scale_effective`` the
    sampler draws at, ``noise`` in words, and ``release_probability``: 1.0 for a mechanism that never
    returns ⊥, None where it depends on a per-image certificate (PTR before φ), otherwise P[release]
    from what is certified. ``public`` holds the public numbers behind the scale (G, Δp, μ, …)."""

    mechanism: str
    guarantee: Any
    noise_scale: float
    noise_scale_effective: float
    noise: str
    release_probability: float | None
    public: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Release:
    """The outcome of one release: ``value`` (the noisy output) or ⊥ (``released`` False, ``value``
    None), the ``guarantee`` of the sent release, ``epsilon``/``delta`` (the total ε and the δ of the
    setting), the public parameters and the model block. ``certification`` and ``mechanism_result``
    (the mechanism's own result, e.g. PTR's φ and φ̂) and ``warnings`` (computed from the image without
    noise) are private: :meth:`document` never includes them.

    ``prediction`` is the release classifier's class for ``value`` (None for ⊥), or a function of
    nothing that computes it: post-processing of the released value, read as :attr:`predicted_class`,
    computed on its first read, so a release that nobody asks the class of does not pay for it."""

    mechanism: str
    released: bool
    value: tuple[float, ...] | None
    prediction: int | Callable[[], int | None] | None = field(compare=False, repr=False)
    guarantee: Any
    epsilon: float
    delta: float
    noise_scale: float
    noise_scale_effective: float
    public: dict[str, Any]
    model: dict[str, str]
    certification: Any = None
    test_scale_effective: float | None = None
    mechanism_result: Any = field(default=None, repr=False, compare=False)
    warnings: tuple[str, ...] = ()

    @functools.cached_property
    def predicted_class(self) -> int | None:
        """The release classifier's class for the released value (None for ⊥), computed on first read."""
        p = self.prediction
        return p() if callable(p) else p

    def document(self) -> dict[str, Any]:
        """The public JSON of this release, the one builder of it (no φ, φ̂, R*, trace, image or
        digest of it): outcome, value, the guarantee with its text, the public parameters, the model.
        Strict JSON: an all-pairs guarantee's radius (∞) is written "inf", as the ledger writes it."""
        guarantee = self.guarantee.to_dict()
        if guarantee["radius"] == float("inf"):
            guarantee["radius"] = "inf"
        return {
            "format": RELEASE_FORMAT,
            "mechanism": self.mechanism,
            "outcome": "released" if self.released else "bottom",
            "value": None if self.value is None else list(self.value),
            "guarantee": {**guarantee, "text": self.guarantee.describe()},
            "parameters": {
                "epsilon": self.epsilon,
                "delta": self.delta,
                **self.public,
                "release_noise_scale": self.noise_scale,
                "release_noise_scale_effective": self.noise_scale_effective,
            },
            "model": dict(self.model),
        }


@dataclass(frozen=True, kw_only=True)
class Simulation:
    """One simulated draw for a batch: ``predicted`` class per row, ``released`` per row (all True for
    a mechanism without ⊥), and the ``noise_scale_effective`` the noise was drawn at. A simulated
    release (:meth:`Mechanism.simulate_release`) also holds the released ``values`` (one row each: what
    an attacker sees), the ``told_scale`` an attacker is told (the Laplace scale of the noise's variance),
    whether the noise is ``gaussian``, and ``given_release``: the values were drawn given a release,
    because P[release] needs each image's certificate (then ``predicted`` is None)."""

    predicted: Any
    released: Any
    noise_scale_effective: float
    values: Any = None
    told_scale: float = 0.0
    gaussian: bool = False
    given_release: bool = False


@dataclass(frozen=True, kw_only=True)
class Mechanism:
    """One release mechanism (module docstring). Subclasses set the metadata and implement
    :meth:`load`, :meth:`prepare`, :meth:`outlook` and :meth:`release`.

    ``name`` is the registry key (matched case-insensitively; the one name in JSON, ledger, report and
    charts), ``label`` what a person reads, ``family`` "posthoc" (image → embedding → obfuscator) or
    "inference" (image → classifier), ``parameters`` the :class:`Parameter` s it takes, ``needs`` what
    it needs from the model, ``description`` one line, ``source`` the paper or document it implements,
    ``page`` the dashboard page that releases it."""

    name: str
    label: str
    family: str
    parameters: tuple[Parameter, ...]
    needs: str
    description: str
    source: str
    page: str
    #: the text of the guarantee of one sent release, in the total ε
    guarantee: str
    #: the share of the total ε the mechanism's own formulas run at (PTR: ½, its statement doubles it)
    epsilon_share: float = 1.0
    #: how a mechanism with a share below 1 spends the rest, in words ("" otherwise)
    epsilon_split: str = ""

    #: keyword options (:class:`Options` fields) this mechanism uses; others must keep their defaults
    uses_options: ClassVar[frozenset[str]] = frozenset({"time_limit", "rng"})

    @property
    def needs_certificate(self) -> bool:
        """Whether a release needs a certification of the image itself first (PTR's φ): a caller
        certifies once per image (with progress, cancellable) and passes it in
        :attr:`Options.certification`, and :meth:`outlook` gives P[release] only with it."""
        return "certification" in self.uses_options

    @property
    def uses_delta(self) -> bool:
        """Whether δ is one of its parameters."""
        return any(p.name == "delta" for p in self.parameters)

    def mechanism_epsilon(self, total_epsilon: float) -> float:
        """The ε of the mechanism's own formulas when one sent release spends ``total_epsilon``."""
        return float(total_epsilon) * self.epsilon_share

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """The names of its parameters, in order."""
        return tuple(p.name for p in self.parameters)

    # ------------------------------------------------------------------ parameters

    def setting(self, *, epsilon: Any, delta: Any = DEFAULT_DELTA, radius: Any = None,
                alpha: Any = None) -> Setting:
        """The validated :class:`Setting` (ParameterError naming the parameter, its value and its range).
        δ is checked whenever given and is 0 in the setting of a mechanism without δ; ``radius`` None
        means the model card's R; ``alpha`` is required by the mechanisms that take it."""
        from privcore.validation import check_range

        given = {"epsilon": epsilon, "delta": delta, "radius": radius, "alpha": alpha}
        values: dict[str, float | None] = {}
        for p in (EPSILON, DELTA, RADIUS, ALPHA):
            value = given[p.name]
            if value is None:
                values[p.name] = None
                continue
            values[p.name] = check_range(p.name, value, p.bounds)
            if p.name in ("radius", "alpha") and p not in self.parameters:
                raise ParameterError(f"mechanism {self.name!r} takes no {p.name} (its parameters: "
                                     f"{', '.join(self.parameter_names)}), got {p.name} = {value!r}")
        if ALPHA in self.parameters and values["alpha"] is None:
            raise ParameterError(f"mechanism {self.name!r} needs alpha, in [{ALPHA.bounds[0]:g}, "
                                 f"{ALPHA.bounds[1]:g}]")
        return Setting(epsilon=float(values["epsilon"]),  # type: ignore[arg-type]
                       delta=float(values["delta"] or 0.0) if self.uses_delta else 0.0,
                       radius=values["radius"], alpha=values["alpha"])

    def check_options(self, options: Options) -> None:
        """ParameterError for a certification handed to a mechanism that certifies nothing per image
        (``certifier``, ``cache`` and ``progress`` only say how to compute, and are ignored there)."""
        if "certification" not in self.uses_options and options.certification is not None:
            raise ParameterError(f"certification applies to mechanism 'PTR' only: mechanism {self.name!r} "
                                 "certifies nothing per image (nothing released)")

    # ------------------------------------------------------------------ the model

    def load(self, *, dataset: str, model: str | None, models_dir: str | None) -> Any:
        """What this mechanism releases with, loaded (and certified) by this process: a posthoc
        :class:`~privcore.models.pipeline.Pipeline` or an inference-privacy classifier."""
        raise NotImplementedError

    def prepare(self, target: Any, image: Any) -> Any:
        """The mechanism's input for one model input ``image`` (C, H, W) in [0, 1]."""
        raise NotImplementedError

    def image_shape(self, target: Any) -> tuple[int, int, int]:
        """The model input's shape (C, H, W)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ what it does

    def outlook(self, target: Any, setting: Setting, *, time_limit: float | None = 60.0,
                certification: Any = None) -> Outlook:
        """:class:`Outlook` at ``setting``; draws nothing. ``certification``: the image's, for a mechanism
        that :attr:`needs_certificate` (P[release] from it; ignored by the others)."""
        raise NotImplementedError

    def spent(self, setting: Setting) -> Any:
        """The :class:`~privcore.mechanisms.guarantee.Guarantee` one sent release at ``setting`` spends
        — ε, δ and the neighbourhood, no model needed, so no calibration text (``radius`` must be set
        for a posthoc mechanism, ``alpha`` for an inference-privacy one)."""
        raise NotImplementedError

    def release(self, target: Any, x: Any, setting: Setting, options: Options | None = None) -> Release:
        """One release of input ``x`` (:meth:`prepare`'s output) at ``setting``: one draw (``options``
        None: :class:`Options`' defaults)."""
        raise NotImplementedError

    def simulate(self, target: Any, inputs: Any, setting: Setting, rng: Any, *,
                 certificates: Any = None) -> Simulation:
        """The release classifier's classes for a batch of prepared ``inputs`` (one row each) after one
        simulated draw of this mechanism's noise at ``setting`` (numpy's ``rng``, at the effective
        scale the sampler would draw at): what the releases are worth, for evaluation only — never a
        release. A mechanism that :attr:`needs_certificate` simulates only given ``certificates``, the
        table :meth:`certify_inputs` made for these inputs (else NotImplementedError)."""
        raise NotImplementedError(f"mechanism {self.name!r} needs a per-image certificate to simulate")

    def certificate_key(self, target: Any, setting: Setting) -> Any:
        """What the per-image certificates of an evaluation at ``setting`` depend on (hashable: two
        settings with one key share one table), or None for a mechanism that certifies nothing per image."""
        return None

    def certify_inputs(self, target: Any, inputs: Any, setting: Setting, *,
                       progress: Callable[[Any], None] | None = None) -> Any:
        """The per-image certificates of prepared evaluation ``inputs`` at ``setting`` (a table: ``len()``
        images certified of its ``planned``), computed by this process for :meth:`simulate` only, never
        for a release; ``progress(table so far)`` after each image. NotImplementedError for a mechanism
        that certifies nothing per image."""
        raise NotImplementedError(f"mechanism {self.name!r} certifies nothing per image")
    def told_scale(self, release: Release) -> tuple[float, bool]:
        """What the release classifier and an attacker are told of ``release``'s noise: the Laplace scale
        of its variance per coordinate, and whether it is Gaussian."""
        return float(release.noise_scale), False

    def attack_unavailable(self) -> str:
        """Why no reconstruction attacker reads this mechanism's releases, in words; "" where one does (the
        posthoc family: its noise is added to the released embedding f(z), the noise the scale-told
        attackers are trained on, posthoc paper §5)."""
        if self.family == "posthoc":
            return ""
        return (f"{self.name} releases a classifier's class scores, not an embedding: there is no image "
                "representation for a reconstruction attacker to decode")

    def simulate_release(self, target: Any, inputs: Any, setting: Setting, rng: Any) -> Simulation:
        """One simulated draw of the released vectors for a batch of prepared ``inputs``
        (:class:`Simulation` with ``values``): what a reconstruction attacker sees, for evaluation only —
        never a release. Mechanisms that release no embedding (class scores) raise NotImplementedError."""
        raise NotImplementedError(f"mechanism {self.name!r} releases no embedding an attacker decodes")
