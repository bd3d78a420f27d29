"""The dashboard's view-model, pure Python: settings and URLs (privlens.settings), PTR's search range
(privcore.mechanisms), outcomes and guarantees in words (privlens.outcome), experiment results
(privlens.results), shipped samples (privlens.samples), latent walks (privlens.latent) and user text in
Markdown; the release document (privcore.api.Release.document, which the Release page offers)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from privcore.defaults import OPENING_EPSILON
from privcore.inputs.images import load_image
from privcore.mechanisms import bisection_decisions, compute_phi, propose_test_release, ptr_search_range
from privcore.mechanisms.ptr import HINT_STEPS
from privlens.outcome import outcome_summary, plain_guarantee
from privlens.results import experiment_command, load_results, smallest_epsilon
from privlens.samples import list_samples
from privlens.settings import Settings, grid_with, settings_from_query

MODELS = {"mnist": ("N-global", "ARL-C-N"), "digits": ("ARL-C-N", "Encoder"), "fashion-mnist": ("ARL-C-N",)}
DEFAULT = Settings()


def test_settings_validate_and_name_the_parameter() -> None:
    with pytest.raises(ValueError, match=r"epsilon must be in \[0.01, 100\], got 1000"):
        Settings(epsilon=1000.0)
    with pytest.raises(ValueError, match=r"delta must be in \[1e-12, 0.5\], got 1.0"):
        Settings(delta=1.0)
    with pytest.raises(ValueError, match="mechanism must be one of"):
        Settings(mechanism="Gauss")
    # one range for the widget, the URL and the constructor (privlens.settings.PARAMS)
    with pytest.raises(ValueError, match=r"radius must be in \[0.001, 2\], got -1.0"):
        Settings(radius=-1.0)


def test_the_mechanisms_are_the_registrys_and_old_links_still_parse() -> None:
    """The sidebar lists privcore.mechanisms.registry's mechanisms, in its order; a link written before
    the registry (mech=PTR, mech=Gauss-Input, …) still parses, any case does too, and the default is
    the certified global mechanism."""
    from privcore.mechanisms import registry
    from privlens.settings import IP_MECHANISMS, MECHANISMS, POSTHOC_MECHANISMS

    # every mechanism with a dashboard page
    assert MECHANISMS == tuple(n for n in registry.names() if registry.get(n).page)
    assert MECHANISMS[0] == "Global"
    # every posthoc mechanism is the Release page's, Global-Gauss and LDP-Embedding included
    assert POSTHOC_MECHANISMS == ("Global", "PTR", "Global-Gauss", "LDP-Embedding")
    assert IP_MECHANISMS == registry.names(family="inference")
    assert DEFAULT.mechanism == "Global" and DEFAULT.is_posthoc
    assert DEFAULT.mechanism_epsilon == OPENING_EPSILON  # Global spends the whole ε on its noise
    for old in ("PTR", "Gauss-Input", "Gauss-Output", "Lap-Output"):
        s, problems = settings_from_query({"mech": old}, default=DEFAULT, models=MODELS)
        assert s.mechanism == old and problems == ()
    for spelled, name in (("global", "Global"), ("ptr", "PTR"), ("lap-output", "Lap-Output")):
        s, problems = settings_from_query({"mechanism": spelled}, default=DEFAULT, models=MODELS)
        assert s.mechanism == name and problems == ()
        assert Settings(mechanism=spelled).mechanism == name
    ptr = Settings(mechanism="PTR", epsilon=2.0)
    assert ptr.epsilon == 2.0 and ptr.mechanism_epsilon == 1.0  # eps= is the total; PTR runs at half


def test_the_default_delta_is_small_on_the_grid_and_in_the_url() -> None:
    """Safe defaults (issue 30, item 5): δ = 1e-5, a slider position, written to and read from the URL."""
    from privlens.settings import DELTA_GRID

    assert DEFAULT.delta == 1e-5 and 1e-5 in DELTA_GRID
    assert DEFAULT.to_query()["delta"] == "1e-05"
    back, problems = settings_from_query(DEFAULT.to_query(), default=DEFAULT, models=MODELS)
    assert back.delta == 1e-5 and problems == ()
    back, _ = settings_from_query({}, default=DEFAULT, models=MODELS)  # a link without δ gets the default
    assert back.delta == 1e-5


def test_query_round_trip_is_exact() -> None:
    s = Settings(
        dataset="fashion-mnist",
        model="ARL-C-N",
        mechanism="Lap-Output",
        epsilon=0.1 + 0.2,
        delta=1e-5,
        radius=0.2,
        alpha=0.03,
        certifier="lp",
    )
    back, problems = settings_from_query(s.to_query(), default=DEFAULT, models=MODELS)
    assert back == s and problems == ()


def test_bad_query_values_are_problems_naming_key_value_and_range() -> None:
    query = {
        "eps": "lots",
        "delta": "2",
        "mech": "Magic",
        "cert": "guess",
        "R": "-1",
        "alpha": "nan",
        "dataset": "mnist",
        "model": "Nope",
        "unknown": "x",
    }
    s, problems = settings_from_query(query, default=DEFAULT, models=MODELS)
    assert s == DEFAULT
    by_key = {p.key: p for p in problems}
    assert set(by_key) == {"eps", "delta", "mech", "cert", "R", "alpha", "model", "unknown"}
    # the range in the message is the widget's own (PARAMS), not the library's (0, ∞)
    assert "eps='lots'" in by_key["eps"].message and "a number in [0.01, 100]" in by_key["eps"].message
    assert by_key["eps"].instead == f"ε = {OPENING_EPSILON:g}" and by_key["eps"].field == "epsilon"
    assert "a number in [1e-12, 0.5]" in by_key["delta"].message
    assert "a number in [0.001, 2]" in by_key["R"].message
    assert "one of Global, PTR, Gauss-Input" in by_key["mech"].message
    assert by_key["unknown"].field is None and "Unknown URL parameter" in by_key["unknown"].message
    assert "eps / epsilon" in by_key["unknown"].message  # the known keys, aliases included
    s, problems = settings_from_query({"dataset": "imagenet"}, default=DEFAULT, models=MODELS)
    assert s.dataset == DEFAULT.dataset == "mnist" and "imagenet" in problems[0].message
    # list-valued parameters (repeated keys): the last one counts
    s, _ = settings_from_query({"eps": ["1", "2"]}, default=DEFAULT, models=MODELS)
    assert s.epsilon == 2.0


@pytest.mark.parametrize("value", ["-1", "0", "0.001", "101", "inf", "1e400"])
def test_out_of_range_epsilon_is_a_problem_with_the_widget_range(value: str) -> None:
    from privlens.settings import PARAMS

    for key in ("eps", "epsilon"):
        s, problems = settings_from_query({key: value}, default=DEFAULT, models=MODELS)
        assert s.epsilon == DEFAULT.epsilon
        (p,) = problems
        assert (p.key, p.value, p.field) == (key, value, "epsilon")
        lo, hi = PARAMS["epsilon"].low, PARAMS["epsilon"].high
        assert f"[{lo:g}, {hi:g}]" in p.message
        assert lo <= min(PARAMS["epsilon"].grid) and max(PARAMS["epsilon"].grid) <= hi


def test_aliases_are_read_and_conflicts_are_problems() -> None:
    s, problems = settings_from_query(
        {"epsilon": "2", "radius": "0.3", "mechanism": "Lap-Output", "certifier": "lp"},
        default=DEFAULT,
        models=MODELS,
    )
    assert problems == ()
    assert (s.epsilon, s.radius, s.mechanism, s.certifier) == (2.0, 0.3, "Lap-Output", "lp")
    s, problems = settings_from_query({"eps": "2", "epsilon": "3"}, default=DEFAULT, models=MODELS)
    assert s.epsilon == DEFAULT.epsilon and len(problems) == 1 and problems[0].field == "epsilon"
    assert "` eps='2' ` and ` epsilon='3' ` set the same thing twice" in problems[0].message
    # both values come from the URL: each is a code span, never rendered
    _, (p,) = settings_from_query(
        {"eps": "[x](https://evil.example)", "epsilon": "1"}, default=DEFAULT, models=MODELS
    )
    import re

    out = _render(p.message)
    assert "<a" not in out and "evil.example" not in re.sub(r"<code>.*?</code>", "", out), out
    s, problems = settings_from_query({"eps": "2", "epsilon": "2"}, default=DEFAULT, models=MODELS)
    assert s.epsilon == 2.0 and problems == ()
    # Streamlit's own embedding parameters are not ours to refuse
    assert settings_from_query({"embed": "true"}, default=DEFAULT, models=MODELS)[1] == ()


def test_a_link_to_another_dataset_without_r_takes_that_datasets_r() -> None:
    from privcore.data import get_spec

    s, problems = settings_from_query({"dataset": "fashion-mnist"}, default=DEFAULT, models=MODELS)
    assert s.radius == get_spec("fashion-mnist").radius == 0.2 != DEFAULT.radius and problems == ()
    s, _ = settings_from_query({"dataset": "fashion-mnist", "R": "0.3"}, default=DEFAULT, models=MODELS)
    assert s.radius == 0.3  # an explicit R is kept
    s, _ = settings_from_query({"dataset": "digits"}, default=DEFAULT, models=MODELS)
    assert s.radius == DEFAULT.radius


def test_grid_with_adds_off_grid_value() -> None:
    assert grid_with((1.0, 2.0), 1.5) == (1.0, 1.5, 2.0)
    assert grid_with((1.0, 2.0), 2.0) == (1.0, 2.0)


def test_ptr_search_range_passes_with_the_stated_probability() -> None:
    r, eps, dlt, miss = 0.25, 0.1, 1e-10, 1e-3
    r_max, tol = ptr_search_range(r, epsilon_min=eps, delta_min=dlt, miss=miss)
    b = r / eps
    threshold = math.log(1 / dlt) * b
    phi_at_r_max = r_max - r  # φ = R* − R once R* ≥ 2R
    # P[φ + Lap(b) > threshold] = 1 − ½·exp(−(φ − threshold)/b) must equal 1 − miss
    assert 1 - 0.5 * math.exp(-(phi_at_r_max - threshold) / b) == pytest.approx(1 - miss, rel=1e-12)
    assert tol == r / 16


class _StepOracle:
    """U(z, r) = 1 for r ≤ r0, 2 beyond: monotone in r; with Δp = 1.5 it passes exactly for r ≤ r0."""

    def __init__(self, r0: float) -> None:
        self.r0 = r0

    def __call__(self, f, center, radius):
        return 1.0 if radius <= self.r0 else 2.0


@pytest.mark.parametrize("r0", [0.2, 0.25, 0.3, 0.9, 5.0, 100.0])
def test_bisection_decisions_bounds_compute_phi(r0: float) -> None:
    r_max, tol = ptr_search_range(0.25, epsilon_min=0.1, delta_min=1e-10)
    res = compute_phi(
        lambda z: z, np.zeros(2), radius=0.25, delta_p=1.5, r_max=r_max, tol=tol, lipschitz=_StepOracle(r0)
    )
    most = bisection_decisions(0.25, r_max, tol)
    assert res.n_decisions <= most
    if 0.25 <= r0 < r_max:  # a real bisection makes every decision the bound counts but the hinted ones
        assert res.n_decisions == most - HINT_STEPS


def _ptr(seed: int, x: float):
    f = torch.nn.Linear(3, 2).double()
    torch.nn.init.constant_(f.weight, 0.1)
    z = np.full(3, x)
    phi = compute_phi(f, z, radius=0.2, delta_p=1.0, r_max=5.0, tol=0.01, lipschitz=lambda *_: 0.6)
    return propose_test_release(
        f,
        z,
        epsilon=5.0,
        delta=0.05,
        radius=0.2,
        delta_p=1.0,
        r_max=5.0,
        tol=0.01,
        lipschitz=lambda *_: 0.6,
        rng=seed,
        phi=phi,
    )


def release_document(result, *, dataset: str, model: str, model_digest: str, epsilon: float, delta: float,
                     certifier: str) -> dict:
    """The downloaded JSON of a PTR outcome: the API's Release.document(), the one builder of it."""
    from privcore.mechanisms.ptr_release import ptr_record

    model_block = {"dataset": dataset, "obfuscator": model, "digest": model_digest}
    out = ptr_record(result, delta=delta, certifier=certifier, model=model_block)
    assert out.epsilon == 2 * epsilon  # the document's ε is the total the guarantee spends
    return out.document()


def test_release_document_holds_only_the_outcome_and_public_parameters() -> None:
    res = _ptr(0, 0.3)
    assert res.released
    doc = release_document(
        res, dataset="digits", model="ARL-C-N", model_digest="abc", epsilon=5.0, delta=0.05, certifier="exact"
    )
    text = json.dumps(doc)  # JSON-serialisable
    assert doc["outcome"] == "released" and doc["value"] == [float(v) for v in res.value]
    assert set(doc) == {"format", "mechanism", "outcome", "value", "guarantee", "parameters", "model"}
    assert doc["mechanism"] == "PTR" and doc["guarantee"]["text"] == res.guarantee.describe()
    assert set(doc["parameters"]) == {
        "epsilon",
        "delta",
        "radius",
        "delta_p",
        "r_max",
        "tol",
        "release_noise_scale",
        "release_noise_scale_effective",
        "test_noise_scale_effective",
        "certifier",
    }
    assert "phi" not in text and "r_star" not in text and "center" not in text
    assert doc["guarantee"]["epsilon"] == 10.0 and doc["guarantee"]["delta"] == 0.025  # (2ε, δ/2, R)
    # two different inputs with the same parameters give documents that differ only in the value
    other = release_document(
        _ptr(0, -0.7),
        dataset="digits",
        model="ARL-C-N",
        model_digest="abc",
        epsilon=5.0,
        delta=0.05,
        certifier="exact",
    )
    assert {k: v for k, v in doc.items() if k != "value"} == {k: v for k, v in other.items() if k != "value"}


def test_release_document_for_bottom() -> None:
    f = torch.nn.Linear(3, 2).double()
    res = propose_test_release(
        f,
        np.zeros(3),
        epsilon=1.0,
        delta=0.05,
        radius=0.2,
        delta_p=1.0,
        r_max=5.0,
        tol=0.01,
        lipschitz=lambda *_: 3.0,
        rng=1,
    )
    assert not res.released and res.phi == 0.0
    doc = release_document(
        res, dataset="digits", model="m", model_digest="d", epsilon=1.0, delta=0.05, certifier="lp"
    )
    assert doc["outcome"] == "bottom" and doc["value"] is None
    text = outcome_summary(res)
    assert text.headline.startswith("⊥") and "φ = 0" in text.detail and "≤ threshold" in text.test


def test_outcome_and_guarantee_texts() -> None:
    res = _ptr(0, 0.3)
    text = outcome_summary(res)
    assert text.released and text.headline == "Released" and "> threshold" in text.test
    sentence = plain_guarantee(res.guarantee)
    assert sentence.startswith("Any image whose embedding lies within ℓ∞ distance R = 0.2")
    assert "ε = 10" in sentence and "δ = 0.025" in sentence


def test_smallest_epsilon_measured_and_interpolated() -> None:
    eps = [1.0, 2.0, 5.0, 10.0, math.inf]
    acc = [0.3, 0.5, 0.7, 0.8, 0.9]
    sol = smallest_epsilon(eps, acc, target=0.6)
    assert sol.measured == 5.0 and sol.reachable
    # halfway between 0.5 and 0.7 in accuracy → geometric mean of 2 and 5 in ε
    assert sol.interpolated == pytest.approx(math.sqrt(10.0))
    assert "interpolated: an estimate, no interval, no n" in sol.note and "n = " not in sol.note
    said = smallest_epsilon(eps, acc, target=0.6, lows=[0.2, 0.4, 0.6, 0.7, 0.8],
                            highs=[0.4, 0.6, 0.8, 0.9, 1.0], ns=[100] * 5)
    assert "(0.7 [0.6, 0.8], n = 100)" in said.note  # the measured point carries its interval and n
    assert smallest_epsilon(eps, acc, target=0.3).interpolated is None  # first point already reaches it
    sol = smallest_epsilon(eps, acc, target=0.85)  # only ε = ∞ reaches it: not reachable
    assert not sol.reachable and sol.measured is None and "0.8" in sol.note
    with pytest.raises(ValueError, match="target"):
        smallest_epsilon(eps, acc, target=1.5)


def test_samples_ship_and_decode() -> None:
    samples = list_samples("digits")
    assert len(samples) >= 4
    for s in samples:
        x = load_image(s.data(), target_shape=(1, 8, 8))
        assert x.shape == (1, 8, 8) and 0 <= float(x.min()) and float(x.max()) <= 1
        assert s.label.isdigit()
    assert list_samples("no-such-dataset") == ()


def test_results_loading(tmp_path) -> None:
    assert load_results("digits", "table1", root=tmp_path) is None
    (tmp_path / "digits").mkdir()
    pd.DataFrame({"epsilon": [1.0, float("inf")], "accuracy": [0.5, 0.9]}).to_csv(
        tmp_path / "digits" / "table1.csv", index=False
    )
    df = load_results("digits", "table1", root=tmp_path)
    assert list(df["accuracy"]) == [0.5, 0.9] and math.isinf(df["epsilon"].iloc[1])
    with pytest.raises(ValueError):
        load_results("../etc", "passwd", root=tmp_path)
    expected = ".venv/bin/python -m privcore experiment table1 --dataset digits --quick"
    assert experiment_command("table1", "digits") == expected


def test_release_probability_exact_points() -> None:
    from privlens.outcome import release_probability

    eps, dlt, r = 1.0, 0.05, 0.25
    threshold = math.log(1 / dlt) * r / eps
    # φ = 0 (local sensitivity above Δp): the test passes with probability exactly δ/2 (posthoc Thm 4.4)
    assert release_probability(0.0, epsilon=eps, delta=dlt, radius=r) == pytest.approx(dlt / 2, rel=1e-12)
    assert release_probability(threshold, epsilon=eps, delta=dlt, radius=r) == pytest.approx(0.5)
    far = threshold + r / eps * math.log(500)  # ½·e^{-ln 500} = 1e-3 below 1
    assert release_probability(far, epsilon=eps, delta=dlt, radius=r) == pytest.approx(1 - 1e-3)


def test_release_probability_matches_the_mechanism() -> None:
    """Empirical release rate of propose_test_release (seeded) against the formula: a binomial
    test at 4.5 standard deviations (false-alarm rate ≈ 7e-6)."""
    from privlens.outcome import release_probability

    f = torch.nn.Linear(2, 2).double()
    z = np.zeros(2)
    kw = dict(radius=0.2, delta_p=1.0, r_max=0.3, tol=0.1)
    phi = compute_phi(f, z, lipschitz=lambda *_: 0.5, **kw)  # R* = R_max = 0.3 → φ = max(0.15, 0.1)
    assert phi.phi == pytest.approx(0.15) and phi.zeta == pytest.approx(0.1)
    p = release_probability(phi.phi, epsilon=2.0, delta=0.05, radius=0.2, zeta=phi.zeta)
    rng = np.random.default_rng(7)
    n = 3000
    hits = sum(
        propose_test_release(
            f, z, epsilon=2.0, delta=0.05, lipschitz=lambda *_: 0.5, rng=rng, phi=phi, **kw
        ).released
        for _ in range(n)
    )
    assert abs(hits / n - p) <= 4.5 * math.sqrt(p * (1 - p) / n), (hits / n, p)


def test_latent_walk_stays_in_the_ball_and_moves_one_axis() -> None:
    from privlens.latent import latent_walk

    z = np.array([0.5, -1.0, 2.0])
    walk = latent_walk(z, axes=[2, 0], offsets=[-0.3, 0.0, 0.3])
    assert walk.shape == (2, 3, 3)
    np.testing.assert_allclose(walk[0, :, 2], [1.7, 2.0, 2.3])
    np.testing.assert_allclose(walk[0, :, :2], np.tile(z[:2], (3, 1)))
    assert np.max(np.abs(walk - z)) <= 0.3 + 1e-12  # every point in the ℓ∞ ball of radius 0.3
    with pytest.raises(ValueError, match="axes"):
        latent_walk(z, axes=[3], offsets=[0.1])


def test_rank_axes_finds_the_axes_the_decoder_uses() -> None:
    from privlens.latent import rank_axes

    def decode(points: np.ndarray) -> np.ndarray:  # pictures depend on axes 3 (strongly) and 1 only
        return np.stack([5 * points[:, 3], points[:, 1], np.zeros(len(points))], axis=1)

    assert rank_axes(decode, np.zeros(6), radius=0.2, top=2) == (3, 1)


def test_tile_images_layout_and_frame() -> None:
    from privlens.latent import tile_images

    imgs = np.zeros((2, 3, 1, 4, 4))
    imgs[1, 2] = 1.0
    out = tile_images(imgs, pad=1, highlight_col=1)
    assert out.shape == (3, 2 * 5 + 1, 3 * 5 + 1)
    np.testing.assert_allclose(out[:, 6:10, 11:15], 1.0)  # row 1, column 2: white, grey → RGB
    np.testing.assert_allclose(out[:, 1:5, 1:5], 0.0)
    np.testing.assert_allclose(out[:, 0, 5], [0.85, 0.1, 0.1])  # red frame around column 1


# ------------------------------------------------------------------------ user text in Markdown


def _render(markdown: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").render(markdown)


def test_md_code_shows_any_printable_text_verbatim() -> None:
    import html
    import re

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from privlens.settings import md_code

    @settings(max_examples=300, deadline=None)
    @given(st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=60))
    def shown_verbatim(text: str) -> None:
        if not text.isprintable():
            return
        out = _render(md_code(text))
        assert re.fullmatch(r"<p><code>(.*)</code></p>\n", out, flags=re.S), (text, out)
        inner = html.unescape(out[len("<p><code>") : -len("</code></p>\n")])
        if text.strip(" "):  # CommonMark keeps an all-space span as it is
            assert inner == text, (text, out)

    shown_verbatim()
    with pytest.raises(ValueError, match="printable"):
        md_code("line\n\n[next](https://evil.example)")


def test_md_literal_escapes_control_characters_and_cuts_long_values() -> None:
    from privlens.settings import md_literal

    assert md_literal("a\nb") == "` a\\nb `"
    assert md_literal("x" * 200) == "` " + "x" * 80 + "… `"
    assert md_literal("`tick`") == "`` `tick` ``"
    assert md_literal("it", quote=True) == "` 'it' `"


def test_url_warnings_never_render_a_link() -> None:
    import re

    query = {"model": "[click here](https://evil.example/login)", "mech": "<a href='https://evil.example'>x</a>"}
    _, problems = settings_from_query(query, default=DEFAULT, models=MODELS)
    assert len(problems) == 2
    for w in (p.message for p in problems):
        out = _render(w)
        assert "<a" not in out and "evil.example" in out, out  # shown ...
        assert "evil.example" not in re.sub(r"<code>.*?</code>", "", out), out  # ... only as code


def test_the_warm_up_waits_while_a_script_run_is_in_progress() -> None:
    """privlens.warmup.wait_for_quiet (the warm-up's pause) blocks while a run is in progress, nested
    runs included (a fragment's rerun inside the app's run), and goes on when the last one ends."""
    import threading

    from privlens import warmup

    done = threading.Event()
    waiter = threading.Thread(target=lambda: (warmup.wait_for_quiet(), done.set()))
    with warmup.script_run():
        with warmup.script_run():
            waiter.start()
            assert not done.wait(0.3)
        assert not done.wait(0.2)  # the outer run still going
    assert done.wait(5)
    waiter.join()
    warmup.wait_for_quiet()  # nothing running: returns at once
