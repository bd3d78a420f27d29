"""The dashboard's shared settings and their URL form: pure Python, no Streamlit, no privacy maths.

* :data:`PARAMS` — every numeric setting (ε, δ, R, α) once: its URL key and the aliases a user
  would type, its slider grid and its allowed range. The sidebar's widgets, :class:`Settings`'
  validation and every message about a bad value read the range from here, so they cannot disagree;
* :class:`Settings` — the sidebar's values, validated, with a round trip to URL query parameters;
* :func:`settings_from_query` — settings from a shared URL and, for every bad or unknown parameter,
  a :class:`QueryProblem` naming the parameter, its value and what is allowed. The dashboard shows
  them at the top of the page and releases nothing until the user has fixed or accepted them;
* :func:`md_code`, :func:`md_literal` — user-supplied text (URL values, file names) for Markdown,
  shown verbatim and never rendered.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from privcore.defaults import DEFAULT_DATASET, OPENING_EPSILON, default_model
from privcore.mechanisms import registry
from privcore.ranges import CERTIFIERS
from privcore.validation import (
    ALPHA_RANGE,
    DELTA_RANGE,
    EPSILON_RANGE,
    RADIUS_RANGE,
    check_choice,
    check_in_range,
)

__all__ = [
    "ALPHA_GRID",
    "CERTIFIER_CHOICES",
    "DEFAULT_MECHANISM",
    "DELTA_GRID",
    "EPSILON_GRID",
    "IP_MECHANISMS",
    "MECHANISMS",
    "PARAMS",
    "POSTHOC_MECHANISMS",
    "RADIUS_GRID",
    "NumericParam",
    "QueryProblem",
    "Settings",
    "grid_with",
    "md_code",
    "md_literal",
    "mechanism_label",
    "settings_from_query",
]

#: Every mechanism, in the order of :mod:`privcore.mechanisms.registry` (the one list the library, CLI,
#: API, experiments, ledger and dashboard share): the posthoc family releases the obfuscated embedding
#: (the Release page), the inference family the IP paper's classifier outputs (Inference privacy).
MECHANISMS: tuple[str, ...] = registry.names()
POSTHOC_MECHANISMS: tuple[str, ...] = registry.names(family="posthoc")
IP_MECHANISMS: tuple[str, ...] = registry.names(family="inference")
#: The sidebar's default: the registry's first posthoc mechanism, the certified global one — the least
#: noise at the strongest guarantee of the posthoc family for every shipped obfuscator (G/(2Δp) ≈ 0.4–0.7
#: of PTR's noise at the same total ε, with δ = 0 and never ⊥; docs/DESIGN.md, "Beyond the papers").
DEFAULT_MECHANISM = POSTHOC_MECHANISMS[0]


def mechanism_label(name: str) -> str:
    """What a person reads for the mechanism ``name`` (the registry's label)."""
    return registry.get(name).label


def _canonical_mechanism(text: str) -> str:
    """The registry's spelling of a mechanism name given in any case (``ptr`` → ``PTR``); ``text``
    unchanged when it names none (the caller reports it)."""
    try:
        return registry.get(text).name
    except ValueError:
        return text


CERTIFIER_CHOICES: tuple[str, ...] = CERTIFIERS  # privcore.ranges: the one list

# Slider grids (log-spaced where the parameter is). Any value in the parameter's range is accepted
# (it is added to the grid), so shared URLs and the ε solver can carry values between grid points.
EPSILON_GRID: tuple[float, ...] = (0.1, 0.2, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0, 20.0)
DELTA_GRID: tuple[float, ...] = (1e-10, 1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.02, 0.05, 0.1)
RADIUS_GRID: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)
ALPHA_GRID: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


@dataclass(frozen=True, kw_only=True)
class NumericParam:
    """One numeric setting: ``field`` of :class:`Settings`, its URL ``key`` (and ``aliases``), the
    slider ``grid`` and the closed range [``low``, ``high``] every value must lie in."""

    field: str
    key: str
    aliases: tuple[str, ...]
    symbol: str
    grid: tuple[float, ...]
    low: float
    high: float

    def __post_init__(self) -> None:
        if not self.low < self.high or not all(self.low <= v <= self.high for v in self.grid):
            raise ValueError(f"{self.field}: the grid must lie in [{self.low:g}, {self.high:g}]")

    @property
    def allowed(self) -> str:
        """The range in words, as every message and the widget's help show it."""
        return f"a number in [{self.low:g}, {self.high:g}]"

    def check(self, value: Any) -> float:
        """``value`` as a float in range, else a ValueError naming the field, the value and the range."""
        return check_in_range(self.field, value, self.low, self.high, low_open=False, high_open=False)


#: The ranges themselves live in privcore.ranges (EPSILON_RANGE, …): the API and the CLI check the same.
PARAMS: dict[str, NumericParam] = {
    p.field: p
    for p in (
        NumericParam(field="epsilon", key="eps", aliases=("epsilon",), symbol="ε", grid=EPSILON_GRID,
                     low=EPSILON_RANGE[0], high=EPSILON_RANGE[1]),
        NumericParam(field="delta", key="delta", aliases=(), symbol="δ", grid=DELTA_GRID,
                     low=DELTA_RANGE[0], high=DELTA_RANGE[1]),
        NumericParam(field="radius", key="R", aliases=("radius", "r"), symbol="R", grid=RADIUS_GRID,
                     low=RADIUS_RANGE[0], high=RADIUS_RANGE[1]),
        NumericParam(field="alpha", key="alpha", aliases=(), symbol="α", grid=ALPHA_GRID,
                     low=ALPHA_RANGE[0], high=ALPHA_RANGE[1]),
    )
}

#: URL key and aliases of every field (the first key is the one the dashboard writes).
_QUERY_KEYS: dict[str, tuple[str, ...]] = {
    "dataset": ("dataset",),
    "model": ("model",),
    "mechanism": ("mech", "mechanism"),
    **{p.field: (p.key, *p.aliases) for p in PARAMS.values()},
    "certifier": ("cert", "certifier"),
}
#: Streamlit's own query parameters (embedding options): not ours to judge.
_STREAMLIT_KEYS = frozenset({"embed", "embed_options"})


# ------------------------------------------------------------------------------------ settings


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The dashboard's shared sidebar values; every field validated on construction.

    ``radius`` is R of the posthoc mechanisms (ℓ∞ on the embedding); ``alpha`` is α of inference
    privacy (ℓ2 on pixels for the Gauss mechanisms, ℓ1 for Lap-Output). ``epsilon`` is the **total** ε
    of one sent release's guarantee, for every mechanism: Global spends it all, (ε, 0, R); PTR runs at
    ε/2 (:attr:`mechanism_epsilon`) so that its statement (2·ε/2, δ/2, R) spends the same total
    (posthoc Thm 4.4). ``delta`` is the δ a mechanism that uses one runs at (PTR then spends δ/2;
    Global and Lap-Output spend 0). Numeric fields must lie in their :data:`PARAMS` range.

    The default δ is 1e-5: below 1e-3 and below 1/n for both shipped datasets
    (n = 1797 and 70 000 images), so the release panels' warnings
    (:func:`privlens.budget.extreme_warnings`) stay silent at the defaults; it is on :data:`DELTA_GRID`.
    The posthoc paper's PTR value 0.05 protects little (a mechanism that published one image in twenty
    outright would meet it): a user who wants it must choose it.
    """

    dataset: str = DEFAULT_DATASET
    model: str = default_model(DEFAULT_DATASET)
    mechanism: str = DEFAULT_MECHANISM
    epsilon: float = OPENING_EPSILON
    delta: float = 1e-5
    radius: float = 0.25
    alpha: float = 0.1
    certifier: str = "exact"

    def __post_init__(self) -> None:
        for name in ("dataset", "model"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        object.__setattr__(self, "mechanism", _canonical_mechanism(self.mechanism))
        check_choice("mechanism", self.mechanism, MECHANISMS)
        check_choice("certifier", self.certifier, CERTIFIER_CHOICES)
        for name, param in PARAMS.items():
            object.__setattr__(self, name, param.check(getattr(self, name)))

    @property
    def spec(self) -> registry.MechanismSpec:
        """The mechanism's registry entry."""
        return registry.get(self.mechanism)

    @property
    def is_posthoc(self) -> bool:
        """True for a mechanism that releases the obfuscated embedding (the Release page, a model, R);
        False for an inference-privacy mechanism (α)."""
        return self.spec.family == "posthoc"

    @property
    def mechanism_epsilon(self) -> float:
        """The ε the mechanism runs at for a sent release whose guarantee spends the total
        :attr:`epsilon` (PTR: half of it; the others: all of it)."""
        return self.spec.mechanism_epsilon(self.epsilon)

    def to_query(self) -> dict[str, str]:
        """URL query parameters (short keys, floats written so they read back exactly)."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[_QUERY_KEYS[f.name][0]] = repr(float(value)) if isinstance(value, float) else str(value)
        return out

    def replace(self, **changes: Any) -> Settings:
        """A validated copy with ``changes``."""
        return replace(self, **changes)


#: How much of a user-supplied value a message shows (a URL value can be kilobytes long).
SHOWN_CHARS = 80


def md_code(text: str) -> str:
    """``text`` as an inline Markdown code span, shown verbatim and never rendered: no link, emphasis,
    HTML, math or Streamlit directive inside it takes effect (GFM turns bare URLs into links even when
    their punctuation is backslash-escaped; inside a code span it does not). The fence is longer than
    any run of backticks in ``text``; control characters must already be escaped (see :func:`md_literal`)."""
    if any(not ch.isprintable() for ch in text):
        raise ValueError("md_code needs printable text (a line break would end the code span)")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}"


def md_literal(value: Any, *, limit: int = SHOWN_CHARS, quote: bool = False) -> str:
    """A user-supplied value (URL parameter, file name) for a Markdown message: its first ``limit``
    characters (… when cut), control characters escaped (``\\n``), optionally quoted like ``repr``,
    in a code span (:func:`md_code`)."""
    text = value if isinstance(value, str) else str(value)
    return md_code(_shown(text, limit=limit, quote=quote))


def _shown(text: str, *, limit: int = SHOWN_CHARS, quote: bool = False) -> str:
    cut = text[:limit]
    body = (
        repr(cut)
        if quote
        else "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in cut)
    )
    return body + ("…" if len(text) > limit else "")


@dataclass(frozen=True, kw_only=True)
class QueryProblem:
    """A URL parameter the dashboard cannot use: the ``key`` as written, its ``value``, what is
    ``allowed`` and what the sidebar shows ``instead``; ``field`` is the setting concerned (None
    for an unknown key); ``conflict`` the other (key, value) that gave the same setting otherwise.
    Only ``key``, ``value`` and ``conflict`` hold text from the URL."""

    key: str
    value: str
    allowed: str
    instead: str
    field: str | None
    conflict: tuple[str, str] | None = None

    @property
    def message(self) -> str:
        """Markdown in which the key and value from the URL are a code span (shown, never rendered)."""
        given = md_code(f"{_shown(self.key)}={_shown(self.value, quote=True)}")
        if self.field is None:
            return f"Unknown URL parameter {given}: known parameters are {self.allowed}."
        if self.conflict is not None:
            other = md_code(f"{_shown(self.conflict[0])}={_shown(self.conflict[1], quote=True)}")
            return (
                f"URL parameters {other} and {given} set the same thing twice ({self.allowed}); "
                f"the sidebar shows {self.instead} instead."
            )
        return (
            f"URL parameter {given} is not allowed ({self.allowed}); "
            f"the sidebar shows {self.instead} instead."
        )


def _instead(field: str, value: Any) -> str:
    """What the sidebar shows for ``field`` (a default or a validated value, never URL text)."""
    return f"{PARAMS[field].symbol} = {value:g}" if field in PARAMS else f"{field} = {value}"


def _known_keys() -> str:
    return ", ".join(" / ".join(keys) for keys in _QUERY_KEYS.values())


def settings_from_query(
    query: Mapping[str, Any],
    *,
    default: Settings,
    models: Mapping[str, Sequence[str]],
) -> tuple[Settings, tuple[QueryProblem, ...]]:
    """Settings from URL query parameters, and a :class:`QueryProblem` for each parameter that
    cannot be used (its setting keeps the default) and each unknown key.

    ``models`` maps every available dataset to its available model names. A field may be given
    under its key or an alias (``eps`` or ``epsilon``, ``R`` or ``radius``); the same field given
    twice with different values is a problem. A repeated key counts with its last value. Never
    raises on user input.
    """
    values: dict[str, Any] = asdict(default)
    given, problems = _given_fields(query, values)

    def refuse(field: str, key: str, text: str, allowed: str, fallback: Any) -> None:
        problems.append(
            QueryProblem(key=key, value=text, allowed=allowed, instead=_instead(field, fallback), field=field)
        )

    for name, (key, text) in given.items():
        if name in PARAMS:
            try:
                values[name] = PARAMS[name].check(float(text))
            except (TypeError, ValueError, OverflowError):
                refuse(name, key, text, PARAMS[name].allowed, values[name])
        elif name == "mechanism":
            values[name] = _canonical_mechanism(text)  # any case: ?mech=ptr, ?mech=global
        else:
            values[name] = text
    for name, choices in (
        ("mechanism", MECHANISMS),
        ("certifier", CERTIFIER_CHOICES),
        ("dataset", tuple(models)),
    ):
        if values[name] not in choices:
            key = given.get(name, (_QUERY_KEYS[name][0], ""))[0]
            refuse(name, key, values[name], "one of " + ", ".join(choices), getattr(default, name))
            values[name] = getattr(default, name)
    if values["dataset"] != default.dataset and "radius" not in given:
        # a link that names another dataset but no R gets that dataset's R, as the sidebar does
        try:
            from privcore.data import get_spec

            values["radius"] = float(get_spec(values["dataset"]).radius)
        except ValueError:
            pass
    _check_model(values, default=default, models=models, given=given, refuse=refuse)
    return Settings(**values), tuple(problems)


def _raw(query: Mapping[str, Any], key: str) -> str | None:
    """The query's text for ``key`` (a repeated key: its last value), or None."""
    v = query.get(key)
    if isinstance(v, list | tuple):
        v = v[-1] if v else None
    return None if v is None else str(v)


def _given_fields(query: Mapping[str, Any], values: Mapping[str, Any]
                  ) -> tuple[dict[str, tuple[str, str]], list[QueryProblem]]:
    """field → (key, text) for each field the query gives once, and a problem for each field given
    twice with different values and each unknown key."""
    problems: list[QueryProblem] = []
    given: dict[str, tuple[str, str]] = {}
    for name, keys in _QUERY_KEYS.items():
        found = [(k, _raw(query, k)) for k in keys if _raw(query, k) not in (None, "")]
        if len({text for _, text in found}) > 1:
            first, second = found[0], next(f for f in found if f[1] != found[0][1])
            problems.append(
                QueryProblem(
                    key=second[0],
                    value=str(second[1]),
                    allowed="give it once" + (f", as {PARAMS[name].allowed}" if name in PARAMS else ""),
                    instead=_instead(name, values[name]),
                    field=name,
                    conflict=(first[0], str(first[1])),
                )
            )
            continue
        if found:
            given[name] = (found[0][0], str(found[0][1]))
    for key in query:
        if key not in _STREAMLIT_KEYS and not any(key in keys for keys in _QUERY_KEYS.values()):
            problems.append(
                QueryProblem(
                    key=str(key), value=_raw(query, key) or "", allowed=_known_keys(), instead="", field=None
                )
            )
    return given, problems


def _check_model(values: dict[str, Any], *, default: Settings, models: Mapping[str, Sequence[str]],
                 given: Mapping[str, tuple[str, str]], refuse: Any) -> None:
    """A model the dataset does not ship falls back to the default's (or the dataset's first)."""
    available = tuple(models.get(values["dataset"], ()))
    if available and values["model"] not in available:
        fallback = default.model if default.model in available else available[0]
        if "model" in given:
            refuse("model", given["model"][0], values["model"],
                   f"for {values['dataset']}: one of {', '.join(available)}", fallback)
        values["model"] = fallback


def grid_with(grid: Sequence[float], value: float) -> tuple[float, ...]:
    """The slider options: ``grid`` plus ``value`` if it is not on it, sorted."""
    return tuple(sorted({float(v) for v in grid} | {float(value)}))
