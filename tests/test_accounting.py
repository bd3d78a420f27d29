"""Accounting identities (IP paper Props 1–4, Vadhan Lemma 2.2) and the privacy ledger, which composes
per neighbourhood relation (space, ℓp norm, radius) using the inclusions ℓ1 ⊂ ℓ2 ⊂ ℓ∞ (issue 18)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from privcore.mechanisms import (
    ANY_METRIC,
    GaussInput,
    GaussOutput,
    Guarantee,
    LapOutput,
    LDPImage,
    Neighbourhood,
    Norm,
    Space,
    ptr_scales,
)
from privcore.mechanisms.accounting import (
    PrivacyLedger,
    basic_composition,
    chaining,
    chaining_hops,
    common_neighbourhood,
    group_privacy,
    parallel_composition,
    post_processing,
)

L2 = "ℓ2 on the model input (image pixels in [0, 1])"
EMB = "ℓ∞ on the embedding z"


def g(
    eps: float = 0.3,
    delta: float = 1e-5,
    radius: float = 0.1,
    norm: Norm = Norm.L2,
    space: Space = Space.INPUT,
) -> Guarantee:
    return Guarantee(epsilon=eps, delta=delta, radius=radius, space=space, norm=norm)


def hood(norm: Norm | None, radius: float, space: Space | None = Space.INPUT) -> Neighbourhood:
    return Neighbourhood(space=space, norm=norm, radius=radius)


def smallest_float_at_least(exact: Fraction) -> float:
    x = float(exact)
    return x if Fraction(x) >= exact else math.nextafter(x, math.inf)


@pytest.mark.parametrize("n", [1, 2, 7, 100])
@pytest.mark.parametrize("compose", [basic_composition, parallel_composition])
def test_n_copies_compose_to_n_eps_n_delta(n: int, compose) -> None:
    total = compose([g()] * n)
    assert total.epsilon == pytest.approx(n * 0.3, rel=1e-15) and total.epsilon >= math.fsum([0.3] * n)
    assert total.delta == pytest.approx(n * 1e-5, rel=1e-15) and total.delta >= math.fsum([1e-5] * n)
    assert total.radius == 0.1 and total.metric == L2


def test_composition_takes_the_smallest_radius_and_sums_budgets() -> None:
    total = basic_composition([g(0.1, 1e-6, 0.5), g(0.2, 2e-6, 0.05), g(0.4, 0.0, 0.2)])
    assert total.radius == 0.05
    assert total.epsilon == pytest.approx(0.7) and total.delta == pytest.approx(3e-6)


def test_composition_refuses_mixed_spaces_but_accepts_all_pairs_guarantees() -> None:
    with pytest.raises(ValueError, match="different spaces"):
        basic_composition([g(), g(norm=Norm.LINF, space=Space.EMBEDDING)])
    mixed = basic_composition([g(), LDPImage(epsilon=1.0).guarantee])
    assert mixed.metric == L2 and mixed.radius == 0.1 and mixed.epsilon == pytest.approx(1.3)
    with pytest.raises(ValueError, match="at least one"):
        basic_composition([])
    with pytest.raises(TypeError, match="Guarantee"):
        basic_composition([g(), (1.0, 0.0)])  # type: ignore[list-item]


def test_delta_is_capped_at_one_and_then_called_vacuous() -> None:
    total = basic_composition([g(delta=0.6), g(delta=0.6)])
    assert total.delta == 1.0 and total.vacuous and "No protection" in total.describe()


def test_post_processing_is_the_identity() -> None:
    base = g()
    assert post_processing(base) is base


@pytest.mark.parametrize("eps", [0.3, 2.0])
def test_chaining_at_beta_equal_alpha_is_the_identity(eps: float) -> None:
    base = GaussInput(epsilon=eps, delta=1e-5, alpha=0.1).guarantee
    assert chaining(base, 0.1) == base


@pytest.mark.parametrize(
    "eps,delta,alpha,beta", [(0.3, 1e-5, 0.1, 0.35), (1.0, 1e-12, 0.05, 1.0), (0.01, 1e-6, 1.0, 9.5)]
)
def test_chaining_matches_the_direct_geometric_sum(
    eps: float, delta: float, alpha: float, beta: float
) -> None:
    """δ_h = Σ_{i<h} e^{iε}·δ (Appendix D, Eq. 33), which exceeds the main text's misprinted h·δ."""
    h = math.ceil(Fraction(beta) / Fraction(alpha))
    chained = chaining(g(eps, delta, alpha), beta)
    direct = math.fsum(math.exp(i * eps) * delta for i in range(h))
    assert chained.delta == pytest.approx(direct, rel=1e-12) and chained.delta >= direct
    assert chained.epsilon == pytest.approx(h * eps) and chained.epsilon >= h * eps
    assert chained.radius == beta
    assert chained.delta > h * delta


def test_chaining_hops_never_undercount_float_fuzz() -> None:
    assert chaining_hops(0.1, 0.3) == 3  # 0.3/0.1 = 2.9999999999999996 in floats
    assert chaining_hops(0.1, 0.1 + 0.2) == 4  # 0.30000000000000004 really is above 3·0.1
    assert chaining_hops(0.1, 0.7) == 7
    assert chaining_hops(0.5, 0.25) == 1
    assert chaining_hops(1.0, 3.0000000001) == 4
    for alpha, beta in [(0.1, 0.3), (0.07, 0.49), (1 / 3, 1.0), (0.2, 0.6000000000000001)]:
        assert chaining_hops(alpha, beta) * Fraction(alpha) >= Fraction(beta)  # h·α covers β exactly


def test_chaining_overflow_gives_a_vacuous_but_true_delta() -> None:
    assert chaining(g(eps=5.0, delta=1e-5, radius=0.1), 30.0).delta == 1.0
    lap = chaining(g(eps=1.0, delta=0.0), 0.5)
    assert lap.delta == 0.0 and lap.epsilon == pytest.approx(5.0)
    everywhere = LDPImage(epsilon=1.0).guarantee
    assert chaining(everywhere, 100.0) == everywhere


def test_group_privacy_identity_formula_and_chaining_is_tighter() -> None:
    base = g(eps=0.5, delta=1e-6, radius=0.1)
    assert group_privacy(base, 1) == base
    grouped = group_privacy(base, 4)
    assert grouped.epsilon == pytest.approx(2.0)
    assert grouped.delta == pytest.approx(4 * math.exp(3 * 0.5) * 1e-6, rel=1e-12)
    assert grouped.radius == pytest.approx(0.4)
    assert chaining(base, 0.4).delta <= grouped.delta
    with pytest.raises(ValueError, match="k"):
        group_privacy(base, 0)


def test_ledger_totals_entries_and_round_trip() -> None:
    a = GaussInput(epsilon=0.5, delta=1e-5, alpha=0.1).guarantee
    b = GaussInput(epsilon=0.25, delta=1e-6, alpha=0.05).guarantee
    ledger = PrivacyLedger()
    assert len(ledger) == 0 and ledger.total().epsilon == 0.0 and ledger.total().all_pairs
    ledger = ledger.add(a, label="first image").add(b, label="second image")
    assert [e.label for e in ledger.entries] == ["first image", "second image"]
    total = ledger.total()
    assert (
        total.epsilon == pytest.approx(0.75) and total.delta == pytest.approx(1.1e-5) and total.radius == 0.05
    )
    data = ledger.to_dicts()
    assert json.loads(json.dumps(data)) == data
    assert PrivacyLedger.from_dicts(data) == ledger
    with pytest.raises(ValueError, match="label"):
        ledger.add(a, label="")


def test_guarantee_relation_text_enums_and_all_pairs() -> None:
    a = Guarantee(epsilon=1.0, delta=0.0, radius=0.1, space="embedding", norm="linf")
    assert (a.space, a.norm, a.metric) == (Space.EMBEDDING, Norm.LINF, EMB)
    assert a == Guarantee(epsilon=1.0, delta=0.0, radius=0.1, metric=EMB)  # the text alone, if known
    everywhere = Guarantee(epsilon=1.0, delta=0.0, radius=math.inf, space=Space.INPUT, norm=Norm.L1)
    assert (everywhere.space, everywhere.norm, everywhere.metric) == (None, None, ANY_METRIC)
    # one relation for the two Gaussian mechanisms, which older versions labelled differently
    gi = GaussInput(epsilon=1.0, delta=1e-5, alpha=0.1).guarantee
    go = GaussOutput(epsilon=1.0, delta=1e-5, alpha=0.1, lipschitz=2.0).guarantee
    assert gi.neighbourhood == go.neighbourhood == hood(Norm.L2, 0.1)
    assert LapOutput(epsilon=1.0, alpha=0.1, lipschitz=2.0).guarantee.neighbourhood == hood(Norm.L1, 0.1)
    ptr = ptr_scales(epsilon=1.0, delta=0.05, radius=0.2, delta_p=1.0).guarantee
    assert ptr.neighbourhood == hood(Norm.LINF, 0.2, Space.EMBEDDING)


@pytest.mark.parametrize(
    "inner,outer,inside",
    [
        ((Norm.L1, 0.1), (Norm.L1, 0.1), True),
        ((Norm.L1, 0.1), (Norm.L2, 0.1), True),  # ‖·‖₂ ≤ ‖·‖₁
        ((Norm.L1, 0.1), (Norm.LINF, 0.1), True),
        ((Norm.L2, 0.1), (Norm.LINF, 0.1), True),  # ‖·‖∞ ≤ ‖·‖₂
        ((Norm.L2, 0.05), (Norm.L2, 0.1), True),
        ((Norm.L2, 0.1), (Norm.L1, 0.1), False),  # (a/√2, a/√2) has ℓ1 norm √2·a
        ((Norm.LINF, 0.1), (Norm.L2, 0.1), False),
        ((Norm.LINF, 0.1), (Norm.L1, 0.1), False),
        ((Norm.L1, 0.2), (Norm.L2, 0.1), False),  # a larger radius never fits
        ((Norm.L2, 0.1), (Norm.L1, 1.0), False),  # would need √d·0.1 ≤ 1: depends on the dimension
    ],
)
def test_ball_inclusions_are_the_dimension_free_ones(inner: tuple, outer: tuple, inside: bool) -> None:
    (p, a), (q, alpha) = inner, outer
    assert hood(p, a).within(hood(q, alpha)) is inside
    assert not hood(p, a).within(hood(q, alpha, Space.EMBEDDING))  # other space: never
    assert hood(p, a).within(hood(None, math.inf)) and not hood(None, math.inf).within(hood(q, alpha))
    # geometry: "inside" holds for random points of the ℓp ball in many dimensions; "outside" has a
    # witness in some dimension (a point of the ℓp sphere outside the ℓq ball of radius α)
    rng = np.random.default_rng(0)
    worst = 0.0
    for d in (1, 2, 3, 64, 10_000):
        v = rng.standard_normal((50, d))
        v = np.vstack([v, np.ones((1, d))])
        v *= a / np.linalg.norm(v, ord=p.p, axis=1, keepdims=True)
        worst = max(worst, float(np.max(np.linalg.norm(v, ord=q.p, axis=1) / alpha)))
    assert (worst <= 1 + 1e-12) is inside


@pytest.mark.parametrize("eps,delta,alpha", [(1.0, 1e-5, 0.1), (0.1, 1e-6, 0.05), (2.5, 3e-7, 0.2)])
def test_one_draw_on_the_ip_page_costs_l2_pairs_2eps_and_l1_pairs_3eps(
    eps: float, delta: float, alpha: float
) -> None:
    """Issue 18: Gauss-Input + Gauss-Output + Lap-Output at (ε, δ, α) on one image."""
    draw = [
        GaussInput(epsilon=eps, delta=delta, alpha=alpha).guarantee,
        GaussOutput(epsilon=eps, delta=delta, alpha=alpha, lipschitz=1.5).guarantee,
        LapOutput(epsilon=eps, alpha=alpha, lipschitz=1.5).guarantee,
    ]
    ledger = PrivacyLedger()
    for d in draw:
        ledger = ledger.add(d, label=d.mechanism)
    l1, l2 = ledger.totals_by_relation()  # sorted by norm
    two_eps = smallest_float_at_least(2 * Fraction(eps))
    three_eps = smallest_float_at_least(3 * Fraction(eps))
    two_delta = smallest_float_at_least(2 * Fraction(delta))
    assert l2.neighbourhoods == (hood(Norm.L2, alpha),)
    assert (l2.epsilon, l2.delta, l2.covering, l2.missing) == (two_eps, two_delta, (0, 1), (2,))
    assert not l2.complete  # Lap-Output's ℓ1 ball misses some ℓ2 pairs
    assert l1.neighbourhoods == (hood(Norm.L1, alpha),)
    assert (l1.epsilon, l1.delta, l1.covering, l1.missing) == (three_eps, two_delta, (0, 1, 2), ())
    worst = ledger.worst_case()
    assert worst == l1
    assert worst.guarantee == Guarantee(
        epsilon=three_eps,
        delta=two_delta,
        radius=alpha,
        space="input",
        norm="l1",
        mechanism="basic composition of 3",
    )
    total = ledger.total()
    assert (total.epsilon, total.delta, total.radius, total.norm) == (three_eps, two_delta, alpha, Norm.L1)
    if eps == 1.0:
        assert (l2.epsilon, l2.delta, l1.epsilon) == (2.0, 2e-5, 3.0)  # exact sums stay exact


def test_different_radii_compose_on_the_pairs_every_release_covers() -> None:
    ledger = (
        PrivacyLedger()
        .add(g(0.5, 1e-5, 0.1, Norm.L2), label="a")
        .add(g(0.25, 0.0, 0.05, Norm.L2), label="b")
        .add(g(1.0, 2e-6, 0.2, Norm.L1), label="c")
    )
    rows = {r.neighbourhoods[0]: r for r in ledger.totals_by_relation()}
    assert list(rows) == [hood(Norm.L1, 0.05), hood(Norm.L1, 0.2), hood(Norm.L2, 0.05), hood(Norm.L2, 0.1)]
    assert rows[hood(Norm.L2, 0.1)].covering == (0,)  # b's 0.05-ball and c's ℓ1 ball miss some pairs
    assert rows[hood(Norm.L2, 0.05)].covering == (0, 1)
    assert rows[hood(Norm.L1, 0.2)].covering == (2,)  # the ℓ1 0.2-ball is not inside the ℓ2 0.1-ball
    joint = rows[hood(Norm.L1, 0.05)]  # added: no release states it, but every release covers it
    assert (
        joint.complete
        and joint.epsilon == 1.75
        and joint.delta == smallest_float_at_least(Fraction(1e-5) + Fraction(2e-6))
    )
    worst = ledger.worst_case()
    assert worst == joint and worst.epsilon > max(r.epsilon for r in rows.values() if not r.complete)
    assert common_neighbourhood(e.guarantee for e in ledger.entries) == hood(Norm.L1, 0.05)


def test_different_spaces_are_listed_apart_and_added_in_the_worst_case() -> None:
    ip = GaussInput(epsilon=0.5, delta=1e-5, alpha=0.1).guarantee
    ptr = ptr_scales(epsilon=1.0, delta=0.05, radius=0.5, delta_p=1.0).guarantee  # (2ε, δ/2, R)
    ldp = LDPImage(epsilon=2.0).guarantee
    ledger = PrivacyLedger().add(ip, label="ip").add(ptr, label="ptr").add(ldp, label="ldp")
    inp, emb = ledger.totals_by_relation()
    assert inp.neighbourhoods == (hood(Norm.L2, 0.1),) and emb.neighbourhoods == (
        hood(Norm.LINF, 0.5, Space.EMBEDDING),
    )
    assert (inp.epsilon, inp.delta, inp.covering, inp.missing) == (2.5, 1e-5, (0, 2), (1,))
    assert (emb.epsilon, emb.delta, emb.covering, emb.missing) == (4.0, 0.025, (1, 2), (0,))
    worst = ledger.worst_case()  # a pair of images that is a neighbour in both spaces
    assert worst.neighbourhoods == (hood(Norm.L2, 0.1), hood(Norm.LINF, 0.5, Space.EMBEDDING))
    assert (worst.epsilon, worst.delta, worst.covering) == (
        4.5,
        smallest_float_at_least(Fraction(1e-5) + Fraction(0.025)),
        (0, 1, 2),
    )
    assert worst.guarantee is None and "embedding z" in worst.pairs() and "model input" in worst.pairs()
    with pytest.raises(ValueError, match="different spaces"):
        ledger.total()
    only_ldp = PrivacyLedger().add(ldp, label="ldp")
    (row,) = only_ldp.totals_by_relation()
    assert row.neighbourhoods == (hood(None, math.inf),) and row == only_ldp.worst_case()
    assert PrivacyLedger().totals_by_relation() == () and PrivacyLedger().worst_case().epsilon == 0.0


def test_sums_are_rounded_up_only_when_needed() -> None:
    exact = 3 * Fraction(0.1)
    total = basic_composition([g(0.1)] * 3)
    assert total.epsilon == smallest_float_at_least(exact) and Fraction(total.epsilon) >= exact
    assert basic_composition([g(0.25)] * 4).epsilon == 1.0
    mixed = basic_composition([g(0.1, radius=0.2, norm=Norm.LINF), g(0.2, radius=0.3, norm=Norm.L2)])
    assert mixed.neighbourhood == hood(Norm.L2, 0.2)  # smallest norm, smallest radius
    with pytest.raises(ValueError, match="overflows"):
        basic_composition([g(1e308), g(1e308)])


def test_ledger_round_trip_and_ledgers_stored_before_the_relation() -> None:
    ledger = (
        PrivacyLedger()
        .add(GaussInput(epsilon=0.5, delta=1e-5, alpha=0.1).guarantee, label="gi")
        .add(LapOutput(epsilon=0.5, alpha=0.1, lipschitz=1.0).guarantee, label="lo")
        .add(ptr_scales(epsilon=1.0, delta=0.05, radius=0.5, delta_p=1.0).guarantee, label="ptr")
        .add(LDPImage(epsilon=2.0).guarantee, label="ldp")
    )
    data = ledger.to_dicts()
    assert data[0]["space"] == "input" and data[0]["norm"] == "l2" and data[3]["space"] is None
    assert json.loads(json.dumps(data)) == data
    assert PrivacyLedger.from_dicts(json.loads(json.dumps(data))) == ledger
    # the same ledger as an older version stored it: metric texts only, no space or norm
    old = [{k: v for k, v in d.items() if k not in ("space", "norm")} for d in data]
    for d, text in zip(
        old,
        ["ℓ2 on the input, pixel values in [0, 1]", "ℓ1 on the model input", EMB, ANY_METRIC],
        strict=True,
    ):
        d["metric"] = text
    assert PrivacyLedger.from_dicts(old) == ledger
    with pytest.raises(ValueError, match=r"data\[1\] \('lo'\).*no known neighbourhood"):
        PrivacyLedger.from_dicts([old[0], {**old[1], "metric": "ℓ1 on the pixels"}])
    with pytest.raises(ValueError, match="needs radius = inf"):
        PrivacyLedger.from_dicts([{**old[0], "metric": ANY_METRIC}])  # the old default: refused
    with pytest.raises(ValueError, match="label"):
        PrivacyLedger.from_dicts([{k: v for k, v in data[0].items() if k != "label"}])
    with pytest.raises(ValueError, match="unknown guarantee fields"):
        PrivacyLedger.from_dicts([{**data[0], "colour": "red"}])


@pytest.mark.parametrize(
    "kwargs,exc",
    [
        ({"epsilon": -0.1}, ValueError),
        ({"delta": 1.5}, ValueError),
        ({"radius": 0.0}, ValueError),
        ({"epsilon": math.nan}, ValueError),
        ({"metric": 3}, TypeError),
        ({"space": None, "norm": None}, ValueError),  # a finite radius needs a neighbourhood
        ({"norm": None}, ValueError),
        ({"space": "pixels"}, ValueError),
        ({"norm": 2}, TypeError),
        ({"metric": "ℓ2 on something else"}, ValueError),  # unknown text: refused, never guessed
        ({"metric": EMB}, ValueError),  # contradicts space/norm
        ({"space": None, "norm": None, "metric": ANY_METRIC}, ValueError),  # all pairs needs radius ∞
    ],
)
def test_guarantee_validates_itself(kwargs: dict, exc: type) -> None:
    base = {"epsilon": 1.0, "delta": 0.0, "radius": 1.0, "space": "input", "norm": "l2"}
    with pytest.raises(exc):
        Guarantee(**{**base, **kwargs})


def test_group_radius_is_rounded_down_and_overflows_are_refused() -> None:
    grouped = group_privacy(g(eps=0.5, delta=1e-6, radius=0.1), 3)
    assert 3 * 0.1 == 0.30000000000000004 and Fraction(0.30000000000000004) > 3 * Fraction(0.1)
    assert grouped.radius == 0.3 and Fraction(grouped.radius) <= 3 * Fraction(0.1)  # never beyond k·α
    assert group_privacy(g(eps=1e-300, delta=0.0, radius=1e308), 10).radius == 1.7976931348623157e308
    with pytest.raises(ValueError, match=r"k = 10000000000.*overflows"):
        group_privacy(g(eps=1e300), 10**10)
    with pytest.raises(ValueError, match=r"beta = 1e\+308.*h = ⌈beta/radius⌉ = about 10\^631.*overflows"):
        chaining(g(eps=1.0, delta=0.0, radius=5e-324), 1e308)
    tiny = chaining(g(eps=0.0, delta=1e-300, radius=5e-324), 1e308)  # ε = 0: δ·h reaches 1
    assert (tiny.epsilon, tiny.delta) == (0.0, 1.0)
    with pytest.raises(TypeError, match="data must be a list"):
        PrivacyLedger.from_dicts(3)  # type: ignore[arg-type]
